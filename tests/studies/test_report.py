"""report.py: mean ± std over seeds, the markdown table and the failure list, on hand-made rows."""
import pytest

from linear_seq.studies import report


def test_aggregate_mean_std_over_seeds():
  rows = [{"name": f"s{s}", "status": "ok", "_overrides": {"m": "a", "seed": s}, "_config": {}, "m": "a",
           "seed": s, "accuracy": acc, "num_params": 10} for s, acc in enumerate([0.5, 0.7, 0.9])]
  rows.append({"name": "bad", "status": "failed", "_overrides": {"m": "b", "seed": 0}, "_config": {}, "m": "b",
               "seed": 0, "_workdir": "/tmp/bad"})
  (agg,) = report.aggregate(rows)
  assert agg["seeds"] == [0, 1, 2] and agg["accuracy"][2] == 3
  assert agg["accuracy"][0] == pytest.approx(0.7) and agg["accuracy"][1] == pytest.approx(0.2)
  md = report.markdown(rows, study="t", command="cmd", env={})
  assert "0.7 ± 0.2" in md and "mean ± std over seeds 0, 1, 2" in md and "`bad`: failed" in md
