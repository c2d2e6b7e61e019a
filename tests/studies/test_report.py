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


def _row(name, seed, accuracy, params=10, **overrides):
  return {"name": name, "status": "ok", "_overrides": {**overrides, "seed": seed}, "_config": {}, **overrides,
          "seed": seed, "accuracy": accuracy, "num_params": params}


def _table(md):
  """The results table's header and body lines, and the line above it (or None)."""
  lines = md.split("## Results")[1].split("\n\n")
  above = next((p for p in lines if p.startswith("In every row:")), None)
  table = next(p for p in lines if p.startswith("| "))
  return above, table.splitlines()


def test_constant_columns_are_said_above_the_table_and_seeds_by_value():
  """An override, params or the seeds with one value in every row: a line above the table, not a column; a
  measured column stays in the table even when constant."""
  rows = [_row(f"{m}{s}", s, 0.5, m=m, width=64) for m in ("a", "b") for s in (0, 2, 10)]
  md = report.markdown(rows, study="t", command="", env={})
  above, table = _table(md)
  assert "## Results (mean ± std over seeds 0, 2, 10)" in md        # by value, in numeric order
  assert above == "In every row: width=64; params 10; seeds 0, 2, 10."
  assert table[0] == "| m | accuracy |" and table[2:] == ["| a | 0.5 ± 0 |", "| b | 0.5 ± 0 |"]


def test_rows_with_different_seeds_keep_the_seeds_column():
  rows = [_row("a0", 0, 0.5, m="a"), _row("a1", 1, 0.7, m="a"), _row("b0", 0, 0.2, params=20, m="b")]
  md = report.markdown(rows, study="t", command="", env={})
  above, table = _table(md)
  assert "## Results (mean ± std over each row's seeds, column seeds; 0, 1 in all)" in md and above is None
  assert table[0] == "| m | params | accuracy | seeds |"
  assert table[2:] == ["| a | 10 | 0.6 ± 0.1414 | 0, 1 |", "| b | 20 | 0.2 | 0 |"]


def test_one_row_keeps_every_column():
  md = report.markdown([_row("a0", 0, 0.5, m="a")], study="t", command="", env={})
  above, table = _table(md)
  assert above is None and table[0] == "| m | params | accuracy | seeds |" and "## Results (seed 0)" in md
