"""DeltaProduct's recurrence (mixers/householder.py) against a float64 numpy loop of Siems et al.'s equations.

Per token: S ← diag(α_t) S once, then for each of the n_h steps S ← S + β kᵀ(v − k S), then o_t = K^−½ q_t S.
Checked: outputs and final state of the chunk form (float32, relative RMS ≤ 1e-5); gradients wrt
q, k, v, β, log α and the initial state (random cotangents on o and S) of the float64 chunk form against central
finite differences of the numpy loop along a random direction per input (≤ 1e-6 relative), and of the float32
chunk form against the float64 one (≤ 2e-5). The mixer itself is checked against the loop in test_delta_mamba.py
and by the shared mixer matrix (test_mixers.py: state, causality, prefill + steps, packed documents).
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from linear_seq.mixers import householder
from tests.helpers import rel_rms, vjp_grads

B, T, H, K, V = 2, 7, 2, 5, 3


def loop(q, k, v, beta, log_decay, s0):
  """The paper's equations one token and one step at a time, float64 numpy: (o [B,T,H,V], S [B,H,K,V])."""
  q, k, v, beta = (np.asarray(a, np.float64) for a in (q, k, v, beta))
  n = k.shape[2]
  S = np.zeros((B, H, K, V)) if s0 is None else np.array(s0, np.float64)
  o = np.zeros((B, T, H, V))
  for b in range(B):
    for t in range(T):
      for h in range(H):
        if log_decay is not None:
          S[b, h] = np.exp(np.asarray(log_decay, np.float64)[b, t, h]).reshape(-1, 1) * S[b, h]  # α per row
        for j in range(n):
          kk = k[b, t, j, h]
          S[b, h] = S[b, h] + beta[b, t, j, h] * np.outer(kk, v[b, t, j, h] - kk @ S[b, h])
        o[b, t, h] = K ** -0.5 * q[b, t, h] @ S[b, h]
  return o, S


def inputs(n, gate, init, seed=0):
  """q, unit-norm k [B,T,n,H,K], v, β ∈ [0, 2], log α (scalar or per channel, a reset at t = 3), s0."""
  r = np.random.default_rng(seed)
  q = r.normal(size=(B, T, H, K))
  k = r.normal(size=(B, T, n, H, K))
  k /= np.linalg.norm(k, axis=-1, keepdims=True)
  v = r.normal(size=(B, T, n, H, V))
  beta = r.uniform(0, 2, size=(B, T, n, H))
  g = None
  if gate is not None:
    g = -r.uniform(0.01, 1.0, size=(B, T, H) if gate == "scalar" else (B, T, H, K))
    g[0, 3] = -np.inf
  s0 = r.normal(size=(B, H, K, V)) if init else None
  return [None if a is None else a.astype(np.float32) for a in (q, k, v, beta, g, s0)]


@functools.lru_cache(maxsize=None)
def _vjp(mode, chunk_size):
  def f(args, cot):
    run = lambda *a: householder.delta_product(*a[:5], initial_state=a[5], mode=mode,  # noqa: E731
                                               chunk_size=chunk_size)
    return run(*args), vjp_grads(run, args, cot)
  return jax.jit(f)


# Ungated with resets is the mixer's packed-document case in test_mixers.py.
CASES = [(2, "scalar", True, 4), (3, "channel", False, 3)]


@pytest.mark.parametrize("n,gate,init,chunk", CASES, ids=[f"n{c[0]}-{c[1]}-s0{c[2]}" for c in CASES])
def test_against_float64_loop(n, gate, init, chunk):
  args = inputs(n, gate, init)
  o_ref, s_ref = loop(*args)
  r = np.random.default_rng(1)
  cot = (r.normal(size=o_ref.shape).astype(np.float32), r.normal(size=s_ref.shape).astype(np.float32))
  present = [i for i, a in enumerate(args) if a is not None]
  (o, s), grads32 = _vjp("chunk", chunk)(args, cot)   # the other forms are the op's (tests/ops/test_delta.py)
  assert rel_rms(o, o_ref) < 1e-5 and rel_rms(s, s_ref) < 1e-5
  # Gradients: the float64 chunk form against finite differences of the loop, one random direction per input.
  with jax.enable_x64(True):
    f64 = lambda a: None if a is None else jnp.asarray(a, jnp.float64)  # noqa: E731
    _, grads64 = _vjp("chunk", chunk)([f64(a) for a in args], tuple(map(f64, cot)))
    grads64 = [np.asarray(g) for g in grads64]
  objective = lambda a: sum(np.sum(x * c) for x, c in zip(loop(*a), cot))  # noqa: E731
  eps = 1e-6
  for i, grad in zip(present, grads64):
    d = r.normal(size=args[i].shape)
    if i == 4:
      d[~np.isfinite(args[i])] = 0.0  # a reset stays a reset
    plus, minus = (list(map(lambda a: None if a is None else np.asarray(a, np.float64), args)) for _ in "+-")
    plus[i], minus[i] = plus[i] + eps * d, minus[i] - eps * d
    fd = (objective(plus) - objective(minus)) / (2 * eps)
    assert abs(np.sum(grad * d) - fd) <= 1e-6 * max(1.0, abs(fd)), (i, np.sum(grad * d), fd)
  for i, g32, g64 in zip(present, grads32, grads64):
    assert rel_rms(g32, g64) < 2e-5, (i, rel_rms(g32, g64))


def test_one_step_is_the_delta_rule():
  """n_h = 1 is ops.delta_rule itself (DeltaNet)."""
  from linear_seq import ops
  q, k, v, beta, g, s0 = inputs(1, "scalar", True)
  o1, s1 = householder.delta_product(q, k, v, beta, g, initial_state=s0, mode="recurrent")
  o2, s2 = ops.delta_rule(q, k[:, :, 0], v[:, :, 0], beta[:, :, 0], g, initial_state=s0, mode="recurrent")
  assert np.array_equal(np.asarray(o1), np.asarray(o2)) and np.array_equal(np.asarray(s1), np.asarray(s2))
