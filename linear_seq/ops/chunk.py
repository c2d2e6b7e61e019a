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
Vector decay (GLA): D has a K axis, so the intra term is not one plain matmul, and splitting
e^{D_ts} = e^{b_t}·e^{−b_s} overflows under strong gates. Instead (a secondary chunking, like
fla's sub-chunks, taken all the way down) the chunk is split in halves recursively: for t in a
right block R and s in the adjacent left block L, D_ts = (suffix of L after s) + (prefix of R up
to t), both ≤ 0, so each cross block is one matmul of (q ⊙ e^{prefix}) and (k ⊙ e^{suffix}) with
no overflow (a factor that underflows means a negligible product). log2(C) levels:
O(T·K·log C) elementwise, O(T·C·K) matmul flops; the chunk length is rounded up to a power of
two for vector gates. The diagonal is q_t·k_t (D_tt = 0).
"""
import math

import jax.numpy as jnp
import numpy as np
from jax import lax

from linear_seq.ops import parallel as parallel_lib

_HI = lax.Precision.HIGHEST   # the 0/1 matmuls that sum log decays must not drop to bf16/TF32


def _range_sum_matrix(n: int) -> np.ndarray:
  """M[t, s, l] = 1 if s < l ≤ t, as float32 [n, n, n]."""
  t, s, l = np.meshgrid(np.arange(n), np.arange(n), np.arange(n), indexing="ij")
  return ((s < l) & (l <= t)).astype(np.float32)


def _pair_sums(g_XnK):
  """[..., n, K] -> [..., n, n, K]: D[t, s] = Σ_{s<l≤t} g_l, −inf where s > t (0/1 matmul)."""
  n = g_XnK.shape[-2]
  if n > 128:   # the [n, n, n] constant gets large: accumulate by reverse cumsums instead
    return parallel_lib.pairwise_log_decay(g_XnK)
  m = jnp.asarray(_range_sum_matrix(n), g_XnK.dtype)
  d = jnp.einsum("tsl,...lk->...tsk", m, g_XnK, precision=_HI)
  t, s = np.arange(n)[:, None], np.arange(n)[None, :]
  return jnp.where((s <= t)[:, :, None], d, -jnp.inf)


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


def _intra_vector(q_XCK, k_XCK, g_XCK):
  """Intra-chunk scores for a vector gate by binary splitting (C a power of two), exactly.

  A[..., t, s] = Σ_k q_tk k_sk e^{D_tsk} for s ≤ t. Level h = 1, 2, ..., C/2 pairs each block L of
  h tokens with the next block R: for t ∈ R, s ∈ L, D_ts = (suffix of L after s) + (prefix of R
  up to t), both ≤ 0, so A[R, L] = (q_R ⊙ e^{prefix_R}) (k_L ⊙ e^{suffix_L})ᵀ is one matmul
  with no overflow. Prefixes/suffixes/totals within blocks of 2h are sums of those within blocks
  of h (same-sign adds, no subtraction). O(T·K·log C) elementwise, O(T·C·K) matmul flops.

  Returns A [..., C, C] and the chunk's prefix Σ_{l≤t} g, suffix Σ_{l>t} g [..., C, K], and
  total Σ g [..., K], all reused by the inter-chunk terms.
  """
  *lead, C, K = q_XCK.shape
  pre, suf, tot = g_XCK, jnp.zeros_like(g_XCK), g_XCK        # within blocks of h = 1
  a = jnp.sum(q_XCK * k_XCK, axis=-1)[..., None, None]       # [..., C, 1, 1]: the diagonal
  h = 1
  while h < C:
    nb = C // (2 * h)
    pairs = lambda x: x.reshape(*lead, nb, 2, h, K)
    pre2, suf2, q2, k2 = pairs(pre), pairs(suf), pairs(q_XCK), pairs(k_XCK)
    tot2 = tot.reshape(*lead, nb, 2, K)
    q_hat = q2[..., 1, :, :] * jnp.exp(pre2[..., 1, :, :])
    k_hat = k2[..., 0, :, :] * jnp.exp(suf2[..., 0, :, :]) if h > 1 else k2[..., 0, :, :]
    if h == 1:
      x = jnp.sum(q_hat * k_hat, axis=-1)[..., None]          # [..., nb, 1, 1]
    else:
      x = jnp.einsum("...tk,...sk->...ts", q_hat, k_hat)      # [..., nb, h, h]
    a2 = a.reshape(*lead, nb, 2, h, h)
    top = jnp.concatenate([a2[..., 0, :, :], jnp.zeros_like(x)], axis=-1)
    bottom = jnp.concatenate([x, a2[..., 1, :, :]], axis=-1)
    a = jnp.concatenate([top, bottom], axis=-2)               # [..., nb, 2h, 2h]
    t_left, t_right = tot2[..., 0, :], tot2[..., 1, :]
    pre = jnp.stack([pre2[..., 0, :, :], pre2[..., 1, :, :] + t_left[..., None, :]], axis=-3)
    suf = jnp.stack([suf2[..., 0, :, :] + t_right[..., None, :], suf2[..., 1, :, :]], axis=-3)
    pre, suf = pre.reshape(*lead, C, K), suf.reshape(*lead, C, K)
    tot = t_left + t_right
    h *= 2
  return a.reshape(*lead, C, C), pre, suf, tot.reshape(*lead, K)


def chunk(q_BTHK, k_BTHK, v_BTHV, g_BTHk, s0_BHKV, chunk_size: int):
  """Chunkwise form (float32 in, scale in q, g clamped finite). g: None, [B,T,H,1] or [B,T,H,K]."""
  B, T, H, K = q_BTHK.shape
  V = v_BTHV.shape[-1]
  vector = g_BTHk is not None and g_BTHk.shape[-1] > 1
  C = max(1, min(chunk_size, T))
  if vector:   # binary splitting needs a power of two
    C = 1 << (C - 1).bit_length()
  N = math.ceil(T / C)
  q, k, v = (_to_chunks(x, N, C) for x in (q_BTHK, k_BTHK, v_BTHV))   # [B, H, N, C, ·]
  causal = np.tril(np.ones((C, C), bool))

  if g_BTHk is None:
    a = jnp.where(causal, jnp.einsum("bhnck,bhnsk->bhncs", q, k), 0.0)
    q_in, k_out, decay = q, k, None
  else:
    g = _to_chunks(g_BTHk, N, C)                  # [B, H, N, C, 1 or K]
    if vector:
      a, prefix, suffix, total = _intra_vector(q, k, g)
    else:
      prefix, suffix = _prefix_suffix(g)
      total = prefix[..., -1, :]
      w = jnp.exp(_pair_sums(g)[..., 0])           # [B, H, N, C, C], 0 above the diagonal
      a = jnp.einsum("bhnck,bhnsk->bhncs", q, k) * w
    q_in, k_out = q * jnp.exp(prefix), k * jnp.exp(suffix)
    decay = jnp.exp(total)                        # e^{Γ}: [B, H, N, 1 or K]
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
