"""plots.py: best-over selection, seeds and means, dot plots, bounded axes, PNG + PDF files, the setup line,
and redrawing from a results.csv; on hand-made rows."""
import os

import ml_collections
import numpy as np
import pytest

from linear_seq.studies import collect
from linear_seq.studies import plots
from linear_seq.studies import report


def _rows(cells):
  return [{"name": f"p{i}", "status": "ok", "_overrides": {}, "_config": {}, **c} for i, c in enumerate(cells)]


def test_best_over_and_seed_values():
  rows = _rows([{"m": m, "w": w, "lr": lr, "acc": a}
                for m, w, lr, a in [("a", 1, 1, 0.2), ("a", 1, 2, 0.6), ("a", 2, 1, 0.9), ("b", 1, 1, 0.1)]])
  series = plots.xy_points(rows, x="w", y="acc", group="m", best_over=["lr"])
  assert series == {"a": [(1, 0.6, 0.0, 1), (2, 0.9, 0.0, 1)], "b": [(1, 0.1, 0.0, 1)]}
  assert plots.xy_points(rows, x="w", y="acc", group="m", best_over=["lr"], better="min")["a"][0][1] == 0.2
  # Without a group: one series; points with the same x (seeds, other settings) are averaged.
  assert plots.xy_points(rows, x="w", y="acc") == {"": [(1, pytest.approx(0.3), pytest.approx(0.2646, abs=1e-4), 3),
                                                        (2, 0.9, 0.0, 1)]}
  assert plots.xy_values(rows, x="w", y="acc") == {"": [(1, [0.2, 0.6, 0.1]), (2, [0.9])]}
  with pytest.raises(ValueError, match="'max' or 'min'"):
    plots.xy_points(rows, x="w", y="acc", better="best")
  with pytest.raises(ValueError, match="unknown plot kind 'pie'; valid kinds: xy, curves, series"):
    plots.draw([{"kind": "pie", "file": "a.png"}], rows, "/unused")
  with pytest.raises(ValueError, match="'file' ending in .png"):
    plots.draw([{"kind": "xy", "x": "w", "y": "acc"}], rows, "/unused")


def test_seeds_are_points_and_the_mean_a_line_inside_the_metric_range():
  """Accuracy near 1 with a wide seed spread: no error bar, the axis stops at its natural range."""
  rows = _rows([{"w": w, "acc": a, "seed": s, "step": 100, "dataset": "mqar", "eval_seq_len": 64}
                for w, accs in ((32, (0.2, 0.3, 0.4)), (64, (0.99, 0.6, 1.0))) for s, a in enumerate(accs)])
  spec = {"kind": "xy", "x": "w", "y": "acc", "file": "a.png", "logx": 2}
  ax = plots.plt.figure().gca()
  assert plots._draw_xy(ax, rows, {**spec, "y": "acc"})  # pylint: disable=protected-access
  (dots,) = ax.collections  # the seeds
  assert sorted(dots.get_offsets()[:, 1]) == sorted(r["acc"] for r in rows)
  (line,) = ax.get_lines()  # the mean
  np.testing.assert_allclose(line.get_ydata(), [0.3, (0.99 + 0.6 + 1.0) / 3])
  assert not ax.containers  # no error bars
  plots.plt.close("all")
  for r in rows:
    r["accuracy"] = r.pop("acc")
  ax = plots.plt.figure().gca()
  plots._draw_xy(ax, rows, {**spec, "y": "accuracy"})  # pylint: disable=protected-access
  plots._clamp_to_range(ax, "accuracy")  # pylint: disable=protected-access
  assert ax.get_ylim()[1] <= 1.03 and ax.get_ylabel() == "validation accuracy (fraction of answers)"
  plots.plt.close("all")
  assert plots.setup_line(rows, {**spec, "y": "accuracy"}) == (
      "mqar T=64 · 100 training steps · 3 seeds per point: seeds as dots, mean as line")


def test_categorical_x_is_a_dot_plot_around_the_values(tmp_path):
  """No bars from zero: the y axis spans the values (2.4 vs 2.5 bits/byte stay apart)."""
  rows = _rows([{"m": m, "bits_per_byte": v} for m, v in (("a", 2.4), ("b", 2.5))])
  spec = {"kind": "xy", "x": "m", "y": "bits_per_byte", "file": "dots.png"}
  ax = plots.plt.figure().gca()
  assert plots._draw_xy(ax, rows, spec)  # pylint: disable=protected-access
  assert not ax.patches and ax.get_ylim()[0] > 2.3 and ax.get_ylabel() == "validation bits/byte"
  assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b"]
  plots.plt.close("all")
  assert plots.draw([spec], rows, str(tmp_path)) == ["dots.png", "dots.pdf"]
  assert (tmp_path / "dots.png").read_bytes()[:4] == b"\x89PNG" and (tmp_path / "dots.pdf").read_bytes()[:4] == b"%PDF"
  pdf = (tmp_path / "dots.pdf").read_bytes()
  plots.draw([spec], rows, str(tmp_path))
  assert (tmp_path / "dots.pdf").read_bytes() == pdf  # no timestamps: the same plot gives the same file
  md = report.markdown(rows, study="s", command="", env={}, plot_files=["dots.png", "dots.pdf"])
  assert "![dots](dots.png)" in md and "![dots](dots.pdf)" not in md and "as PDF: dots.pdf" in md
  png_only = report.markdown(rows, study="s", command="", env={}, plot_files=["dots.png"])
  assert "![dots](dots.png)\n\n## " in png_only and "as PDF" not in png_only   # one blank line, no PDF line
  assert plots.draw([spec], rows, str(tmp_path / "new" / "dir")) == ["dots.png", "dots.pdf"]   # the folder made


def test_redraw_from_results_csv_and_curves(tmp_path):
  """collect.rows_from_csv: the overrides typed by the config, '_config' resolved, curves from curves.json."""
  base = ml_collections.ConfigDict({"model": {"mixer": "gla", "d_model": 16}, "seed": 0}).lock()
  point = tmp_path / "p"
  os.makedirs(point)
  with open(point / "metrics.jsonl", "w") as f:
    f.write('{"step": 1, "train_loss": 2.0}\n{"step": 2, "train_loss": 1.5, "tokens_per_sec": 9}\n')
  with open(point / "eval.json", "w") as f:
    f.write('{"step": 2, "accuracy": 0.5}')
  rows = [collect.collect_point(str(point), {"model.d_model": 32, "seed": 1}, "model.d_model=32,seed=1")]
  report.write_csv(str(tmp_path / "results.csv"), rows)
  collect.write_curves(str(tmp_path), rows)
  (back,) = collect.rows_from_csv(str(tmp_path / "results.csv"), base)
  assert back["_overrides"] == {"model.d_model": 32, "seed": 1} and back["accuracy"] == 0.5
  assert back["_config"] == {"model.mixer": "gla", "model.d_model": 32, "seed": 1}
  assert back["_metrics"] == [{"step": 1, "train_loss": 2.0}, {"step": 2, "train_loss": 1.5}]
  files = plots.draw([{"kind": "curves", "y": "train_loss", "file": "c.png"},
                      {"kind": "xy", "x": "model.d_model", "y": "accuracy", "file": "x.png"}], [back], str(tmp_path))
  assert files == ["c.png", "c.pdf", "x.png", "x.pdf"]


def test_groups_keep_their_colour_in_a_plot_of_a_subset():
  """spec['groups']: a group's colour is its place in that list, whichever groups a plot draws."""
  rows = _rows([{"m": m, "x": x, "y": 1.0 + x} for m in ("a", "b", "c") for x in (1, 2)])
  spec = {"kind": "xy", "x": "x", "y": "y", "group": "m", "file": "c.png", "groups": ["a", "b", "c"]}
  colours = {}
  for subset in (("a", "b", "c"), ("b", "c"), ("c",)):
    ax = plots.plt.figure().gca()
    plots._draw_xy(ax, [r for r in rows if r["m"] in subset], spec)  # pylint: disable=protected-access
    for line in ax.get_lines():
      colours.setdefault(line.get_label(), set()).add(line.get_color())
    plots.plt.close("all")
  assert all(len(c) == 1 for c in colours.values()) and len(set.union(*colours.values())) == 3
  ax = plots.plt.figure().gca()   # without 'groups': colours in the order the groups appear
  plots._draw_xy(ax, [r for r in rows if r["m"] == "c"], {**spec, "groups": ()})  # pylint: disable=protected-access
  assert ax.get_lines()[0].get_color() == plots._COLORS[0]  # pylint: disable=protected-access
  plots.plt.close("all")


def test_a_title_says_what_the_drawn_points_ran():
  """`{key}` placeholders come from the rows (a tiny sweep at T=32 is not titled T=128)."""
  rows = [{"_config": {"data.seq_len": 32, "train.num_steps": 1200}, "seed": s} for s in (0, 1)]
  assert plots.fill_title("trained at T={data.seq_len}, {train.num_steps:,} steps", rows) == (
      "trained at T=32, 1,200 steps")
  assert plots.fill_title("seeds {seed}; {model.width}", rows) == "seeds 0/1; ?"
  assert plots.fill_title("no placeholders", rows) == "no placeholders"
