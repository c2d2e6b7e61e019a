"""The chunkwise-parallel form of the linear recurrence (the training path).

The sequence is cut into N chunks of C tokens (T is padded with q = k = v = 0, log α = 0, which
leaves the state untouched). With S_n the state entering chunk n and, inside the chunk,
b_t = Σ_{l≤t} g_l (prefix), r_s = Σ_{l>s} g_l (suffix), Γ = Σ_l g_l, D_ts = Σ_{s<l≤t} g_l:

    o_t     = (q_t ⊙ e^{b_t}) S_n  +  Σ_{s≤t} [Σ_k q_tk k_sk e^{D_tsk}] v_s      (inter + intra)
    S_{n+1} = diag(e^{Γ}) S_n  +  Σ_s (k_s ⊙ e^{r_s})ᵀ v_s

The state is passed between chunks by a lax.scan over N (cheap: K×V per step); everything else
is batched matmuls over all chunks at once. O(T·C·K + T·K·V), no T×T and no T·C·K·V tensor.

Exactness. Every exponent is a sum of log decays over exactly its range, accumulated by a cumsum
or a 0/1 matmul from inside the chunk: never a difference of two cumulative sums (b_t − b_s
loses ~eps·|b| absolute, and |b| reaches C·20 under strong gates or 1e4 after a reset), and never
split as e^{b_t}·e^{−b_s} where e^{−b_s} can overflow. Sums of same-sign terms carry relative
error ~eps, so e^{D} is exact to float32 rounding for any gate strength. The caller clamps log α
to a finite floor (recurrence.LOG_DECAY_FLOOR) so resets are exact zeros and no −inf meets a 0.

Scalar (and fixed) decay: D is one C×C matrix per chunk, formed exactly by a 0/1 matmul.
Vector decay (GLA): D has a K axis, so the intra term cannot be one plain matmul. Each chunk is
split into sub-chunks of c tokens (secondary chunking, as fla's GLA). For t in sub-chunk i and s in
sub-chunk j < i, D_ts = β_t + G_ij + σ_s with β the prefix inside sub-chunk i, σ the suffix inside
sub-chunk j and G_ij the gates of the sub-chunks strictly between; all three are ≤ 0, so
e^{D} = e^{β_t}·e^{G_ij}·e^{σ_s} splits with no overflow (a factor that underflows means a
negligible product), and the block is a matmul (q ⊙ e^{β}) diag(e^{G_ij}) (k ⊙ e^{σ})ᵀ. The
c×c diagonal blocks are formed elementwise from exact pairwise sums, O(T·c·K).
"""
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

SUB_CHUNK = 16   # c: sub-chunk length for vector gates (chunk length is rounded up to a multiple)
_HI = lax.Precision.HIGHEST   # the 0/1 matmuls that sum log decays must not drop to bf16/TF32


def _range_sum_matrix(n: int, inclusive_end: bool) -> np.ndarray:
  """M[t, s, l] = 1 if s < l ≤ t (inclusive_end) or s < l < t (exclusive), as float32 [n, n, n]."""
  t, s, l = np.meshgrid(np.arange(n), np.arange(n), np.arange(n), indexing="ij")
  upper = (l <= t) if inclusive_end else (l < t)
  return ((s < l) & upper).astype(np.float32)


def _pair_sums(g_XnK, inclusive_end: bool = True, strict: bool = False):
  """[..., n, K] -> [..., n, n, K]: Σ over (s, t] (or (s, t)) of g, −inf where s > t (s ≥ t if strict)."""
  n = g_XnK.shape[-2]
  m = jnp.asarray(_range_sum_matrix(n, inclusive_end), g_XnK.dtype)
  d = jnp.einsum("tsl,...lk->...tsk", m, g_XnK, precision=_HI)
  t, s = np.arange(n)[:, None], np.arange(n)[None, :]
  keep = (s < t) if strict else (s <= t)
  return jnp.where(keep[:, :, None], d, -jnp.inf)


def _prefix_suffix(g_XnK):
  """Inclusive prefix sums Σ_{l≤t} and exclusive suffix sums Σ_{l>t} along axis -2."""
  prefix = lax.cumsum(g_XnK, axis=g_XnK.ndim - 2)
  rev = lax.cumsum(g_XnK, axis=g_XnK.ndim - 2, reverse=True)
  suffix = jnp.concatenate([rev[..., 1:, :], jnp.zeros_like(rev[..., :1, :])], axis=-2)
  return prefix, suffix


def _to_chunks(x_BTHD, N: int, C: int):
  B, T, H, D = x_BTHD.shape
  x = jnp.pad(x_BTHD, ((0, 0), (0, N * C - T), (0, 0), (0, 0)))
  return x.reshape(B, N, C, H, D).transpose(0, 3, 1, 2, 4)   # [B, H, N, C, D]


def _intra_vector(q_XCK, k_XCK, g_XCK, c: int):
  """Intra-chunk scores A[..., t, s] = Σ_k q_tk k_sk e^{D_tsk} for a vector gate, exactly."""
  *lead, C, K = q_XCK.shape
  m = C // c
  sub = lambda x: x.reshape(*lead, m, c, K)
  q_s, k_s, g_s = sub(q_XCK), sub(k_XCK), sub(g_XCK)
  beta, sigma = _prefix_suffix(g_s)                           # [..., m, c, K]
  tau = beta[..., -1, :]                                       # sub-chunk totals [..., m, K]
  gap_mmK = _pair_sums(tau, inclusive_end=False, strict=True)  # Σ_{j<u<i} τ_u, −inf for j ≥ i
  qb = q_s * jnp.exp(beta)
  ks = k_s * jnp.exp(sigma)
  qe_XmmcK = qb[..., :, None, :, :] * jnp.exp(gap_mmK)[..., :, :, None, :]   # [.., i, j, t, K]
  a_off = jnp.einsum("...ijtk,...jsk->...itjs", qe_XmmcK, ks)                # [.., i, t, j, s]
  d_diag = _pair_sums(g_s)                                                   # [.., m, c, c, K]
  a_diag = jnp.einsum("...tk,...sk,...tsk->...ts", q_s, k_s, jnp.exp(d_diag))
  eye = jnp.eye(m, dtype=a_off.dtype)
  a = a_off + a_diag[..., :, :, None, :] * eye[:, None, :, None]
  return a.reshape(*lead, C, C)


def chunk(q_BTHK, k_BTHK, v_BTHV, g_BTHk, s0_BHKV, chunk_size: int):
  """Chunkwise form (float32 in, scale in q, g clamped finite). g: None, [B,T,H,1] or [B,T,H,K]."""
  B, T, H, K = q_BTHK.shape
  V = v_BTHV.shape[-1]
  vector = g_BTHk is not None and g_BTHk.shape[-1] > 1
  C = max(1, min(chunk_size, T))
  c = min(SUB_CHUNK, C)
  if vector:
    C = c * math.ceil(C / c)
  N = math.ceil(T / C)
  q, k, v = (_to_chunks(x, N, C) for x in (q_BTHK, k_BTHK, v_BTHV))   # [B, H, N, C, ·]
  causal = np.tril(np.ones((C, C), bool))

  if g_BTHk is None:
    a = jnp.where(causal, jnp.einsum("bhnck,bhnsk->bhncs", q, k), 0.0)
    q_in, k_out, decay = q, k, None
  else:
    g = _to_chunks(g_BTHk, N, C)                  # [B, H, N, C, 1 or K]
    prefix, suffix = _prefix_suffix(g)
    q_in, k_out = q * jnp.exp(prefix), k * jnp.exp(suffix)
    decay = jnp.exp(prefix[..., -1, :])           # e^{Γ}: [B, H, N, 1 or K]
    if vector:
      a = _intra_vector(q, k, g, c)
    else:
      w = jnp.exp(_pair_sums(g)[..., 0])           # [B, H, N, C, C], 0 above the diagonal
      a = jnp.einsum("bhnck,bhnsk->bhncs", q, k) * w
  o = jnp.einsum("bhncs,bhnsv->bhncv", a, v)

  # Inter-chunk: S_{n+1} = diag(e^Γ_n) S_n + U_n by a scan over chunks; keep each S_n.
  u_NBHKV = jnp.einsum("bhnck,bhncv->nbhkv", k_out, v)
  s = jnp.zeros((B, H, K, V), q_BTHK.dtype) if s0_BHKV is None else s0_BHKV
  xs = (u_NBHKV, None if decay is None else jnp.moveaxis(decay, 2, 0))

  def step(s_BHKV, x):
    u_BHKV, a_BHk = x
    nxt = s_BHKV + u_BHKV if a_BHk is None else a_BHk[..., None] * s_BHKV + u_BHKV
    return nxt, s_BHKV

  s, s_in_NBHKV = lax.scan(step, s, xs)
  o = o + jnp.einsum("bhnck,nbhkv->bhncv", q_in, s_in_NBHKV)
  o_BTHV = o.transpose(0, 2, 3, 1, 4).reshape(B, N * C, H, V)[:, :T]
  return o_BTHV, s
