"""The grouped path of the chunkwise form: sequences longer than two groups (chunk.GROUP_TOKENS)
run group by group in a rematerialized lax.scan. The default group (512 tokens) is longer than the
sequences in test_recurrence.py, so here it is shrunk to reach that path with small T.

Tolerances as test_recurrence.py: values vs the float64 loop reference ≤ 1e-5 relative RMS,
gradients vs float64 `recurrent` ≤ 2e-5.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from linear_seq import ops
from linear_seq.ops import chunk as chunk_lib
from linear_seq.ops.reference import linear_recurrence_reference
from tests.helpers import (GRAD_TOL, VALUE_TOL, assert_close, make_inputs, recurrence_cotangents, run_recurrence,
                           vjp_grads)

# (T, K, V, chunk, gate, strength, resets, initial state): T not a multiple of the group or chunk.
CASES = [
    (100, 24, 20, 16, "vector", "strong", True, True),
    (75, 16, 16, 3, None, None, False, True),
    (90, 16, 12, 8, "scalar", "mixed", True, False),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_grouped_chunk_matches_reference(case, monkeypatch):
  monkeypatch.setattr(chunk_lib, "GROUP_TOKENS", 32)   # 3-4 groups, the last one padded
  T, K, V, C, gate, strength, resets, init = case
  q, k, v, g, s0 = make_inputs(T, K, V, gate, strength, resets, init, seed=11)
  cot = recurrence_cotangents(q, v, s0)

  def run(q, k, v, g, s0):
    return ops.linear_recurrence(q, k, v, g, initial_state=s0, mode="chunk", chunk_size=C)

  (o, s), grads = jax.jit(lambda *a: (run(*a[:5]), vjp_grads(run, a[:5], a[5])))(q, k, v, g, s0, cot)
  o_ref, s_ref = linear_recurrence_reference(q, k, v, g, initial_state=s0)
  assert_close(o, o_ref, VALUE_TOL, "o")
  assert_close(s, s_ref, VALUE_TOL, "final state")
  with jax.enable_x64(True):
    f64 = lambda x: None if x is None else jnp.asarray(x, jnp.float64)
    _, grads64 = run_recurrence("recurrent", C, *map(f64, (q, k, v, g, s0)), jax.tree.map(f64, cot))
    grads64 = jax.tree.map(np.asarray, grads64)
  for name, gr, gr64 in zip(["dq", "dk", "dv", "dg" if g is not None else "ds0", "ds0"], grads, grads64):
    assert np.all(np.isfinite(gr)), f"{name} not finite"
    assert_close(gr, gr64, GRAD_TOL, name)
