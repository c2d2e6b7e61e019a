"""experiments/lm/config.py's tables (write) on a sweep directory the test writes: which points it reads (the pilot, its edge rates,
then the seeds at each arm's chosen rate, as the sweep chooses them), the pilot and main tables, the seed-spread
verdicts, the length table and the CSV beside --out."""
import csv
import dataclasses
import importlib.util
import json
import os

import pytest

from linear_seq.studies import sweep
from tests.helpers import REPO

TABLE = os.path.join(REPO, "experiments", "lm", "config.py")


@pytest.fixture(scope="module")
def table():
  spec = importlib.util.spec_from_file_location("lm_table", TABLE)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)   # defines no absl flags (the tables CLI defines them when it runs)
  return module


def _write_point(workdir, overrides, bits, *, long=(), early=1.8, late=1.6, params=400_000, state=9_000):
  """A finished point: eval.json at step 1200, decode.json, position_loss.json, the extra lengths' evaluations."""
  sub = os.path.join(workdir, sweep.point_name(overrides))
  os.makedirs(sub)

  def dump(name, obj):
    with open(os.path.join(sub, name), "w") as f:
      json.dump(obj, f)

  dump("eval.json", {"step": 1200, "bits_per_byte": bits, "num_params": params, "state_size": state,
                     "tokens_per_sec": 1000.0 + 100 * overrides["seed"], "eval_seq_len": 128})
  dump("decode.json", {"step": 1200, "decode_ms_per_token": 0.2})
  dump("position_loss.json", {"step": 1200, "position": list(range(1, 129)),
                              "position_loss": [early] * 16 + [1.7] * 48 + [late] * 64})
  for t, b in zip((512, 2048, 8192), long):
    dump(f"eval_validation_T{t}.json", {"step": 1200, "bits_per_byte": b, "eval_seq_len": t})
  dump("config.json", {"data": {"seq_len": 128}, "train": {"num_steps": 1200}})
  with open(os.path.join(sub, "metrics.jsonl"), "w") as f:
    f.write(json.dumps({"step": 1200, "eval_loss": bits * 0.69}) + "\n")


def test_tables_from_a_sweep_directory(table, tmp_path):
  study = table
  wd = str(tmp_path / "runs")
  pt = study.point
  w = dict(study.SWEEP.keys({"arms": ["softmax", "s4", "gla"]}))
  # softmax: 3e-3 wins the pilot (bracketed); seeds 1 and 2 have run at it.
  for lr, bits in [(1e-3, 2.5), (3e-3, 2.40), (1e-2, 2.45)]:
    _write_point(wd, pt("softmax", w["softmax"], lr, 0), bits, long=(3.0, 4.0, 5.0), state=65_536)
  _write_point(wd, pt("softmax", w["softmax"], 3e-3, 1), 2.42, long=(3.2, 4.2, 5.2), state=65_536)
  _write_point(wd, pt("softmax", w["softmax"], 3e-3, 2), 2.41, long=(3.1, 4.1, 5.1), state=65_536)
  # s4: best at the 1e-2 edge, the 3e-2 extension loses, so 1e-2; seed 1 at it has run, seed 2 has not.
  for lr, bits in [(1e-3, 2.6), (3e-3, 2.35), (1e-2, 2.30), (3e-2, 2.33)]:
    _write_point(wd, pt("s4", w["s4"], lr, 0), bits, long=(2.3, 2.3, 2.3))
  _write_point(wd, pt("s4", w["s4"], 1e-2, 1), 2.405, long=(2.4, 2.4, 2.4))
  # gla: best at the 1e-2 edge and its 3e-2 point has not run, so its rate is undecided.
  for lr, bits in [(1e-3, 2.5), (3e-3, 2.4), (1e-2, 2.38)]:
    _write_point(wd, pt("gla", w["gla"], lr, 0), bits)
  rows = table.load_rows(wd)
  assert len(rows) == 13 and all(r["status"] == "ok" for r in rows)

  pilot = table.pilot_table(rows).splitlines()
  assert f"| softmax | {w['softmax']} |  | 2.500 | 2.400 | 2.450 |  | 0.003 |" in pilot
  assert f"| s4 | {w['s4']} |  | 2.600 | 2.350 | 2.300 | 2.330 | 0.01 |" in pilot
  assert f"| gla | {w['gla']} |  | 2.500 | 2.400 | 2.380 |  | … |" in pilot
  assert "| mamba2 | … |  |  |  |  |  | … |" in pilot   # no point run yet

  cs = table.cells(rows)
  assert [(c.arm, c.lr, [r["_overrides"]["seed"] for r in c.rows]) for c in cs] == [
      ("s4", 1e-2, [0, 1]), ("softmax", 3e-3, [0, 1, 2])]   # sorted by mean: 2.3525 < 2.41
  main = table.main_table(cs).splitlines()
  assert main[2] == (f"| s4 | {w['s4']} | 400,000 | 9,000 | 0.01 | 2.300 / 2.405 / … | 2.353 ± 0.074 | 1050 | "
                     "0.200 | 1.800 → 1.600 |")
  assert main[3].startswith(f"| softmax | {w['softmax']} | 400,000 | 65,536 (KV cache, T=128) | 0.003 | "
                            "2.400 / 2.420 / 2.410 | 2.410 ± 0.010 | 1100 |")

  spread = table.spread_table(cs).splitlines()
  assert spread[2] == "| s4 | 2.353 | — | softmax (-0.058) | — |"   # s4's seed 1 (2.405) is inside softmax's range
  one = [dataclasses.replace(c, rows=c.rows[:1]) if c.arm == "s4" else c for c in cs]
  assert table.spread_table(one).splitlines()[2] == "| s4 | 2.300 | — | — | softmax (-0.110) |"   # 1 seed: open
  apart = [dataclasses.replace(c, rows=[{**r, "bits_per_byte": 2.2 + 0.01 * i} for i, r in enumerate(c.rows)])
           if c.arm == "s4" else c for c in cs]
  assert table.spread_table(apart).splitlines()[2] == "| s4 | 2.205 | softmax (-0.205) | — | — |"
  # separated() itself: tests/studies/test_tables.py

  lengths = table.length_table(cs).splitlines()
  assert lengths[0] == "| arm | T=128 | T=512 | T=2,048 | T=8,192 | T=8,192 − T=128 |"
  assert lengths[2] == "| s4 | 2.353 ± 0.074 | 2.350 ± 0.071 | 2.350 ± 0.071 | 2.350 ± 0.071 | -0.002 |"
  assert lengths[3] == "| softmax | 2.410 ± 0.010 | 3.100 ± 0.100 | 4.100 ± 0.100 | 5.100 ± 0.100 | +2.690 |"

  out = tmp_path / "study.md"
  table.write(wd, archive_dir="", out=str(out))
  text = out.read_text()
  assert "### Seed spread" in text and main[2] in text and lengths[3] in text
  by_rate = table.length_by_rate_table(table.load_rows(wd)).splitlines()
  assert by_rate[0] == "| arm | lr 0.001 | lr 0.003 | lr 0.01 | lr 0.03 |"
  assert by_rate[2] == "| softmax | +2.500 | +2.600 | +2.550 |  |" and by_rate[3] == "| s4 | -0.300 | -0.050 | +0.000 | -0.030 |"
  assert by_rate[2] in text
  with open(tmp_path / "study.csv") as f:
    got = list(csv.DictReader(f))
  assert len(got) == 13
  first = {(r["arm"], r["lr"], r["seed"]): r for r in got}[("softmax", "0.003", "1")]
  assert float(first["bits_per_byte"]) == 2.42 and float(first["bits_per_byte@T8192"]) == 5.2
