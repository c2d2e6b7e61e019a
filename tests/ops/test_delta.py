"""Tests for ops.delta_rule in every mode.

Tolerances (float32 ops, relative RMS as in fla, `helpers.rel_rms`), the same as test_recurrence.py:
  values (o, final state) vs the float64 numpy loop reference:                        ≤ 1e-5
  gradients wrt q, k, v, beta, log_decay, initial_state (random cotangents on o and S) vs the
    `recurrent` mode run in float64 (jax.enable_x64), itself checked by check_grads:  ≤ 2e-5
  the chunk form run in float64 vs the loop reference (the WY/UT algebra itself):     ≤ 1e-12
  bfloat16 inputs: o vs the reference on the bf16-rounded inputs:                     ≤ 1e-2
  bfloat16 inputs (bf16 operands, float32 accumulation) vs the float32 op on the same rounded inputs:
    o ≤ 1e-2 (measured ≤ 5.3e-3); S with a scalar gate ≤ 1e-5 (K Kᵀ of bf16 keys is exact, the solve and the
    state passing stay float32: measured 0), with a per-channel gate ≤ 1e-2 (its splitting rounds k ⊙ e^{prefix}
    into A: measured ≤ 2.4e-3); gradients ≤ 2e-2 (measured ≤ 5.3e-3)
  float32 under emulated TF32 products (ops/precision.py; the solve stays exact), values and gradients
    vs the float64 references:                                                      ≤ 3e-3 (measured ≤ 1.5e-3)
Keys are always L2-normalized (the mixers do it; unnormalized keys with β near 2 blow the state
up by design). Sizes and options are covered pairwise (CASES), not as a full product.
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import test_util

from linear_seq import ops
from linear_seq.ops import delta as delta_lib
from linear_seq.ops import delta_chunk
from linear_seq.ops import precision
from linear_seq.ops import tuning
from linear_seq.ops.reference import delta_rule_reference
from tests.helpers import (assert_close, count_bf16_dots, hlo_dots, random_like, random_log_decay, rel_rms,
                           vjp_grads)

VALUE_TOL = 1e-5
GRAD_TOL = 2e-5
B, H = 2, 2
MODES = delta_lib.MODES

# (T, K, V, chunk, gate shape, strength, resets, initial state, beta, modes): pairwise over the
# awkward sizes; recurrent and chunk in every case, parallel and assoc (costly to compile) in some.
ALL, NO_ASSOC, NO_PARALLEL = MODES, ("recurrent", "parallel", "chunk"), ("recurrent", "chunk", "assoc")
CASES = [
    (1, 24, 20, 16, "vector", "weak", False, True, "uniform", ALL),
    (7, 24, 20, 3, "scalar", "strong", True, False, "high", ALL),
    (63, 24, 20, 16, "fixed", "weak", False, True, "low", NO_ASSOC),
    (100, 24, 20, 64, None, None, False, True, "high", NO_PARALLEL),
    (257, 24, 20, 16, "vector", "strong", True, True, "uniform", NO_PARALLEL),
    (100, 24, 20, 3, "scalar", "mixed", True, True, "uniform", NO_ASSOC),
    (63, 24, 20, 64, "vector", "mixed", True, False, "high", ALL),
    (257, 24, 20, 64, "scalar", "weak", False, False, "low", NO_ASSOC),
]


def make_inputs(T, K, V, gate, strength, resets, init, beta="uniform", seed=0):
  """Random q, unit-norm k, v [B,T,H,·], beta [B,T,H], log_decay (−inf resets), state."""
  r = np.random.default_rng(seed)
  q = r.normal(size=(B, T, H, K)).astype(np.float32)
  k = r.normal(size=(B, T, H, K))
  k = (k / np.linalg.norm(k, axis=-1, keepdims=True)).astype(np.float32)
  v = r.normal(size=(B, T, H, V)).astype(np.float32)
  lo, hi = {"uniform": (0.0, 2.0), "low": (0.0, 0.05), "high": (1.95, 2.0)}[beta]
  b = r.uniform(lo, hi, size=(B, T, H)).astype(np.float32)
  s0 = r.normal(size=(B, H, K, V)).astype(np.float32) if init else None
  if gate is None:
    return q, k, v, b, None, s0
  g = random_log_decay(r, gate, strength, resets, (B, T, H, K))
  return q, k, v, b, g.astype(np.float32), s0


@functools.lru_cache(maxsize=None)
def _vjp_fn(mode, chunk_size):
  """Jitted (o, S, grads) of delta_rule; grads of ⟨(o, S), cot⟩ wrt q, k, v, beta[, g][, s0]."""
  def f(q, k, v, b, g, s0, cot):
    def run(q, k, v, b, g, s0):
      return ops.delta_rule(q, k, v, b, g, initial_state=s0, mode=mode, chunk_size=chunk_size)
    return run(q, k, v, b, g, s0), vjp_grads(run, (q, k, v, b, g, s0), cot)
  return jax.jit(f)


@functools.lru_cache(maxsize=None)
def _fwd(mode, chunk_size, scale=None):
  """Jitted (o, S) = delta_rule(q, k, v, beta, g, initial_state=s0) for one mode."""
  return jax.jit(lambda q, k, v, b, g, s0: ops.delta_rule(
      q, k, v, b, g, scale=scale, initial_state=s0, mode=mode, chunk_size=chunk_size))


def _cotangents(q, v):
  B_, T, H_, K = q.shape
  V = v.shape[-1]
  out = (np.zeros((B_, T, H_, V), np.float32), np.zeros((B_, H_, K, V), np.float32))
  return random_like(jax.random.PRNGKey(1), out)


def _grad_names(g, s0):
  return ["dq", "dk", "dv", "dbeta"] + (["dg"] if g is not None else []) + (["ds0"] if s0 is not None else [])


def _float64_recurrent(C, args, cot):
  """(o, S), grads of the recurrent form in float64 (x64 scoped to this call), as numpy."""
  with jax.enable_x64(True):
    f64 = lambda x: None if x is None else jnp.asarray(x, jnp.float64)
    out, grads = _vjp_fn("recurrent", C)(*map(f64, args), jax.tree.map(f64, cot))
    return jax.tree.map(np.asarray, (out, grads))


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c[:-1])))
def test_modes_match_reference(case):
  T, K, V, C, gate, strength, resets, init, beta, modes = case
  args = make_inputs(T, K, V, gate, strength, resets, init, beta)
  cot = _cotangents(args[0], args[2])
  o_ref, s_ref = delta_rule_reference(*args[:5], initial_state=args[5])
  (o64, s64), grads64 = _float64_recurrent(C, args, cot)
  assert_close((o64, s64), (o_ref, s_ref), 1e-12, "float64 recurrent vs loop reference")
  names = _grad_names(args[4], args[5])
  for mode in modes:
    (o, s), grads = _vjp_fn(mode, C)(*args, cot)
    assert o.dtype == jnp.float32 and s.dtype == jnp.float32
    assert_close(o, o_ref, VALUE_TOL, f"{mode} o")
    assert_close(s, s_ref, VALUE_TOL, f"{mode} final state")
    for name, gr, gr64 in zip(names, grads, grads64):
      assert np.all(np.isfinite(gr)), f"{mode} {name} not finite"
      assert_close(gr, gr64, GRAD_TOL, f"{mode} {name}")


@pytest.mark.parametrize("gate, strength", [("scalar", "mixed"), ("vector", "strong")])
def test_chunk_form_is_exact_in_float64(gate, strength):
  """The WY/UT algebra itself: the chunk form in float64 equals the loop to rounding."""
  args = make_inputs(45, 24, 20, gate, strength, True, True, seed=2)
  o_ref, s_ref = delta_rule_reference(*args[:5], initial_state=args[5])
  with jax.enable_x64(True):
    o, s = _fwd("chunk", 16)(*(jnp.asarray(x, jnp.float64) for x in args))
    assert o.dtype == jnp.float64
    assert_close((o, s), (o_ref, s_ref), 1e-12, "float64 chunk vs loop reference")


def test_grouped_chunk_matches_reference(monkeypatch):
  """Sequences longer than two groups run group by group (rematerialized outer scan)."""
  monkeypatch.setattr(tuning, "_overrides", {"delta_group_tokens": 32})   # 4 groups, the last one padded
  args = make_inputs(100, 24, 20, "vector", "mixed", True, True, seed=3)
  cot = _cotangents(args[0], args[2])

  def run(q, k, v, b, g, s0):
    return ops.delta_rule(q, k, v, b, g, initial_state=s0, mode="chunk", chunk_size=8)

  (o, s), grads = jax.jit(lambda *a: (run(*a[:6]), vjp_grads(run, a[:6], a[6])))(*args, cot)
  o_ref, s_ref = delta_rule_reference(*args[:5], initial_state=args[5])
  assert_close((o, s), (o_ref, s_ref), VALUE_TOL, "o, S")
  _, grads64 = _float64_recurrent(8, args, cot)
  for name, gr, gr64 in zip(_grad_names(args[4], args[5]), grads, grads64):
    assert_close(gr, gr64, GRAD_TOL, name)


def test_float64_recurrent_gradients_check_numerically():
  q, k, v, b, g, s0 = make_inputs(5, 3, 2, "vector", "weak", False, True, seed=4)
  with jax.enable_x64(True):
    def f(q, k, v, b, g, s0):
      return ops.delta_rule(q, k, v, b, g, initial_state=s0, mode="recurrent")
    args = [jnp.asarray(x, jnp.float64) for x in (q, k, v, b, g, s0)]
    test_util.check_grads(f, args, order=1, modes=("rev",), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("mode", ["recurrent", "chunk"])
def test_prefill_then_continue_equals_one_pass(mode):
  T1 = T2 = 37   # halves of one odd length (not a chunk multiple): two compiled shapes, not three
  q, k, v, b, g, s0 = make_inputs(T1 + T2, 24, 20, "vector", "mixed", True, True, seed=5)
  g[:, T1] = -np.inf   # a reset right at the seam
  run = _fwd(mode, 16)
  o, s = run(q, k, v, b, g, s0)
  cut = lambda x, sl: x[:, sl]
  o1, s1 = run(*(cut(x, slice(None, T1)) for x in (q, k, v, b, g)), s0)
  o2, s2 = run(*(cut(x, slice(T1, None)) for x in (q, k, v, b, g)), s1)
  assert_close(jnp.concatenate([o1, o2], axis=1), o, VALUE_TOL, "o")
  assert_close(s2, s, VALUE_TOL, "S")


@pytest.mark.parametrize("mode", ["chunk"])
def test_gradient_causality(mode):
  T, t0 = 20, 11   # t0 sits inside the second chunk of 8
  q, k, v, b, g, _ = make_inputs(T, 4, 3, "vector", "weak", False, False, seed=6)

  def o_at_t0(q, k, v, b, g):
    o, _ = ops.delta_rule(q, k, v, b, g, mode=mode, chunk_size=8)
    return jnp.sum(o[:, t0] * jnp.arange(1.0, 4.0))

  grads = jax.jit(jax.grad(o_at_t0, argnums=(0, 1, 2, 3, 4)))(q, k, v, b, g)
  for name, gr in zip(["q", "k", "v", "beta", "g"], grads):
    gr = np.asarray(gr)
    assert np.all(gr[:, t0 + 1:] == 0.0), f"d o_t0 / d {name}_s is nonzero for some s > t0"
    assert np.any(gr[:, t0] != 0.0), f"d o_t0 / d {name}_t0 is zero"
  assert np.all(np.asarray(grads[0])[:, :t0] == 0.0)   # o_t0 reads q only at t0
  assert np.any(np.asarray(grads[1])[:, :t0] != 0.0)


def test_bfloat16_inputs():
  q, k, v, b, g, s0 = make_inputs(100, 24, 20, "vector", "strong", True, True, seed=7)
  bf = lambda x: jnp.asarray(x, jnp.bfloat16)
  o, s = _fwd("chunk", 16)(bf(q), bf(k), bf(v), bf(b), bf(g), s0)
  assert o.dtype == jnp.bfloat16 and s.dtype == jnp.float32
  up = lambda x: np.asarray(bf(x), np.float32)
  o_ref, s_ref = delta_rule_reference(up(q), up(k), up(v), up(b), up(g), initial_state=s0)
  assert rel_rms(np.asarray(o, np.float32), o_ref) <= 1e-2
  assert rel_rms(s, s_ref) <= 1e-5   # the state is float32 throughout


@pytest.mark.parametrize("mode", MODES)
def test_reset_is_exact(mode):
  """After a reset nothing earlier leaks, and token t's own write is kept: a fresh run on the suffix.

  The fresh run keeps the shapes (one compile): zero keys and values before t and a zero initial state leave
  the state zero up to t, where it has no reset (a form that dropped the reset token's write would differ).
  """
  q, k, v, b, g, s0 = make_inputs(40, 8, 8, "scalar", "weak", False, True, seed=8)
  g[:, 13] = -np.inf
  o, s = _fwd(mode, 16)(q, k, v, b, g, s0)
  k_fresh, v_fresh, g_fresh = k.copy(), v.copy(), g.copy()
  k_fresh[:, :13], v_fresh[:, :13], g_fresh[:, 13] = 0.0, 0.0, 0.0
  o2, s2 = _fwd(mode, 16)(q, k_fresh, v_fresh, b, g_fresh, np.zeros_like(s0))
  assert_close(o[:, 13:], o2[:, 13:], 1e-6, f"{mode} o after reset")
  assert_close(s, s2, 1e-6, f"{mode} S after reset")


@pytest.mark.parametrize("mode", ["recurrent", "chunk"])
def test_overwrite_property(mode):
  """scale=1, β=1: writing v1 then v2 under one unit key k, reading k returns v2 (v1 is gone).

  Plain linear attention (linear_recurrence) returns v1 + v2 there: it only adds.
  """
  T, K, V = 6, 8, 4
  r = np.random.default_rng(9)
  keys = np.linalg.qr(r.normal(size=(K, K)))[0].T.astype(np.float32)   # orthonormal rows
  k = np.zeros((B, T, H, K), np.float32)
  k[:, :] = keys[[0, 1, 2, 0, 3, 4]][None, :, None, :]   # token 3 rewrites key 0
  v = r.normal(size=(B, T, H, V)).astype(np.float32)
  q = np.broadcast_to(keys[0], (B, T, H, K)).copy()      # every token reads key 0
  b = np.ones((B, T, H), np.float32)
  o, _ = _fwd(mode, 4, 1.0)(q, k, v, b, None, None)
  np.testing.assert_allclose(o[:, 0], v[:, 0], atol=1e-5)   # v1 read back
  np.testing.assert_allclose(o[:, -1], v[:, 3], atol=1e-5)  # overwritten by v2
  o_lin, _ = ops.linear_recurrence(q, k, v, scale=1.0, mode=mode, chunk_size=4)
  np.testing.assert_allclose(o_lin[:, -1], v[:, 0] + v[:, 3], atol=1e-5)
  assert np.max(np.abs(o_lin[:, -1] - v[:, 3])) > 0.1


def test_state_norm_bound():
  """With unit keys and β ∈ [0, 2] every transition I − β kᵀk has spectral norm max(1, |1 − β|) = 1,
  so ||S_t||_F ≤ ||S_{t-1}||_F + β_t ||v_t||, i.e. ||S_t||_F ≤ ||S_0||_F + Σ_{l≤t} β_l ||v_l||_2.

  Checked every 512 steps over T = 4096 (chunk mode, continued segment by segment); keys of norm
  1.5 (transition norms up to |1 − 2·2.25| = 3.5) break the bound, so the check can fail.
  """
  T, seg, K, V = 4096, 512, 16, 16
  r = np.random.default_rng(10)
  run = _fwd("chunk", 64)

  def norms_and_bounds(key_norm):
    s = r.normal(size=(B, H, K, V)).astype(np.float32)
    bound = np.linalg.norm(s, axis=(-2, -1))
    out = []
    for _ in range(T // seg):
      q, k, v, b, _, _ = make_inputs(seg, K, V, None, None, False, False, seed=int(r.integers(1 << 30)))
      s = np.asarray(run(q, k * key_norm, v, b, None, s)[1])
      bound = bound + np.sum(b * np.linalg.norm(v, axis=-1), axis=1)
      out.append((np.linalg.norm(s, axis=(-2, -1)), bound.copy()))
    return out

  for norm, bound in norms_and_bounds(1.0):
    assert np.all(np.isfinite(norm)) and np.all(norm <= bound), (norm, bound)
  blown = norms_and_bounds(1.5)[-1]
  assert not np.all(np.isfinite(blown[0]) & (blown[0] <= blown[1]))


def test_default_scale_and_explicit_scale():
  q, k, v, b, _, _ = make_inputs(9, 16, 4, None, None, False, False, seed=11)
  o_default, _ = _fwd("chunk", 64)(q, k, v, b, None, None)
  o_scaled, _ = _fwd("chunk", 64, 0.25)(q, k, v, b, None, None)
  o_ref, _ = delta_rule_reference(q, k, v, b, scale=0.25)
  assert_close(o_default, o_ref, VALUE_TOL, "scale None = K**-0.5")
  assert_close(o_scaled, o_ref, VALUE_TOL, "scale")


def test_jit_skips_value_checks():
  q, k, v, b, _, _ = make_inputs(4, 4, 4, None, None, False, False)
  f = jax.jit(lambda b: ops.delta_rule(q, k, v, b, mode="recurrent")[0])
  assert f(jnp.full((B, 4, H), 2.5)).shape == (B, 4, H, 4)   # β outside [0, 2]: not checked


@pytest.mark.parametrize("kwargs, message", [
    (dict(mode="fast"), "unknown mode 'fast'; valid: recurrent, parallel, chunk, assoc"),
    (dict(chunk_size=0), "chunk_size must be a positive integer, got 0"),
    (dict(q=np.zeros((B, 5, H))), r"q has shape \[2, 5, 2\], expected 4 dims \[B, T, H, K\]"),
    (dict(k=np.zeros((B, 5, H, 3))), r"k has shape \[2, 5, 2, 3\], expected \[2, 5, 2, 4\]"),
    (dict(v=np.zeros((B, 5, 3, 4))), r"v has shape \[2, 5, 3, 4\], expected \[2, 5, 2, \?\]"),
    (dict(beta=np.zeros((B, 5, H, 1))), r"beta has shape \[2, 5, 2, 1\], expected \[2, 5, 2\]"),
    (dict(beta=np.full((B, 5, H), 2.5)), r"beta must be in \[0, 2\] \(the op applies no sigmoid\)"),
    (dict(beta=np.full((B, 5, H), -0.1)), r"beta must be in \[0, 2\]"),
    (dict(beta=np.full((B, 5, H), np.nan)), r"beta contains NaN; expected values in \[0, 2\]"),
    (dict(initial_state=np.zeros((B, H, 4, 5))),
     r"initial_state has shape \[2, 2, 4, 5\], expected \[2, 2, 4, 4\]"),
    (dict(log_decay=np.zeros((B, 5))), r"log_decay has shape \[2, 5\], expected \[H\]=\[2\]"),
    (dict(log_decay=np.full((H,), 0.1)), "log_decay must be ≤ 0"),
    (dict(log_decay=np.full((B, 5, H, 4), np.nan)), "log_decay contains NaN"),
])
def test_errors(kwargs, message):
  args = dict(q=np.zeros((B, 5, H, 4)), k=np.zeros((B, 5, H, 4)), v=np.zeros((B, 5, H, 4)),
              beta=np.ones((B, 5, H)))
  args.update({n: kwargs.pop(n) for n in ("q", "k", "v", "beta") if n in kwargs})
  with pytest.raises(ValueError, match=message):
    ops.delta_rule(args["q"], args["k"], args["v"], args["beta"], **kwargs)


@pytest.mark.parametrize("case", [CASES[3], CASES[5]], ids=lambda c: "-".join(map(str, c[:-1])))
def test_float32_under_emulated_tf32(case):
  """The float32 path where plain products round operands to TF32 (a GPU's default): its own tolerance."""
  T, K, V, C, gate, strength, resets, init, beta, modes = case
  args = make_inputs(T, K, V, gate, strength, resets, init, beta)
  cot = _cotangents(args[0], args[2])
  o_ref, s_ref = delta_rule_reference(*args[:5], initial_state=args[5])
  _, grads64 = _float64_recurrent(C, args, cot)
  for mode in [m for m in ("chunk", "parallel") if m in modes]:
    def f(q, k, v, b, g, s0, cot, mode=mode):
      run = lambda q, k, v, b, g, s0: ops.delta_rule(q, k, v, b, g, initial_state=s0, mode=mode, chunk_size=C)
      return run(q, k, v, b, g, s0), vjp_grads(run, (q, k, v, b, g, s0), cot)
    with precision.emulate("tf32"):   # traced inside: a fresh jit, not the cached _vjp_fn
      (o, s), grads = jax.jit(f)(*args, cot)
    assert_close((o, s), (o_ref, s_ref), 3e-3, f"{mode} o, S (emulated TF32)")
    for name, gr, gr64 in zip(_grad_names(args[4], args[5]), grads, grads64):
      assert_close(gr, gr64, 3e-3, f"{mode} {name} (emulated TF32)")


# (mode, gate) -> bf16-operand products in the forward (T = 40, C = 16): K Kᵀ, Q Kᵀ, (Q ⊙ e^b) S, scores @ δ.
# A per-channel gate's K Kᵀ and Q Kᵀ are two binary splittings, each with a cross-block dot per level h ≥ 2: 3
# levels at C = 16 (chunk), 5 at C = 64 (parallel: T rounded up to a power of two).
BF16_DOTS = {("chunk", None): 4, ("chunk", "scalar"): 4, ("chunk", "vector"): 2 * 3 + 2,
             ("parallel", None): 4, ("parallel", "scalar"): 4, ("parallel", "vector"): 2 * 5 + 2}


@pytest.mark.parametrize("mode,gate", list(BF16_DOTS))
def test_bfloat16_products_take_bf16_operands(mode, gate):
  """bf16 inputs: exactly the large products take bf16 operands, each accumulating into float32 (the solve, A
  and the state passing stay float32); float32 inputs: none."""
  q, k, v, b, g, s0 = make_inputs(40, 8, 8, gate, "weak", False, True, seed=3)
  fwd = jax.jit(lambda q, k, v, b, g, s0: ops.delta_rule(q, k, v, b, g, initial_state=s0, mode=mode, chunk_size=16))
  bf = lambda x: jnp.asarray(x, jnp.bfloat16)
  hlo = fwd.lower(bf(q), bf(k), bf(v), bf(b), g, s0).as_text()
  assert count_bf16_dots(hlo) == BF16_DOTS[mode, gate], "\n".join(hlo_dots(hlo))
  assert not any("bf16" in line for line in hlo_dots(fwd.lower(q, k, v, b, g, s0).as_text()))


# (mode, case, S tolerance, gradients too). Scalar gate: K Kᵀ of bf16 keys is exact in float32, so A, the solve
# and the state are the float32 op's. Per-channel gate (weak, no reset at the end, so the state remembers): the
# splitting's cross blocks round k ⊙ e^{prefix} to bf16, so A and the state move by bf16 rounding too.
BF16_CASES = [
    pytest.param("chunk", (100, 24, 20, 16, "scalar", "mixed", True, True, "uniform"), 1e-5, False,
                 id="chunk-scalar"),
    pytest.param("chunk", (100, 24, 20, 16, "vector", "weak", False, True, "high"), 1e-2, False,
                 id="chunk-vector"),
    pytest.param("parallel", (29, 24, 20, 16, "vector", "weak", False, False, "uniform"), 1e-2, False,
                 id="parallel-vector"),
    pytest.param("chunk", (257, 24, 20, 16, "vector", "weak", False, True, "uniform"), 1e-2, True,
                 id="chunk-vector-grads", marks=pytest.mark.slow),   # ~30 s of compiles (fwd and bwd splittings)
]


@pytest.mark.parametrize("mode,case,s_tol,grads", BF16_CASES)
def test_bfloat16_path_vs_float32(mode, case, s_tol, grads):
  """bf16 inputs (bf16 operands, float32 accumulation) vs the float32 op on the same bf16-rounded inputs."""
  T, K, V, C, gate, strength, resets, init, beta = case
  q, k, v, b, g, s0 = make_inputs(T, K, V, gate, strength, resets, init, beta, seed=8)
  bf = lambda x: jnp.asarray(x, jnp.bfloat16)
  up = lambda x: jnp.asarray(bf(x), jnp.float32)
  if grads:
    cot = _cotangents(q, v)
    (o, s), gr = _vjp_fn(mode, C)(bf(q), bf(k), bf(v), bf(b), g, s0, cot)
    (o32, s32), gr32 = _vjp_fn(mode, C)(up(q), up(k), up(v), up(b), g, s0, cot)
    for name, x, x32 in zip(_grad_names(g, s0), gr, gr32):
      assert_close(np.asarray(x, np.float32), x32, 2e-2, f"bf16 {name} vs float32 op")
  else:
    o, s = _fwd(mode, C)(bf(q), bf(k), bf(v), bf(b), g, s0)
    o32, s32 = _fwd(mode, C)(up(q), up(k), up(v), up(b), g, s0)
  assert o.dtype == jnp.bfloat16 and s.dtype == jnp.float32
  assert_close(np.asarray(o, np.float32), o32, 1e-2, "bf16 o vs float32 op")
  assert_close(s, s32, s_tol, "bf16 S vs float32 op")
