"""The chunkwise-parallel form of the linear recurrence (the training path).

The sequence is cut into N chunks of C tokens (T is padded with q = k = v = 0, log α = 0, which
leaves the state untouched). With S_n the state entering chunk n and, inside the chunk,
b_t = Σ_{l≤t} g_l (prefix), r_s = Σ_{l>s} g_l (suffix), Γ = Σ_l g_l, D_ts = Σ_{s<l≤t} g_l:

    o_t     = (q_t ⊙ e^{b_t}) S_n  +  Σ_{s≤t} [Σ_k q_tk k_sk e^{D_tsk}] v_s      (inter + intra)
    S_{n+1} = diag(e^{Γ}) S_n  +  Σ_s (k_s ⊙ e^{r_s})ᵀ v_s

The state is passed between chunks by a lax.scan over N (cheap: K×V per step); everything else
is batched matmuls over all chunks at once. O(T·C·K + T·K·V), no T×T and no T·C·K·V tensor.

Layout and memory (what makes it fast on CPU). Chunked tensors are [N, B, H, C, ·], made by one
transpose per input: the chunk axis leads, so the per-chunk K×V terms, the scan over chunks and the
states it emits need no further layout copies. A long sequence is cut into groups of about
`linear_group_tokens` tokens (whole chunks; tuning.py's table: 512 on every backend, or the
largest group that fits tuning's `memory_budget`, group_budget.py) that an outer lax.scan runs one after
another, carrying the state; its body is rematerialized (jax.checkpoint) in the backward pass. So the intermediates
(≈ 30 T·K floats fwd+bwd for vector gates) live for one group at a time and are reused from group
to group instead of being freshly allocated, page-faulted and pushed through memory for the whole
sequence: measured at T=8192 on 2 CPU cores, forward+backward ~1.15-1.3× faster ungated and
~1.45× faster vector-gated than one pass over all chunks, despite recomputing each group's forward
(at T=2048 the ungated form is ~15% slower than one pass would be: its data fit in cache there).

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

Precision (precision.py, docs/DESIGN.md): with bf16 inputs (`operand_dtype`) the output's large products —
Q Kᵀ (with a vector gate the splitting's cross blocks (q ⊙ e^{prefix}) (k ⊙ e^{suffix})ᵀ), the scores times
V and (Q ⊙ e^b) S — take bf16 operands and accumulate in float32; the gates, their cumulative sums (the 0/1
matmul at HIGHEST), the exponents, the scores' decay weights, the state's update (K ⊙ e^r)ᵀ V (float32
operands, as the delta rule's state passing), the state scan and the carried state stay float32: the state
is exact to float32 rounding given the bf16 inputs. Without an operand dtype every product is the plain
float32 `jnp.einsum` (the same program as before the policy), or its emulated TF32/bf16 rounding under
`precision.emulate` (all but the exact 0/1 matmul).
"""
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from linear_seq.ops import group_budget
from linear_seq.ops import parallel as parallel_lib
from linear_seq.ops import precision
from linear_seq.ops import seq_parallel
from linear_seq.ops import tuning

# The group size of the outer scan on CPU, tuning.py's `linear_group_tokens` = 512 (read at trace time, rounded
# to whole chunks). Measured fwd+bwd at T=8192, C=64, B=1, H=4, K=V=64 on 2 CPU cores: 256-1024 are all close;
# 128 is slower for vector gates (more loop steps), 2048 and no grouping are slower (memory traffic and page
# faults).


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
  d = precision.einsum("tsl,...lk->...tsk", m, g_XnK, exact=True)   # sums of log decays: never rounded
  t, s = np.arange(n)[:, None], np.arange(n)[None, :]
  return jnp.where((s <= t)[:, :, None], d, -jnp.inf)


def _prefix_suffix(g_XnK):
  """Inclusive prefix sums Σ_{l≤t} and exclusive suffix sums Σ_{l>t} along axis -2."""
  prefix = lax.cumsum(g_XnK, axis=g_XnK.ndim - 2)
  rev = lax.cumsum(g_XnK, axis=g_XnK.ndim - 2, reverse=True)
  suffix = jnp.concatenate([rev[..., 1:, :], jnp.zeros_like(rev[..., :1, :])], axis=-2)
  return prefix, suffix


def _to_chunks(x_BTHD, N: int, C: int):
  """[B, T, H, D] -> [N, B, H, C, D], zero-padded to N·C tokens."""
  B, T, H, D = x_BTHD.shape
  if N * C != T:
    x_BTHD = jnp.pad(x_BTHD, ((0, 0), (0, N * C - T), (0, 0), (0, 0)))
  return x_BTHD.reshape(B, N, C, H, D).transpose(1, 0, 3, 2, 4)


def _from_chunks(x_NBHCD, T: int):
  """[N, B, H, C, D] -> [B, T, H, D] (drops the padding)."""
  N, B, H, C, D = x_NBHCD.shape
  return x_NBHCD.transpose(1, 0, 3, 2, 4).reshape(B, N * C, H, D)[:, :T]


def _intra_vector(q_XCK, k_XCK, g_XCK, operand_dtype=None):
  """Intra-chunk scores for a vector gate by binary splitting (C a power of two), exactly.

  A[..., t, s] = Σ_k q_tk k_sk e^{D_tsk} for s ≤ t. Level h = 1, 2, ..., C/2 pairs each block L of
  h tokens with the next block R: for t ∈ R, s ∈ L, D_ts = (suffix of L after s) + (prefix of R
  up to t), both ≤ 0, so A[R, L] = (q_R ⊙ e^{prefix_R}) (k_L ⊙ e^{suffix_L})ᵀ is one matmul
  with no overflow. Prefixes/suffixes/totals within blocks of 2h are sums of those within blocks
  of h (same-sign adds, no subtraction). O(T·K·log C) elementwise, O(T·C·K) matmul flops.

  Returns A [..., C, C] and the chunk's prefix Σ_{l≤t} g, suffix Σ_{l>t} g [..., C, K], and
  total Σ g [..., K], all reused by the inter-chunk terms. operand_dtype (bf16 or None): the cross blocks'
  matmul operands (float32 accumulation); the diagonal and 1×1 level are float32 elementwise products.
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
      x = precision.einsum("...tk,...sk->...ts", q_hat, k_hat, operand_dtype=operand_dtype)   # [..., nb, h, h]
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


def _chunk_group(q_BTHK, k_BTHK, v_BTHV, g_BTHk, s0_BHKV, C: int, vector: bool, operand_dtype=None):
  """The chunkwise form over one group of tokens (all its chunks at once); returns (o, S_last)."""
  dot = lambda spec, x, y: precision.einsum(spec, x, y, operand_dtype=operand_dtype)
  B, T, H, K = q_BTHK.shape
  V = v_BTHV.shape[-1]
  N = math.ceil(T / C)
  q, k, v = (_to_chunks(x, N, C) for x in (q_BTHK, k_BTHK, v_BTHV))   # [N, B, H, C, ·]
  causal = np.tril(np.ones((C, C), bool))

  if g_BTHk is None:
    a = jnp.where(causal, dot("nbhck,nbhsk->nbhcs", q, k), 0.0)
    q_in, k_out, decay = q, k, None
  else:
    g = _to_chunks(g_BTHk, N, C)                  # [N, B, H, C, 1 or K]
    if vector:
      a, prefix, suffix, total = _intra_vector(q, k, g, operand_dtype)
    else:
      prefix, suffix = _prefix_suffix(g)
      total = prefix[..., -1, :]
      w = jnp.exp(_pair_sums(g)[..., 0])           # [N, B, H, C, C], 0 above the diagonal
      a = dot("nbhck,nbhsk->nbhcs", q, k) * w
    q_in, k_out = q * jnp.exp(prefix), k * jnp.exp(suffix)
    decay = jnp.exp(total)                        # e^{Γ}: [N, B, H, 1 or K]
  o = dot("nbhcs,nbhsv->nbhcv", a, v)

  # Inter-chunk: S_{n+1} = diag(e^Γ_n) S_n + U_n by a scan over chunks; keep each S_n.
  u_NBHKV = precision.einsum("nbhck,nbhcv->nbhkv", k_out, v)   # the state's update: float32 operands
  s = seq_parallel.initial_carry(s0_BHKV, k_BTHK, v_BTHV)

  def step(s_BHKV, x):
    u_BHKV, a_BHk = x
    nxt = s_BHKV + u_BHKV if a_BHk is None else a_BHk[..., None] * s_BHKV + u_BHKV
    return nxt, s_BHKV

  s, s_in_NBHKV = lax.scan(step, s, (u_NBHKV, decay))
  o = o + dot("nbhck,nbhkv->nbhcv", q_in, s_in_NBHKV)
  return _from_chunks(o, T), s


def chunk(q_BTHK, k_BTHK, v_BTHV, g_BTHk, s0_BHKV, chunk_size: int, operand_dtype=None):
  """Chunkwise form (float32 in, scale in q, g clamped finite). g: None, [B,T,H,1] or [B,T,H,K].

  Sequences longer than two groups run group by group (tuning's `linear_group_tokens`, whole chunks; None: one
  group; with tuning's `memory_budget`, the largest group that fits it) in a rematerialized lax.scan that
  carries the state; shorter ones in one pass.
  operand_dtype: None, or bf16: the large products' operand dtype (float32 accumulation; module docstring).
  """
  B, T, H, K = q_BTHK.shape
  V = v_BTHV.shape[-1]
  vector = g_BTHk is not None and g_BTHk.shape[-1] > 1
  C = max(1, min(chunk_size, T))
  if vector:   # binary splitting needs a power of two
    C = 1 << (C - 1).bit_length()
  tokens = group_tokens(q_BTHK, k_BTHK, v_BTHV, g_BTHk, s0_BHKV, C, operand_dtype)
  G = 1 if tokens is None else math.ceil(T / max(tokens, C))
  if G < 2:
    return _chunk_group(q_BTHK, k_BTHK, v_BTHV, g_BTHk, s0_BHKV, C, vector, operand_dtype)

  # G groups of L tokens (whole chunks), padded like the chunks: q = k = v = 0, log α = 0.
  L = math.ceil(math.ceil(T / G) / C) * C

  def groups(x_BTD):   # [B, T, ...] -> [G, B, L, ...]
    if G * L != T:
      x_BTD = jnp.pad(x_BTD, [(0, 0), (0, G * L - T)] + [(0, 0)] * (x_BTD.ndim - 2))
    return x_BTD.reshape(B, G, L, *x_BTD.shape[2:]).swapaxes(0, 1)

  xs = tuple(groups(x) for x in (q_BTHK, k_BTHK, v_BTHV))
  xs += (None if g_BTHk is None else groups(g_BTHk),)

  @jax.checkpoint
  def body(s_BHKV, x):
    o_BLHV, s_BHKV = _chunk_group(*x[:3], x[3], s_BHKV, C, vector, operand_dtype)
    return s_BHKV, o_BLHV

  s = seq_parallel.initial_carry(s0_BHKV, k_BTHK, v_BTHV)
  s, o_GBLHV = lax.scan(body, s, xs)
  return o_GBLHV.swapaxes(0, 1).reshape(B, G * L, H, V)[:, :T], s


def group_tokens(q, k, v, g, s0, C: int, operand_dtype=None):
  """The group size `chunk` uses for these inputs (abstract ones will do) and chunk length C: tuning's
  `linear_group_tokens`, or with tuning's `memory_budget` the largest group that fits it (group_budget.group_tokens)."""
  return group_budget.group_tokens(chunk, "linear_group_tokens", (q, k, v, g, s0), C, operand_dtype)


def group_memory(q, k, v, g, s0, C: int, group_tokens, operand_dtype=None):
  """Compiled fwd+bwd bytes of `chunk` for these inputs' shapes in groups of group_tokens (None: one group),
  on the current backend (group_budget.group_memory)."""
  return group_budget.group_memory(chunk, "linear_group_tokens", (q, k, v, g, s0), C, group_tokens, operand_dtype)
