"""experiments/lm/length_table.py (the length check's tables) on a sweep directory the test writes: bits/byte
per evaluation length, the loss per position band of the longest evaluation, the S4D kernel table; and
s4_memory.py's kernel tail against a closed form."""
import importlib.util
import json
import os

import numpy as np
import pytest

from linear_seq.studies import sweep
from tests.helpers import REPO


def _load(name):
  spec = importlib.util.spec_from_file_location(f"lm_{name}", os.path.join(REPO, "experiments", "lm", f"{name}.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)   # defines no absl flags (only when run as a script)
  return module


@pytest.fixture(scope="module")
def table():
  return _load("length_table")


def _write_point(workdir, overrides, bits, long, band_losses, memory):
  sub = os.path.join(workdir, sweep.point_name(overrides))
  os.makedirs(sub)

  def dump(name, obj):
    with open(os.path.join(sub, name), "w") as f:
      json.dump(obj, f)

  dump("eval.json", {"step": 1200, "bits_per_byte": bits, "eval_seq_len": 128})
  for t, b in zip((512, 2048, 8192), long):
    dump(f"eval_validation_T{t}.json", {"step": 1200, "bits_per_byte": b, "eval_seq_len": t})
  losses = [band_losses[0]] * 128 + [band_losses[1]] * 384 + [band_losses[2]] * 1536 + [band_losses[3]] * 6144
  dump("position_loss_validation_T8192.json", {"step": 1200, "position_loss": losses})
  dump("s4_memory.json", memory)
  dump("config.json", {"data": {"seq_len": 128}, "train": {"num_steps": 1200}})


def test_tables_from_a_sweep_directory(table, tmp_path):
  study = table.study
  wd = str(tmp_path / "runs")
  s4, fast, s4_slow, fast_slow, gla = study.get_sweep("")
  assert [study.point_label(p) for p in (s4, fast, s4_slow, fast_slow, gla)] == [
      "s4 lr 0.01", "s4-fast lr 0.01", "s4 lr 0.001", "s4-fast lr 0.001", "gla lr 0.01"]
  _write_point(wd, s4, 2.29, (2.31, 2.39, 2.45), (1.60, 1.62, 1.68, 1.72),
               {"s4_layers": 2, "s4_tail_mean": 0.25, "s4_channels_tail_gt_0.1": 0.5, "s4_modes_horizon_gt_128": 0.6,
                "s4_modes_horizon_gt_2048": 0.1, "s4_horizon_median": 300.0})
  _write_point(wd, gla, 2.36, (2.34, 2.33, 2.33), (1.64, 1.61, 1.61, 1.61), {"s4_layers": 0})
  rows = table.load_rows(wd)   # the points without a sub-workdir are left out
  assert [study.point_label(r) for r in rows] == ["s4 lr 0.01", "gla lr 0.01"]
  lengths = table.length_table(rows).splitlines()
  assert lengths[0] == "| arm | T=128 | T=512 | T=2,048 | T=8,192 | T=8,192 − T=128 |"
  assert lengths[2] == "| s4 lr 0.01 | 2.290 | 2.310 | 2.390 | 2.450 | +0.160 |"
  assert lengths[3] == "| gla lr 0.01 | 2.360 | 2.340 | 2.330 | 2.330 | -0.030 |"
  bands = table.band_table(rows).splitlines()
  assert bands[0] == "| arm | positions 1–128 | positions 129–512 | positions 513–2,048 | positions 2,049–8,192 |"
  assert bands[2] == "| s4 lr 0.01 | 1.600 | 1.620 | 1.680 | 1.720 |"
  memory = table.memory_table(rows).splitlines()
  assert len(memory) == 3 and memory[2] == "| s4 lr 0.01 | 0.250 | 0.500 | 0.600 | 0.100 | 300.0 |"   # gla: no S4D layers
  assert table.band_mean([1.0, 2.0, 3.0], 2, 3) == 2.5 and table.band_mean([1.0], 1, 2) is None
  text = table.write(wd, archive_dir="", out=str(tmp_path / "check.md"))
  assert (tmp_path / "check.md").read_text() == text and bands[2] in text


def test_kernel_tail_matches_the_geometric_series():
  """One real mode a with C·B = 1: K[l] = a^l, so the share past L of lags < M is (a^L − a^M) / (1 − a^M)."""
  memory = _load("s4_memory")
  a = np.array([[0.99], [0.9]], np.complex128)
  tail = memory.kernel_tail(a, np.ones_like(a), train_len=128, max_lag=1000)
  want = (np.abs(a[:, 0]) ** 128 - np.abs(a[:, 0]) ** 1000) / (1 - np.abs(a[:, 0]) ** 1000)
  np.testing.assert_allclose(tail, want, rtol=1e-10)
