"""Signed decays α ∈ [−1, 1] (`decay_sign` beside log_decay = log |α|) in every form of the recurrence.

Tolerances as test_recurrence.py (relative RMS): values vs the float64 loop reference ≤ 1e-5; gradients wrt
q, k, v, log |α| and the initial state vs the float64 `recurrent` mode ≤ 2e-5. A gate through
`signed_log_decay` that lands exactly on α = 0: every gradient (α included) vs an independent float64
linear-space scan (S_t = α_t S_{t−1} + k_tᵀ v_t, differentiated by JAX) ≤ 2e-5. The seq-parallel cases are
in seq_parallel_cases.py (the '_signed' gates).
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from linear_seq import ops
from linear_seq.ops.reference import linear_recurrence_reference
from tests.helpers import GRAD_TOL, VALUE_TOL, assert_close, make_inputs, recurrence_cotangents, vjp_grads

B, H = 2, 2

# (T, K, V, chunk, gate, strength, resets, initial state): mixed signs everywhere, α = −1 and α = 0 exactly.
CASES = [
    (37, 24, 20, 16, "vector", "mixed", True, True),
    (63, 24, 20, 16, "scalar", "strong", True, False),
    (21, 16, 16, 8, "fixed", "weak", False, True),
]


def signed_inputs(T, K, V, gate, strength, resets, init, seed=0):
  """make_inputs plus a random ±1 decay_sign of log_decay's shape, with α = −1 (log |α| = 0, sign −1) and
  α = 0 (log |α| = −inf) exactly at a few places (for a fixed gate: head 0 is α = −1)."""
  q, k, v, g, s0 = make_inputs(T, K, V, gate, strength, resets, init, seed=seed)
  r = np.random.default_rng(seed + 100)
  sign = np.where(r.random(g.shape) < 0.5, -1.0, 1.0).astype(np.float32)
  if gate == "fixed":
    g[0], sign[0] = 0.0, -1.0
  else:
    g[:, 2], sign[:, 2] = 0.0, -1.0          # α = −1
    g[:, 5], sign[:, 5] = -np.inf, -1.0      # α = 0 (the sign of a zero is irrelevant)
    g[:, T - 3] = 0.0                        # |α| = 1 with a random sign
  return q, k, v, g, sign, s0


@functools.lru_cache(maxsize=None)
def _vjp(mode, chunk_size):
  def f(q, k, v, g, sign, s0, cot):
    def run(q, k, v, g, s0):
      return ops.linear_recurrence(q, k, v, g, initial_state=s0, mode=mode, chunk_size=chunk_size,
                                   decay_sign=sign)
    return run(q, k, v, g, s0), vjp_grads(run, (q, k, v, g, s0), cot)
  return jax.jit(f)


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_signed_modes_match_reference(case):
  T, K, V, C, gate, strength, resets, init = case
  q, k, v, g, sign, s0 = signed_inputs(T, K, V, gate, strength, resets, init)
  cot = recurrence_cotangents(q, v, s0)
  o_ref, s_ref = linear_recurrence_reference(q, k, v, g, initial_state=s0, decay_sign=sign)
  with jax.enable_x64(True):
    f64 = lambda x: None if x is None else jnp.asarray(x, jnp.float64)
    (o64, s64), grads64 = _vjp("recurrent", C)(*map(f64, (q, k, v, g, sign, s0)), jax.tree.map(f64, cot))
    grads64 = jax.tree.map(np.asarray, grads64)
    assert_close((o64, s64), (o_ref, s_ref), 1e-12, "float64 recurrent vs loop reference")
  for mode in ops.MODES:
    (o, s), grads = _vjp(mode, C)(q, k, v, g, sign, s0, cot)
    assert_close(o, o_ref, VALUE_TOL, f"{mode} o")
    assert_close(s, s_ref, VALUE_TOL, f"{mode} final state")
    for name, gr, gr64 in zip(["dq", "dk", "dv", "dg", "ds0"], grads, grads64):
      assert np.all(np.isfinite(gr)), f"{mode} {name} not finite"
      assert_close(gr, gr64, GRAD_TOL, f"{mode} {name}")


def test_unsigned_calls_never_reach_the_sign_code(monkeypatch):
  """Today's calls (no decay_sign, or None) trace exactly the unsigned program: the sign helpers are never
  called, and decay_sign=None traces the same jaxpr as no keyword, in every mode and wrapper."""
  from linear_seq.ops import signed_decay

  def boom(*_, **__):
    raise AssertionError("the unsigned path reached the sign code")
  for name in ("check_decay_sign", "running_parity", "fold", "unfold_state"):
    monkeypatch.setattr(signed_decay, name, boom)
  q, k, v, g, s0 = make_inputs(9, 4, 3, "vector", "mixed", True, True, seed=1)
  gamma = np.array([0.9, 0.5], np.float32)
  calls = [lambda **kw: ops.linear_recurrence(q, k, v, g, initial_state=s0, mode=m, **kw) for m in ops.MODES]
  calls += [lambda **kw: ops.gated_linear_attention(q, k, v, g[..., 0], **kw),
            lambda **kw: ops.retention(q, k, v, gamma, **kw),
            lambda **kw: ops.linear_attention(q, k, v, log_decay=np.log(gamma), **kw),
            lambda **kw: ops.linear_attention(q, k, v, normalize=False, log_decay=g, **kw)]
  for call in calls:
    assert str(jax.make_jaxpr(lambda: call())()) == str(jax.make_jaxpr(lambda: call(decay_sign=None))())


def _linear_space_scan(q, k, v, alpha_BTHk, s0, scale):
  """S_t = α_t ⊙ S_{t−1} + k_tᵀ v_t in whatever dtype it is given (float64 here): the α = 0 gradient reference."""
  def step(s, x):
    q_t, k_t, v_t, a_t = x
    s = a_t[..., None] * s + k_t[..., :, None] * v_t[..., None, :]
    return s, scale * jnp.einsum("bhk,bhkv->bhv", q_t, s)
  s, o = jax.lax.scan(step, s0, tuple(jnp.moveaxis(x, 1, 0) for x in (q, k, v, alpha_BTHk)))
  return jnp.moveaxis(o, 0, 1), s


@pytest.mark.parametrize("gate", ["scalar", "vector"])
def test_learned_gate_at_zero_has_exact_gradients(gate):
  """α = 2σ(x) − 1 with x = 0 exactly at some places (α = 0), and α near ±1 elsewhere: gradients wrt x (and
  q, k, v, s0) of every mode equal a float64 linear-space scan's, finite."""
  T, K, V = 13, 6, 5
  q, k, v, _, s0 = make_inputs(T, K, V, None, None, False, True, seed=3)
  r = np.random.default_rng(4)
  x = (3.0 * r.normal(size=(B, T, H) if gate == "scalar" else (B, T, H, K))).astype(np.float32)
  x[:, [1, 4, 9]] = 0.0
  x[0, 7] = 30.0   # α = 1 in float32
  cot = recurrence_cotangents(q, v, s0)

  def loss(mode, q, k, v, x, s0):
    log_decay, sign = ops.signed_log_decay(2.0 * jax.nn.sigmoid(x) - 1.0)
    out = ops.linear_recurrence(q, k, v, log_decay, decay_sign=sign, initial_state=s0, mode=mode, chunk_size=4)
    return sum(jnp.sum(o * c) for o, c in zip(out, cot))

  with jax.enable_x64(True):
    def loss64(q, k, v, x, s0):
      alpha = 2.0 * jax.nn.sigmoid(x) - 1.0
      out = _linear_space_scan(q, k, v, alpha if alpha.ndim == 4 else alpha[..., None], s0, K ** -0.5)
      return sum(jnp.sum(o * jnp.asarray(c, jnp.float64)) for o, c in zip(out, cot))
    grads64 = jax.grad(loss64, argnums=range(5))(*(jnp.asarray(a, jnp.float64) for a in (q, k, v, x, s0)))
    grads64 = [np.asarray(gr) for gr in grads64]
  assert np.all(grads64[3][:, [1, 4, 9]] != 0)   # the reference gradient at α = 0 is not trivially 0
  for mode in ops.MODES:
    grads = jax.jit(jax.grad(functools.partial(loss, mode), argnums=range(5)))(q, k, v, x, s0)
    for name, gr, gr64 in zip(["dq", "dk", "dv", "dx", "ds0"], grads, grads64):
      assert np.all(np.isfinite(gr)), f"{mode} {name} not finite"
      assert_close(gr, gr64, GRAD_TOL, f"{mode} {name}")


def test_wrappers_with_signs_match_reference():
  T, K, V = 19, 8, 6
  q, k, v, g, sign, s0 = signed_inputs(T, K, V, "vector", "mixed", True, True, seed=5)
  o_ref, s_ref = linear_recurrence_reference(q, k, v, g, initial_state=s0, decay_sign=sign)
  o, s = ops.gated_linear_attention(q, k, v, g, initial_state=s0, decay_sign=sign, chunk_size=8)
  assert_close((o, s), (o_ref, s_ref), VALUE_TOL, "gla")
  gamma, gsign = np.array([0.9, 0.5], np.float32), np.array([-1.0, 1.0], np.float32)
  o, s = ops.retention(q, k, v, gamma, decay_sign=gsign, chunk_size=8)
  assert_close((o, s), linear_recurrence_reference(q, k, v, np.log(gamma), decay_sign=gsign), VALUE_TOL,
               "retention")
  # linear attention (identity map, no denominator): keys weighted by w = 1 − α ∈ [0, 2]; a reset at t = 6.
  g_s, sign_s = g[..., 0], sign[..., 0]
  reset = np.zeros((B, T), bool)
  reset[:, 6] = True
  o, s = ops.linear_attention(q, k, v, feature_map="identity", normalize=False, log_decay=g_s,
                              decay_sign=sign_s, reset=reset, chunk_size=8)
  alpha = sign_s * np.exp(g_s.astype(np.float64))
  g_reset = np.where(reset[..., None], -np.inf, g_s)
  assert_close((o, s), linear_recurrence_reference(q, k * (1 - alpha)[..., None], v, g_reset, decay_sign=sign_s),
               VALUE_TOL, "linear_attention")


@pytest.mark.parametrize("call, message", [
    (lambda a: ops.linear_recurrence(*a["qkv"], a["g"], decay_sign=a["g"][..., :1]),
     r"decay_sign has shape \[2, 5, 2, 1\], expected log_decay's shape \[2, 5, 2, 4\]"),
    (lambda a: ops.linear_recurrence(*a["qkv"], decay_sign=a["g"]), "decay_sign was given without log_decay"),
    (lambda a: ops.linear_recurrence(*a["qkv"], a["g"], decay_sign=np.full_like(a["g"], 0.5)),
     r"decay_sign must be −1 or \+1 \(0 allowed where α = 0\), got \[0.5, 0.5, 0.5\] …"),
    (lambda a: ops.linear_recurrence(*a["qkv"], a["g"], decay_sign=np.full_like(a["g"], np.nan)),
     "decay_sign must be −1 or"),
    (lambda a: ops.linear_recurrence(*a["qkv"], -a["g"] + 0.1, decay_sign=np.ones_like(a["g"])),
     "log_decay must be ≤ 0"),
    (lambda a: ops.signed_log_decay(np.array([0.5, -1.5])), r"alpha must lie in \[−1, 1\]; max \|α\| is 1.5"),
    (lambda a: ops.signed_log_decay(np.array([0.5, np.nan])), "alpha contains NaN"),
    (lambda a: ops.gated_linear_attention(*a["qkv"], a["g"], decay_sign=a["g"][..., 0]),
     r"decay_sign has shape \[2, 5, 2\], expected log_forget's shape"),
    (lambda a: ops.retention(*a["qkv"], np.array([0.5, 0.5]), decay_sign=np.ones(3)),
     r"decay_sign has shape \[3\], expected gamma's shape \[2\]"),
    (lambda a: ops.linear_attention(*a["qkv"], log_decay=np.full(2, -0.1), decay_sign=-np.ones(2)),
     "decay_sign needs normalize=False"),
])
def test_errors(call, message):
  z = np.zeros((B, 5, H, 4), np.float32)
  with pytest.raises(ValueError, match=message):
    call({"qkv": (z, z, z), "g": np.full((B, 5, H, 4), -0.1, np.float32)})
