"""The ops under `jax.shard_map` (4 fake CPU devices, default check_vma=True) equal the unsharded ops.

seq cases: T split over the mesh axis 'seq' (seq_axis='seq', also on a data=2 × seq=2 mesh), pairwise over
op (the delta rule with K = 20 too) × mode × gate (signed ones too: log |α| and a ±1 decay_sign) ×
initial state × reset (none, inside a shard, at a shard's
first token): outputs, the replicated final state and the gradients wrt q, k, v, the decay, h0 (and β).
batch cases: only the batch split, no seq_axis (the scans' carries must be per-shard). The cases run in one subprocess (XLA_FLAGS must be set
before jax initializes); see seq_parallel_cases.py. Tolerances (relative RMS): values and states 1e-5,
gradients 2e-5 (1e-4 for the feature-map wrappers).
"""
import json
import os
import subprocess
import sys

import pytest

from tests import helpers
from tests.ops import seq_parallel_cases

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
VAL_TOL, GRAD_TOL, FEATURE_MAP_GRAD_TOL = 1e-5, 2e-5, 1e-4


@pytest.fixture(scope="module")
def errors():
  env = helpers.fake_devices_env(4)
  proc = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "ops", "seq_parallel_cases.py")],
                        env=env, cwd=ROOT, capture_output=True, text=True, timeout=1800)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", list(seq_parallel_cases.CASES))
def test_sharded_equals_unsharded(errors, name):
  err = errors[name]
  assert "error" not in err, err["error"]
  op = seq_parallel_cases.CASES[name][0]
  grad_tol = FEATURE_MAP_GRAD_TOL if op in seq_parallel_cases.FEATURE_MAP_OPS else GRAD_TOL
  assert {"o", "state0", "dq", "dk", "dv"} | ({"dbeta"} if op == "delta" else set()) <= set(err), err
  for what, e in err.items():
    tol = grad_tol if what.startswith("d") else VAL_TOL
    assert e <= tol, f"{what}: rel_rms {e:.3g} > {tol:.3g}"
