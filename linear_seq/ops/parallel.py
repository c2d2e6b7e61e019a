"""The masked T×T (parallel) form of the linear recurrence, and subtraction-free pairwise decays.

    o_i = Σ_{j≤i} Σ_k q_ik k_jk exp(D_ijk) v_j + (q_i ⊙ exp(b_i)) S_{-1}
    S   = Σ_j (k_j ⊙ exp(D_{T-1,j}))ᵀ v_j + diag(exp(b_{T-1})) S_{-1}

with D_ij = Σ_{j<l≤i} log α_l (empty sum 0) and b_i = Σ_{l≤i} log α_l. The scale is already in q.

D_ij is never formed as b_i − b_j: that difference of two large cumulative sums loses precision
(|b| reaches 5000 at T=257 under strong gates while D_ij near the diagonal is small) and gives
−inf − −inf = NaN across a reset. Instead each row's sums are accumulated outward from the
diagonal (a reverse cumsum of the row's masked gates), so every exponent is a sum of same-sign
terms over exactly its range: relative error ~eps·|D| and no NaN. Masked entries get −inf in the
exponent before exp, so their gradients are exactly zero.

Precision (precision.py, docs/DESIGN.md), as the chunk form (chunk.py): with bf16 inputs (`operand_dtype`)
the scores Q Kᵀ, the scores times V and (Q ⊙ e^b) S₀ take bf16 operands and accumulate in float32; the
pairwise decays, their exponents, the scalar gate's mask, the final state's update (K ⊙ e^{r})ᵀ V and the
state stay float32. A vector gate's scores Σ_k q_ik k_jk e^{D_ijk} (an outer product q_i k_jᵀ per channel,
then a batched matrix-vector product against the T×T×K float32 decay weights: no matmul a tensor core speeds
up) keep float32 operands, the decay weights unrounded. Without an operand dtype every product is the plain
float32 `jnp.einsum` (the same program as before the policy), or its emulated TF32/bf16 rounding under
`precision.emulate`.
"""
import jax.numpy as jnp
from jax import lax

from linear_seq.ops import precision


def pairwise_log_decay(g_XTk, axis: int = -2):
  """D[..., i, j, :] = Σ_{j<l≤i} g_l for j ≤ i and −inf for j > i, from g [..., T, k] (time at -2).

  Returns [..., T, T, k]. Cost O(T²·k), one reverse cumsum; no subtraction.
  """
  assert axis == -2
  T = g_XTk.shape[-2]
  # g_next[j] = g_{j+1} (0 past the end), broadcast over rows i: H[i, j] = g_{j+1} if j < i.
  g_next = jnp.concatenate([g_XTk[..., 1:, :], jnp.zeros_like(g_XTk[..., :1, :])], axis=-2)
  i = jnp.arange(T)[:, None, None]
  j = jnp.arange(T)[None, :, None]
  h_XTTk = jnp.where(j < i, g_next[..., None, :, :], 0.0)
  d_XTTk = lax.cumsum(h_XTTk, axis=h_XTTk.ndim - 2, reverse=True)
  return jnp.where(j <= i, d_XTTk, -jnp.inf)


def _state_term(q_BTHK, s0_BHKV, operand_dtype):
  """q_t S₀ for every t, [B, T, H, V]. With bf16 operands the time axis is moved next to K first: the
  [B, T, H, K] layout's dot crashed XLA 0.10.2's CPU runtime there ("Unsupported element type for
  DotThunk::Execute: BF16 x BF16 = F32"), the [B, H, T, K] one runs; float32 keeps its program."""
  if operand_dtype is None:
    return precision.einsum("bihk,bhkv->bihv", q_BTHK, s0_BHKV)
  q_BHTK = jnp.moveaxis(q_BTHK, 1, 2)
  return jnp.moveaxis(precision.einsum("bhik,bhkv->bhiv", q_BHTK, s0_BHKV, operand_dtype=operand_dtype), 1, 2)


def parallel(q_BTHK, k_BTHK, v_BTHV, g_BTHk, s0_BHKV, operand_dtype=None):
  """Masked T×T form (float32 in, scale in q). g: None, [B,T,H,1] (scalar) or [B,T,H,K].

  operand_dtype: None, or bf16: the large products' operand dtype (float32 accumulation; module docstring).
  """
  dot = lambda spec, x, y: precision.einsum(spec, x, y, operand_dtype=operand_dtype)
  T = q_BTHK.shape[1]
  if g_BTHk is None:
    causal = jnp.tril(jnp.ones((T, T), bool))
    a_BHTT = dot("bihk,bjhk->bhij", q_BTHK, k_BTHK)
    a_BHTT = jnp.where(causal, a_BHTT, 0.0)
    o_BTHV = dot("bhij,bjhv->bihv", a_BHTT, v_BTHV)
    s_BHKV = precision.einsum("bjhk,bjhv->bhkv", k_BTHK, v_BTHV)   # the state: float32 operands
    if s0_BHKV is not None:
      o_BTHV = o_BTHV + _state_term(q_BTHK, s0_BHKV, operand_dtype)
      s_BHKV = s_BHKV + s0_BHKV
    return o_BTHV, s_BHKV

  g_BHTk = jnp.moveaxis(g_BTHk, 2, 1)
  d_BHTTk = pairwise_log_decay(g_BHTk)
  w_BHTTk = jnp.exp(d_BHTTk)
  if g_BTHk.shape[-1] == 1:   # scalar decay: one mask per head
    a_BHTT = dot("bihk,bjhk->bhij", q_BTHK, k_BTHK) * w_BHTTk[..., 0]
  else:   # Σ_k q_ik k_jk e^{D_ijk}: float32 operands (module docstring); jnp.einsum's three-operand path
    qk_BHKTT = precision.einsum("bihk,bjhk->bhkij", q_BTHK, k_BTHK)
    a_BHTT = precision.einsum("bhkij,bhijk->bhij", qk_BHKTT, w_BHTTk)
  o_BTHV = dot("bhij,bjhv->bihv", a_BHTT, v_BTHV)
  # Final state: the last row of D is the suffix sum Σ_{l>j} g_l.
  kw_BTHK = k_BTHK * jnp.moveaxis(w_BHTTk[:, :, -1], 1, 2)
  s_BHKV = precision.einsum("bjhk,bjhv->bhkv", kw_BTHK, v_BTHV)   # the state: float32 operands
  if s0_BHKV is not None:
    b_BTHk = jnp.cumsum(g_BTHk, axis=1)   # a prefix sum from t = 0: exact enough for exp(b)
    o_BTHV = o_BTHV + _state_term(q_BTHK * jnp.exp(b_BTHk), s0_BHKV, operand_dtype)
    s_BHKV = s_BHKV + jnp.exp(b_BTHk[:, -1])[..., None] * s0_BHKV
  return o_BTHV, s_BHKV
