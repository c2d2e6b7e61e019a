"""experiments/hybrids/config.py's tables (write) on sweep directories the test writes: the pilot (seed 0 per rate, the chosen
rate), the arms at their chosen rates, the pure 2-layer LM arms taken from the LM study's points (marked ‡),
and the hybrid-vs-pure gaps signed so that + is the hybrid better."""
import importlib.util
import json
import os

import pytest

from linear_seq.studies import sweep
from tests.helpers import REPO


@pytest.fixture(scope="module")
def table():
  spec = importlib.util.spec_from_file_location("hybrids_study", os.path.join(REPO, "experiments", "hybrids", "config.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)   # defines no absl flags (the tables CLI defines them when it runs)
  return module


def _write_point(workdir, overrides, metrics, curve=(), steps=100):
  sub = os.path.join(workdir, sweep.point_name(overrides))
  os.makedirs(sub)
  with open(os.path.join(sub, "metrics.jsonl"), "w") as f:
    f.writelines(json.dumps({"step": 500 * (i + 1), "eval_accuracy": a}) + "\n" for i, a in enumerate(curve))
  with open(os.path.join(sub, "eval.json"), "w") as f:
    json.dump({"step": 100, "num_params": 1000, "state_size": 64, **metrics}, f)
  with open(os.path.join(sub, "config.json"), "w") as f:
    json.dump({"data": {"seq_len": 128}, "train": {"num_steps": steps}}, f)


# The arms' matched widths (what study.widths gives, pinned by tests/experiments/sweep_points.json), fixed here so
# that the test does not count 200 models' parameters.
WIDTHS = {"mqar": {a: 32 for a in ("gla-softmax", "deltanet-softmax", "gla3-softmax", "deltanet3-softmax", "gla2",
                                   "deltanet2", "softmax2", "gla4", "deltanet4", "softmax4", "softmax-gla", "softmax-deltanet")},
          "lm": {"gla-softmax": 128, "deltanet-softmax": 128, "gla3-softmax": 120, "deltanet3-softmax": 120,
                 "gla2": 120, "deltanet2": 120, "softmax2": 128, "gla4": 120, "deltanet4": 120, "softmax4": 128}}


def test_tables(table, tmp_path, monkeypatch):
  study = table
  ref = {"mqar": 32, "lm": 128}
  monkeypatch.setattr(study, "widths", lambda arg="": {(a, ref[t]): w for t in ref if f"task={t}" in arg
                                                       for a, w in WIDTHS[t].items()})
  pt = study.point
  mq, lm_wd, lm_study_wd = (str(tmp_path / d) for d in ("hybrids_mqar", "hybrids_lm", "lm"))
  ws = study.widths("task=mqar")
  # MQAR: gla-softmax best at 1e-3 (both seeds; its step out to 3e-4 worse), gla2 at 3e-3 (1e-2 worse),
  # softmax2 only its seed 0 at 1e-3 so far.
  for arm, lr, seed, acc in [("gla-softmax", 1e-3, 0, 0.9), ("gla-softmax", 3e-3, 0, 0.5), ("gla-softmax", 1e-3, 1, 0.8),
                             ("gla-softmax", 3e-4, 0, 0.7), ("gla2", 1e-3, 0, 0.2), ("gla2", 3e-3, 0, 0.3),
                             ("gla2", 3e-3, 1, 0.1), ("gla2", 1e-2, 0, 0.25), ("softmax2", 1e-3, 0, 1.0)]:
    _write_point(mq, pt(arm, ws[arm, 32], lr, seed), {"accuracy": acc})
  rows = table.load_rows(mq, "task=mqar")
  sections = table.task_tables(rows, "mqar").splitlines()
  assert "| arm | layers | width | lr 0.0003 | lr 0.001 | lr 0.003 | lr 0.01 | chosen |" in sections
  assert "| gla-softmax | 2 | 32 | 0.700 | 0.900 | 0.500 |  | 0.001 |" in sections
  assert "| softmax2 | 2 | 32 |  | 1.000 |  |  | … |" in sections
  assert [line for line in sections if " ± 0" in line] == [   # the cells at their rates
      "| gla-softmax | 2 | 32 | 1,000 | 64 | 0.001 | 0.900 / 0.800 | 0.850 ± 0.071 |",
      "| gla2 | 2 | 32 | 1,000 | 64 | 0.003 | 0.300 / 0.100 | 0.200 ± 0.141 |"]
  assert "| gla-softmax | gla2: +0.650 (yes) | softmax2: … |" in sections
  # LM: the hybrids sweep ran deltanet-softmax; gla2 / softmax2 come from the LM study's points.
  lm = table.config_lib.load_module(table._LM_STUDY)  # pylint: disable=protected-access
  wl = study.widths("task=lm")
  for lr, seed, bits in [(3e-3, 0, 2.40), (1e-2, 0, 2.36), (1e-2, 1, 2.37), (1e-3, 0, 2.5), (3e-2, 0, 2.38),
                         (3e-4, 0, 2.6)]:
    _write_point(lm_study_wd, lm.point("gla", wl["gla2", 128], lr, seed), {"bits_per_byte": bits})
  for lr, seed, bits in [(3e-3, 0, 2.30), (1e-2, 0, 2.35), (3e-3, 1, 2.31), (1e-3, 0, 2.32)]:
    _write_point(lm_wd, pt("deltanet-softmax", wl["deltanet-softmax", 128], lr, seed), {"bits_per_byte": bits})
  # gla3-softmax: its grid has run, the step past its edge (3e-2) not yet -> provisional (†)
  for lr, seed, bits in [(3e-3, 0, 2.33), (1e-2, 0, 2.31), (1e-2, 1, 2.32)]:
    _write_point(lm_wd, pt("gla3-softmax", wl["gla3-softmax", 128], lr, seed), {"bits_per_byte": bits})
  text = table.write(str(tmp_path), out=str(tmp_path / "s.md"))
  assert "| gla3-softmax | 4 | 120 |  | 2.330 | 2.310 |  | 0.01 † |" in text.splitlines()
  assert "| gla3-softmax | 4 | 120 | 1,000 | 64 | 0.01 † | 2.310 / 2.320 | 2.315 ± 0.007 |" in text.splitlines()
  assert table.tables.PROVISIONAL_NOTE.strip() in text.splitlines()
  # the LM study's 3e-4 left out: the grid (3e-3, 1e-2) steps out to 1e-3 and 3e-2 only
  assert "| gla2 | 2 | 120 | 2.500 ‡ | 2.400 ‡ | 2.360 ‡ | 2.380 ‡ | 0.01 |" in text.splitlines()
  assert "| gla2 ‡ | 2 | 120 | 1,000 | 64 | 0.01 | 2.360 / 2.370 | 2.365 ± 0.007 |" in text.splitlines()
  assert "| deltanet-softmax | deltanet2: … | softmax2: … |" in text.splitlines()
  assert (tmp_path / "s.md").read_text() == text
  # the MQAR check: gla,softmax trained 3,000 steps (its curve every 500 steps), softmax,gla at 1,500
  check = str(tmp_path / "check")
  _write_point(check, {**pt("gla-softmax", 32, 1e-3, 0), "train.num_steps": 3000}, {"accuracy": 0.9},
               curve=(0.1, 0.2, 0.3, 0.5, 0.8, 0.9), steps=3000)
  _write_point(check, pt("softmax-gla", 32, 3e-3, 0), {"accuracy": 1.0}, curve=(0.1, 1.0, 1.0), steps=1500)
  lines = table.check_table(check).splitlines()
  assert lines[2:] == ["| softmax-gla | 1,500 | 0.003 | 0 | 1.000 | 0.100 | 1.000 | 1.000 |  |  |  |",
                       "| gla-softmax | 3,000 | 0.001 | 0 | 0.900 | 0.100 | 0.200 | 0.300 | 0.500 | 0.800 | 0.900 |"]
