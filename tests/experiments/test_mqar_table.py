"""experiments/mqar/config.py's tables (write) on a sweep directory the test writes: which points it reads (the pilot, then the
grid at each arm's chosen rate, as the sweep chooses them), the per-seed cells, mean ± std, seeds reaching
0.9, the first step there, unfinished cells as '…', the learning-rate and seed checks, and the CSV beside
--out."""
import csv
import importlib.util
import json
import os

import pytest

from linear_seq.studies import sweep
from tests.helpers import REPO

TABLE = os.path.join(REPO, "experiments", "mqar", "config.py")


@pytest.fixture(scope="module")
def table():
  spec = importlib.util.spec_from_file_location("mqar_study", TABLE)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)   # defines no absl flags (the tables CLI defines them when it runs)
  return module


def _write_point(workdir, overrides, curve, *, state_size=1000, seq_len=64, steps=1500):
  """A finished point: eval.json at its last step, eval accuracy every 250 steps, the resolved config."""
  sub = os.path.join(workdir, sweep.point_name(overrides))
  os.makedirs(sub)
  with open(os.path.join(sub, "eval.json"), "w") as f:
    json.dump({"step": steps, "accuracy": curve[-1], "state_size": state_size}, f)
  with open(os.path.join(sub, "metrics.jsonl"), "w") as f:
    for i, a in enumerate(curve):
      f.write(json.dumps({"step": 250 * (i + 1), "eval_accuracy": a}) + "\n")
  with open(os.path.join(sub, "config.json"), "w") as f:
    json.dump({"data": {"seq_len": seq_len, "num_kv_pairs": 4}, "train": {"num_steps": steps}}, f)


def test_tables_from_a_sweep_directory(table, tmp_path):
  study = table
  wd = str(tmp_path / "runs")
  pt = study.point
  # gla: 1e-3 wins the pilot; its grid has seed 0 at widths 32 (collapsed) and 64 (the pilot point), seed 1 at 64.
  _write_point(wd, pt("gla", 64, 1e-3, 0), [0.5, 0.8, 0.92, 0.95, 0.96, 0.97], state_size=2048)
  _write_point(wd, pt("gla", 64, 3e-3, 0), [0.3] * 6)
  _write_point(wd, pt("gla", 32, 1e-3, 0), [0.1] * 6, state_size=512)
  _write_point(wd, pt("gla", 64, 1e-3, 1), [0.2, 0.4, 0.6, 0.8, 0.85, 0.88], state_size=2048)
  _write_point(wd, pt("gla", 32, 3e-3, 0), [0.2, 0.5, 0.7, 0.8, 0.9, 0.95], state_size=512)   # lrcheck
  # s4: only one pilot rate has run, so its rate is undecided and it has no grid rows.
  _write_point(wd, pt("s4", 64, 1e-3, 0), [0.1] * 6)
  rows = table.load_rows(wd)
  assert len(rows) == 6 and all(r["status"] == "ok" for r in rows)

  pilot = table.pilot_table(rows)
  assert "| gla | 0.970 ↑ | 0.300 |  | 0.001 |" in pilot.splitlines()
  assert "| s4 | 0.100 |  |  | … |" in pilot.splitlines()

  cells = table.grid(rows, hard=False)
  assert [(c.arm, c.key, len(c.rows)) for c in cells] == [("gla", 32, 1), ("gla", 64, 2), ("gla", 128, 0)]
  grid = table.grid_table(cells).splitlines()
  assert grid[2] == "| gla | 32 | 0.001 | 512 | 0.100 / … / … | 0.100 (1 seed) | 0/1 | — |"
  assert grid[3] == "| gla | 64 | 0.001 | 2,048 | 0.970 / 0.880 / … | 0.925 ± 0.064 | 1/2 | 750 / — |"
  assert grid[4] == "| gla | 128 | 0.001 | … | … / … / … | … | 0/0 |  |"

  check = table.lrcheck_table(rows).splitlines()
  assert check[2:] == ["| gla | 0.001 | 0.100 | 0.950 ↑ | … |"]   # 3e-3 still rising over its last 500 steps

  assert table.seedcheck_table(rows).count("\n") == 2   # no cell has split seeds yet: the header only
  split = rows + [{"_overrides": pt("gla", 32, 1e-3, 1), "status": "ok", "accuracy": 0.95, "_metrics": [],
                   "_config": {"data.seq_len": 64, "train.num_steps": 1500}}]
  assert table.seedcheck_table(split).splitlines()[2:] == [
      "| gla | 32 | 0.001 | 1: 0.950 | 0 | 0.100 | 0.950 ↑ | … | … |"]
  longer = {"_overrides": pt("gla", 32, 1e-3, 0, **{"train.num_steps": 3000}), "status": "ok", "accuracy": 0.99,
            "_metrics": [], "_config": {"data.seq_len": 64, "train.num_steps": 3000}}
  assert table.seedcheck_table(split + [longer]).splitlines()[2:] == [
      "| gla | 32 | 0.001 | 1: 0.950 | 0 | 0.100 | 0.950 ↑ | … | 0.990 |"]
  assert table.grid(split + [longer], hard=False) == table.grid(split, hard=False)   # not a grid seed
  assert table.seedcheck_table(split + [longer], hard=True).count("\n") == 2   # main-grid rows: not the hard check
  hard = study.grid_extra(True)
  hard_rows = [{"_overrides": pt("gla", 64, lr, seed, **{**hard, **more}), "status": "ok", "accuracy": acc,
                "_metrics": [], "_config": {"data.seq_len": 128, "train.num_steps": 1500}}
               for lr, seed, acc, more in [(1e-3, 0, 0.999, {}), (1e-3, 1, 0.03, {}), (1e-2, 1, 0.8, {}),
                                           (1e-3, 1, 0.97, {"train.num_steps": 3000})]]
  assert table.seedcheck_table(split + hard_rows, hard=True).splitlines()[2:] == [
      "| gla | 64 | 0.001 | 0: 0.999 | 1 | 0.030 | … | 0.800 | 0.970 |"]
  assert table.seedcheck_table(split + hard_rows) == table.seedcheck_table(split)

  out = tmp_path / "study.md"
  table.write(wd, archive_dir="", out=str(out))
  text = out.read_text()
  assert "### Main point" in text and grid[3] in text and check[2] in text
  with open(tmp_path / "study.csv") as f:
    got = list(csv.DictReader(f))
  assert len(got) == 6
  first = {(r["arm"], r["width"], r["lr"], r["seed"]): r for r in got}[("gla", "64", "0.001", "0")]
  assert first["first_step_0.9"] == "750" and first["seq_len"] == "64" and float(first["accuracy"]) == 0.97

