"""deltanet, deltaproduct and mamba2 against float64 loops of their papers' equations (every gate, both betas), their
Mamba-2 init, and bf16 compute. The shared checks (state, causality, prefill, packing) are in test_mixers."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from linear_seq import mixers

D, H, B, T = 16, 2, 2, 9


def np_params(m) -> dict:
  """'in_proj/kernel' -> float64 array, for every parameter of the mixer."""
  return {"/".join(map(str, p)): np.asarray(v[...], np.float64)
          for p, v in nnx.to_flat_state(nnx.state(m, nnx.Param))}


def silu(x):
  return x / (1 + np.exp(-x))


def softplus(x):
  return np.logaddexp(0, x)


def causal_conv(x_TC, w_WC, b_C):
  W = w_WC.shape[0]
  xp = np.concatenate([np.zeros((W - 1, x_TC.shape[1])), x_TC])
  return b_C + sum(w_WC[l] * xp[W - 1 - l: W - 1 - l + len(x_TC)] for l in range(W))


def rms(x, scale, eps=1e-5):
  return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * scale


def deltanet_reference(m, x_BTD):
  """S' = α_t ⊙ S (rows of S scaled per K channel), S = S' + β k ᵀ(v − k S'), o = K^−½ q S, per head.
  DeltaProduct (n = householder_steps > 1): after α_t, n such writes with the token's n (k_j, v_j, β_j), each
  from its own slice of W_k, W_v, W_β (fla's layout: step-major), then o = K^−½ q S."""
  p = np_params(m)
  K, n = D // H, m.householder_steps
  out = []
  for x in np.asarray(x_BTD, np.float64):
    qkv = np.concatenate([x @ p[f"{c}_proj/kernel"] for c in "qkv"], axis=-1)
    qkv = silu(causal_conv(qkv, p["conv/kernel"], p["conv/bias"]))
    q, k, v = qkv[:, :D].reshape(T, H, K), qkv[:, D:(1 + n) * D], qkv[:, (1 + n) * D:]
    k, v = k.reshape(T, n, H, K), v.reshape(T, n, H, K)
    q, k = (a / np.sqrt(np.sum(a * a, -1, keepdims=True) + 1e-6) for a in (q, k))
    beta = 1 / (1 + np.exp(-(x @ p["b_proj/kernel"]))) * (2 if m.beta == "2sigmoid" else 1)
    beta = beta.reshape(T, n, H)
    if m.gate == "none":
      alpha = np.ones((T, H, K))
    elif m.gate == "scalar":
      dt = softplus(x @ p["a_proj/kernel"] + p["dt_bias"])                       # [T, H]
      alpha = np.broadcast_to(np.exp(-np.exp(p["A_log"]) * dt)[..., None], (T, H, K))
    else:
      a = (x @ p["gate_down/kernel"] @ p["gate_up/kernel"]).reshape(T, H, K)
      alpha = np.exp(-np.exp(p["A_log"])[:, None] * softplus(a + p["dt_bias"]))  # [T, H, K]
    S, o = np.zeros((H, K, K)), np.zeros((T, H, K))
    for t in range(T):
      for h in range(H):
        S[h] = alpha[t, h][:, None] * S[h]
        for j in range(n):
          S[h] = S[h] + beta[t, j, h] * np.outer(k[t, j, h], v[t, j, h] - k[t, j, h] @ S[h])
        o[t, h] = K ** -0.5 * q[t, h] @ S[h]
    o = rms(o, p["out_norm/scale"]).reshape(T, D)
    g = x @ p["g_proj/kernel"]
    out.append((o * silu(g)) @ p["o_proj/kernel"])
  return np.stack(out)


def mamba2_reference(m, x_BTD):
  """h_t = exp(Δ_t A) h_{t−1} + Δ_t B_tᵀ x_t (ZOH for A, Euler for B), y_t = C_t h_t + D x_t, per head."""
  p = np_params(m)
  E, N, Hm, P = m.inner, m.n, m.num_heads, m.head_dim
  out = []
  for x in np.asarray(x_BTD, np.float64):
    zxbcdt = x @ p["in_proj/kernel"]
    z, xbc, dt = zxbcdt[:, :E], zxbcdt[:, E:2 * E + 2 * N], zxbcdt[:, 2 * E + 2 * N:]
    xbc = silu(causal_conv(xbc, p["conv/kernel"], p["conv/bias"]))
    xs, Bm, Cm = xbc[:, :E].reshape(T, Hm, P), xbc[:, E:E + N], xbc[:, E + N:]
    dt = softplus(dt + p["dt_bias"])
    A = -np.exp(p["A_log"])
    h, y = np.zeros((Hm, N, P)), np.zeros((T, Hm, P))
    for t in range(T):
      h = np.exp(dt[t] * A)[:, None, None] * h + dt[t][:, None, None] * Bm[t][None, :, None] * xs[t][:, None]
      y[t] = np.einsum("n,hnp->hp", Cm[t], h) + p["D_skip"][:, None] * xs[t]
    y = rms(y.reshape(T, E) * silu(z), p["out_norm/scale"])
    out.append(y @ p["out_proj/kernel"])
  return np.stack(out)


CASES = [
    ("deltanet", lambda **kw: mixers.DeltaNet(D, H, chunk_size=4, **kw), deltanet_reference),
    ("deltanet-scalar", lambda **kw: mixers.DeltaNet(D, H, gate="scalar", chunk_size=4, **kw),
     deltanet_reference),
    ("deltanet-channel-2sigmoid", lambda **kw: mixers.DeltaNet(D, H, gate="channel", beta="2sigmoid",
                                                               gate_rank=3, chunk_size=4, **kw),
     deltanet_reference),
    ("deltaproduct3-scalar-2sigmoid", lambda **kw: mixers.DeltaProduct(
        D, H, householder_steps=3, gate="scalar", beta="2sigmoid", chunk_size=4, **kw), deltanet_reference),
    ("mamba2", lambda **kw: mixers.Mamba2(D, head_dim=8, state_size=5, chunk_size=4, **kw), mamba2_reference),
]


def perturbed(m, seed=7):
  """Non-trivial values for the parameters initialized to 1 or 0 (norm scales, conv bias, D)."""
  for i, (path, v) in enumerate(nnx.to_flat_state(nnx.state(m, nnx.Param))):
    if path[-1] in ("scale", "bias", "D_skip"):
      v[...] = v[...] + 0.3 * jax.random.normal(jax.random.key(seed + i), v.shape)
  return m


@pytest.mark.parametrize("make,reference", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_against_float64_loop(make, reference):
  m = perturbed(make(rngs=nnx.Rngs(0)))
  x = jax.random.normal(jax.random.key(1), (B, T, D), jnp.float32)
  y, _ = nnx.jit(lambda m, x: m(x))(m, x)
  ref = reference(m, x)
  np.testing.assert_allclose(np.asarray(y, np.float64), ref, rtol=1e-4, atol=1e-5 * np.abs(ref).max())


@pytest.mark.parametrize("negative", [False, True])
def test_mamba2_transition(negative):
  """Mamba2.transition is the float64 loop's exp(Δ_t A) (2 exp(Δ_t A) − 1 with negative eigenvalues) per head."""
  m = mixers.Mamba2(D, head_dim=8, state_size=5, negative_eigenvalues=negative, rngs=nnx.Rngs(0))
  m.dt_bias[...] = m.dt_bias[...] + 3.0   # Δ of order 1-3: both signs with negative eigenvalues
  x = jax.random.normal(jax.random.key(1), (B, T, D), jnp.float32)
  p = np_params(m)
  dt = softplus(np.asarray(x, np.float64) @ p["in_proj/kernel"][:, -m.num_heads:] + p["dt_bias"])
  ref = np.exp(-np.exp(p["A_log"]) * dt)
  ref = 2 * ref - 1 if negative else ref
  got = np.asarray(m.transition(x))
  assert got.shape == (B, T, m.num_heads)
  np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
  assert (ref.min() < -0.1 and ref.max() > 0.1) if negative else ref.min() > 0


BF16_CASES = [c for c in CASES if c[0] != "deltaproduct3-scalar-2sigmoid"]   # deltanet's dtype path


@pytest.mark.parametrize("make", [c[1] for c in BF16_CASES], ids=[c[0] for c in BF16_CASES])
def test_bfloat16_compute(make):
  """bf16 activations (float32 params and state) track the float32 mixer with the same parameters."""
  x = jax.random.normal(jax.random.key(1), (B, T, D), jnp.float32)
  fwd = nnx.jit(lambda m, x: m(x))
  y32, _ = fwd(make(rngs=nnx.Rngs(0)), x)
  m16 = make(rngs=nnx.Rngs(0), dtype=jnp.bfloat16)
  assert all(v.dtype == jnp.float32 for v in jax.tree.leaves(nnx.state(m16, nnx.Param)))
  y16, s16 = fwd(m16, x.astype(jnp.bfloat16))
  assert y16.dtype == jnp.bfloat16 and s16["S"].dtype == jnp.float32
  err = np.sqrt(np.mean((np.asarray(y16, np.float32) - np.asarray(y32)) ** 2) / np.mean(np.asarray(y32) ** 2))
  assert err < 3e-2, err


def test_mamba2_init_and_heads():
  m = mixers.Mamba2(32, expand=2, head_dim=16, state_size=6, dt_min=1e-3, dt_max=1e-1, rngs=nnx.Rngs(0))
  assert m.num_heads == 4 and m.in_proj.kernel.shape == (32, 2 * 64 + 2 * 6 + 4)
  A = np.exp(np.asarray(m.A_log[...]))
  dt = np.logaddexp(0, np.asarray(m.dt_bias[...]))  # softplus(dt_bias) = the initial Δ at zero input
  assert np.all((A >= 1) & (A <= 16)) and np.all((dt >= 1e-3 * 0.999) & (dt <= 1e-1 * 1.001))
  np.testing.assert_array_equal(m.D_skip[...], np.ones(4))
  assert m.state_size() == 4 * 6 * 16 + 3 * (64 + 12)


def test_deltanet_gate_init():
  m = mixers.DeltaNet(16, 2, gate="channel", gate_rank=3, dt_min=1e-2, dt_max=1e-2, rngs=nnx.Rngs(0))
  assert m.A_log.shape == (2,) and m.dt_bias.shape == (2, 8)
  np.testing.assert_allclose(np.logaddexp(0, np.asarray(m.dt_bias[...])), 1e-2, rtol=1e-4)
  assert not hasattr(mixers.DeltaNet(16, 2, rngs=nnx.Rngs(0)), "A_log")  # ungated: no decay parameters
