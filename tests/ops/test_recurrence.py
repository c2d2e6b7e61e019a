"""Tests for ops.linear_recurrence in every mode.

Tolerances (float32 ops, relative RMS as in fla, `tests.helpers.rel_rms`):
  values (o, final state) vs the float64 numpy loop reference:            ≤ 1e-5
  gradients wrt q, k, v, log_decay, initial_state (random cotangents on o and S) vs the
    `recurrent` mode run in float64 (jax.enable_x64), itself checked by check_grads:  ≤ 2e-5
  bfloat16 inputs: o vs the reference on the bf16-rounded inputs:            ≤ 1e-2
Sizes and options are covered pairwise (CASES), not as a full product.
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import test_util

from linear_seq import ops
from linear_seq.ops.reference import linear_recurrence_reference
from tests.helpers import (GRAD_TOL, VALUE_TOL, assert_close, make_inputs, recurrence_cotangents, rel_rms,
                           run_recurrence)

B, H = 2, 2

# (T, K, V, chunk, gate shape, strength, resets, initial state): pairwise over the awkward sizes.
CASES = [
    (1, 24, 20, 16, "vector", "weak", False, True),
    (7, 24, 20, 64, "scalar", "strong", True, False),
    (63, 16, 16, 16, "fixed", "weak", False, True),
    (100, 24, 20, 64, None, None, False, True),
    (257, 24, 20, 16, "vector", "strong", True, True),
    (100, 16, 16, 16, "scalar", "weak", True, True),
    (63, 24, 20, 64, "vector", "weak", True, False),
    (257, 16, 16, 64, "scalar", "mixed", False, False),
    (7, 16, 16, 16, None, None, False, False),
    (100, 24, 20, 64, "vector", "mixed", True, True),
]


@functools.lru_cache(maxsize=None)
def _fwd(mode, chunk_size):
  """Jitted (o, S) = linear_recurrence(q, k, v, g, initial_state=s0) for one mode."""
  return jax.jit(lambda q, k, v, g, s0: ops.linear_recurrence(
      q, k, v, g, initial_state=s0, mode=mode, chunk_size=chunk_size))


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_modes_match_reference(case):
  T, K, V, C, gate, strength, resets, init = case
  q, k, v, g, s0 = make_inputs(T, K, V, gate, strength, resets, init)
  cot = recurrence_cotangents(q, v, s0)
  o_ref, s_ref = linear_recurrence_reference(q, k, v, g, initial_state=s0)
  with jax.enable_x64(True):
    f64 = lambda x: None if x is None else jnp.asarray(x, jnp.float64)
    (o64, s64), grads64 = run_recurrence("recurrent", C, *map(f64, (q, k, v, g, s0)), jax.tree.map(f64, cot))
    grads64 = jax.tree.map(np.asarray, grads64)
    assert_close((o64, s64), (o_ref, s_ref), 1e-12, "float64 recurrent vs loop reference")
  for mode in ops.MODES:
    (o, s), grads = run_recurrence(mode, C, q, k, v, g, s0, cot)
    assert o.dtype == jnp.float32 and s.dtype == jnp.float32
    assert_close(o, o_ref, VALUE_TOL, f"{mode} o")
    assert_close(s, s_ref, VALUE_TOL, f"{mode} final state")
    for name, gr, gr64 in zip(["dq", "dk", "dv", "dg" if g is not None else "ds0", "ds0"], grads, grads64):
      assert np.all(np.isfinite(gr)), f"{mode} {name} not finite"
      assert_close(gr, gr64, GRAD_TOL, f"{mode} {name}")


def test_float64_recurrent_gradients_check_numerically():
  q, k, v, g, s0 = make_inputs(5, 3, 2, "vector", "weak", False, True, seed=3)
  with jax.enable_x64(True):
    def f(q, k, v, g, s0):
      return ops.linear_recurrence(q, k, v, g, initial_state=s0, mode="recurrent")
    args = [jnp.asarray(x, jnp.float64) for x in (q, k, v, g, s0)]
    test_util.check_grads(f, args, order=1, modes=("rev",), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("mode", ops.MODES)
def test_prefill_then_continue_equals_one_pass(mode):
  T1 = T2 = 37   # halves of one odd length (not a chunk multiple): two compiled shapes, not three
  q, k, v, g, s0 = make_inputs(T1 + T2, 24, 20, "vector", "mixed", True, True, seed=4)
  g[:, T1] = -np.inf   # a reset right at the seam
  run = _fwd(mode, 16)
  o, s = run(q, k, v, g, s0)
  o1, s1 = run(q[:, :T1], k[:, :T1], v[:, :T1], g[:, :T1], s0)
  o2, s2 = run(q[:, T1:], k[:, T1:], v[:, T1:], g[:, T1:], s1)
  assert_close(jnp.concatenate([o1, o2], axis=1), o, VALUE_TOL, "o")
  assert_close(s2, s, VALUE_TOL, "S")


@pytest.mark.parametrize("mode", ops.MODES)
def test_gradient_causality(mode):
  T, t0 = 20, 11   # t0 sits inside the second chunk of 8
  q, k, v, g, _ = make_inputs(T, 4, 3, "vector", "weak", False, False, seed=5)

  def o_at_t0(q, k, v, g):
    o, _ = ops.linear_recurrence(q, k, v, g, mode=mode, chunk_size=8)
    return jnp.sum(o[:, t0] * jnp.arange(1.0, 4.0))

  grads = jax.jit(jax.grad(o_at_t0, argnums=(0, 1, 2, 3)))(q, k, v, g)
  for name, gr in zip("qkvg", grads):
    gr = np.asarray(gr)
    assert np.all(gr[:, t0 + 1:] == 0.0), f"d o_t0 / d {name}_s is nonzero for some s > t0"
    assert np.any(gr[:, t0] != 0.0), f"d o_t0 / d {name}_t0 is zero"
  assert np.all(np.asarray(grads[0])[:, :t0] == 0.0)   # o_t0 reads q only at t0
  assert np.any(np.asarray(grads[1])[:, :t0] != 0.0)


@pytest.mark.parametrize("mode", ["chunk", "recurrent"])
def test_bfloat16_inputs(mode):
  q, k, v, g, s0 = make_inputs(100, 24, 20, "vector", "strong", True, True, seed=6)
  bf = lambda x: jnp.asarray(x, jnp.bfloat16)
  o, s = _fwd(mode, 16)(bf(q), bf(k), bf(v), bf(g), s0)
  assert o.dtype == jnp.bfloat16 and s.dtype == jnp.float32
  assert np.all(np.isfinite(np.asarray(o, np.float32))) and np.all(np.isfinite(s))
  up = lambda x: np.asarray(bf(x), np.float32)
  o_ref, s_ref = linear_recurrence_reference(up(q), up(k), up(v), up(g), initial_state=s0)
  assert rel_rms(np.asarray(o, np.float32), o_ref) <= 1e-2
  assert rel_rms(s, s_ref) <= 1e-5   # the state is float32 throughout


def test_reset_is_exact():
  """After a reset nothing earlier leaks: equals a fresh run on the suffix, in every mode.

  The fresh run keeps the shapes (one compile per mode): zero keys and values before t and a zero initial
  state leave the state zero up to t, where it has no reset (dropping the reset token's write would differ).
  """
  q, k, v, g, s0 = make_inputs(40, 8, 8, "vector", "weak", False, True, seed=7)
  g[:, 13] = -np.inf
  k_fresh, v_fresh, g_fresh = k.copy(), v.copy(), g.copy()
  k_fresh[:, :13], v_fresh[:, :13], g_fresh[:, 13] = 0.0, 0.0, 0.0
  for mode in ops.MODES:
    o, s = _fwd(mode, 16)(q, k, v, g, s0)
    o2, s2 = _fwd(mode, 16)(q, k_fresh, v_fresh, g_fresh, np.zeros_like(s0))
    assert_close(o[:, 13:], o2[:, 13:], 1e-6, f"{mode} o after reset")
    assert_close(s, s2, 1e-6, f"{mode} S after reset")


def test_default_scale_and_explicit_scale():
  q, k, v, _, _ = make_inputs(9, 16, 4, None, None, False, False, seed=8)
  o_default, _ = _fwd("chunk", 64)(q, k, v, None, None)
  o_scaled, _ = jax.jit(lambda q, k, v: ops.linear_recurrence(q, k, v, scale=0.25))(q, k, v)
  o_ref, _ = linear_recurrence_reference(q, k, v, scale=0.25)
  assert_close(o_default, o_ref, VALUE_TOL, "scale None = K**-0.5")
  assert_close(o_scaled, o_ref, VALUE_TOL, "scale")


def test_jit_skips_value_checks():
  q, k, v, _, _ = make_inputs(4, 4, 4, None, None, False, False)
  f = jax.jit(lambda g: ops.linear_recurrence(q, k, v, g, mode="recurrent")[0])
  assert f(jnp.full((B, 4, H), 0.5)).shape == (B, 4, H, 4)   # positive log decay: not checked


@pytest.mark.parametrize("kwargs, message", [
    (dict(mode="fast"), "unknown mode 'fast'; valid: recurrent, parallel, chunk, assoc"),
    (dict(chunk_size=0), "chunk_size must be a positive integer, got 0"),
    (dict(chunk_size=16.0), "chunk_size must be a positive integer, got 16.0"),
    (dict(q=np.zeros((B, 5, H))), r"q has shape \[2, 5, 2\], expected 4 dims \[B, T, H, K\]"),
    (dict(k=np.zeros((B, 5, H, 3))), r"k has shape \[2, 5, 2, 3\], expected \[2, 5, 2, 4\]"),
    (dict(v=np.zeros((B, 5, 3, 4))), r"v has shape \[2, 5, 3, 4\], expected \[2, 5, 2, \?\]"),
    (dict(initial_state=np.zeros((B, H, 4, 5))),
     r"initial_state has shape \[2, 2, 4, 5\], expected \[2, 2, 4, 4\]"),
    (dict(log_decay=np.zeros((B, 5))), r"log_decay has shape \[2, 5\], expected \[H\]=\[2\]"),
    (dict(log_decay=np.full((H,), 0.1)), "log_decay must be ≤ 0"),
    (dict(log_decay=np.full((B, 5, H), np.nan)), "log_decay contains NaN"),
])
def test_errors(kwargs, message):
  args = dict(q=np.zeros((B, 5, H, 4)), k=np.zeros((B, 5, H, 4)), v=np.zeros((B, 5, H, 4)))
  args.update({n: kwargs.pop(n) for n in ("q", "k", "v") if n in kwargs})
  with pytest.raises(ValueError, match=message):
    ops.linear_recurrence(args["q"], args["k"], args["v"], **kwargs)
