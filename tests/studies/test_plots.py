"""plots.py: best-over selection, mean ± std per x, bar zoom and the spec errors, on hand-made rows."""
import numpy as np
import pytest

from linear_seq.studies import plots


def test_plot_errors_and_best_over(tmp_path):
  rows = [{"name": f"p{i}", "status": "ok", "_overrides": {}, "_config": {}, "m": m, "w": w, "lr": lr, "acc": a}
          for i, (m, w, lr, a) in enumerate([("a", 1, 1, 0.2), ("a", 1, 2, 0.6), ("a", 2, 1, 0.9), ("b", 1, 1, 0.1)])]
  series = plots.xy_points(rows, x="w", y="acc", group="m", best_over=["lr"])
  assert series == {"a": [(1, 0.6, 0.0, 1), (2, 0.9, 0.0, 1)], "b": [(1, 0.1, 0.0, 1)]}
  assert plots.xy_points(rows, x="w", y="acc", group="m", best_over=["lr"], better="min")["a"][0][1] == 0.2
  # Without a group: one series; points with the same x (seeds, other settings) are averaged.
  assert plots.xy_points(rows, x="w", y="acc") == {"": [(1, pytest.approx(0.3), pytest.approx(0.2646, abs=1e-4), 3),
                                                        (2, 0.9, 0.0, 1)]}
  with pytest.raises(ValueError, match="'max' or 'min'"):
    plots.xy_points(rows, x="w", y="acc", better="best")
  with pytest.raises(ValueError, match="unknown plot kind 'pie'; valid kinds: xy, curves, series"):
    plots.draw([{"kind": "pie", "file": "a.png"}], rows, str(tmp_path))
  with pytest.raises(ValueError, match="'file' ending in .png"):
    plots.draw([{"kind": "xy", "x": "w", "y": "acc"}], rows, str(tmp_path))
  # Bars over a categorical x; zoom starts the y axis near the smallest bar instead of 0.
  spec = {"kind": "xy", "x": "m", "y": "acc", "file": "bars.png", "zoom": True}
  bpb = [{"name": m, "status": "ok", "_overrides": {}, "_config": {}, "m": m, "acc": a}
         for m, a in (("a", 2.4), ("b", 2.5))]
  ax = plots.plt.figure().gca()
  assert plots._draw_xy(ax, bpb, spec)  # pylint: disable=protected-access
  np.testing.assert_allclose(ax.get_ylim(), (2.375, 2.525))  # a quarter of the spread either side
  plots.plt.close("all")
  assert plots.draw([spec], bpb, str(tmp_path)) == ["bars.png"] and (tmp_path / "bars.png").stat().st_size > 0
