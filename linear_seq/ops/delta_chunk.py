"""The chunkwise (WY/UT) form of the delta rule, the training path, and `parallel` (one chunk).

The sequence is cut into N chunks of C tokens (T is padded with q = k = v = 0, β = 0, log α = 0,
which leaves the state untouched). Inside a chunk entered with state S_n, with
b_t = Σ_{l≤t} g_l (inclusive), r_t = Σ_{l>t} g_l (exclusive), Γ = Σ_l g_l, D_ts = Σ_{s<l≤t} g_l
(g = log α, per K channel for a per-channel gate), the errors δ_t = β_t (v_t − k_t S'_t) solve the
unit lower-triangular system (I + A) δ = diag(β) (V − (K ⊙ e^{b}) S_n):

    A_ts = β_t Σ_k k_tk k_sk e^{D_tsk}  (s < t, else 0)        P = (I + A)⁻¹ diag(β)
    W = P (K ⊙ e^{b}),  U = P V,  δ = U − W S_n
    O = (Q ⊙ e^{b}) S_n + [Σ_k q_tk k_sk e^{D_tsk}]_{s≤t} δ
    S_{n+1} = diag(e^{Γ}) S_n + (K ⊙ e^{r})ᵀ δ

(ungated: every exponent is 0). This is fla's organization of the delta rule (chunk_scaled_dot_kkt,
solve_tril, recompute_w_u, chunk_delta_h, chunk_o), written for XLA. (I + A)⁻¹ is the exact inverse
of a unit lower-triangular matrix by recursive 2×2 block inversion (`unit_lower_inverse`; fla's
solve_tril merges its blocks the same way), never the product (I − A)(I + A²)(I + A⁴)…, which loses
everything in float32 once keys correlate (XLA's CPU triangular_solve would be exact too, but is
~500× slower than a matmul there). Everything but the state passing is batched over all chunks at
once; the state passes by a lax.scan over chunks (`state_pass`) whose step is two C×K by K×V matmuls,
δ_n = U_n − W_n S_n and S_{n+1} = diag(e^Γ) S_n + (K e^r)ᵀ δ_n. The solve has a hand-written
backward pass, its own rule (∂R = Xᵀ∂Y, ∂A = −∂R Yᵀ), instead of autodiff through the block
recursion. Measured in one process (T=8192, B=1, H=4, K=V=64, one thread, fwd+bwd CPU time, min of
5): the previous form 251 ms, this one 202 ms, the ungated linear chunk form 89 ms (on a loaded
machine: 352, 291 and 119 ms). The previous form folded each chunk into a K×K transition
M_n = diag(e^Γ) − (K e^r)ᵀ W (a one-matmul scan step), at two more C×K×(K+V) matmuls per chunk.

Exactness of the exponents is that of chunk.py: each is a sum over exactly its own range, never a
difference of cumulative sums. A scalar gate's D is one C×C matrix per chunk (a 0/1 matmul); a
per-channel gate's D has a K axis, and both Σ_k k_tk k_sk e^{D_tsk} (A) and Σ_k q_tk k_sk e^{D_tsk}
(the Q-K term) come from chunk.py's binary-splitting construction (`_intra_vector`), exact for
strong gates (log α ≈ −20 per step); C is rounded up to a power of two there. Long sequences run in
groups of about `delta_group_tokens` tokens (tuning.py's table: 256 on CPU, one group on GPU/TPU; with
tuning's `memory_budget`, the largest group that fits it, group_budget.py) in a rematerialized outer
lax.scan, as chunk.py does.

Precision (precision.py, docs/DESIGN.md): the inverse and the solve run at HIGHEST whatever the global
setting (with TF32 operands, emulated, the inverse at correlated keys and β up to 2 was off by 2.0e-3
relative vs float64; at HIGHEST 4.6e-7, float32's own error; tests/ops/test_precision.py); with bf16
inputs (`operand_dtype`) K Kᵀ, Q Kᵀ (with a per-channel gate the binary splitting's cross blocks of both,
(k ⊙ e^{prefix}) (k ⊙ e^{suffix})ᵀ and (q ⊙ e^{prefix}) (k ⊙ e^{suffix})ᵀ, as chunk.py) and the output's two
products take bf16 operands with float32 accumulation; A, the solve, the exponents, the state passing and the
state stay float32.
"""
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from linear_seq.ops import chunk as chunk_lib
from linear_seq.ops import group_budget
from linear_seq.ops import precision
from linear_seq.ops import tuning

# Tokens per group of the outer (rematerialized) scan on CPU (tuning.py's `delta_group_tokens`, read at trace
# time), rounded to whole chunks. Measured fwd+bwd at T=8192
# (B=1, H=4, K=V=64, 2 threads, medians of 7, side by side in one run; a shared machine): groups of
# 128 / 256 / 512 tokens 248 / 260 / 276 ms; in another run 512 / 1024 / 2048 / 8192 (no groups) 480 / 584 /
# 677 / 756 ms. Compiled memory 79 / 80 / 84 / 94 / 115 / 193 MiB for 128 ... 8192 (the linear chunk: 79).
# (Saving the solve's inverse, W/U and the chunk states for the backward instead of recomputing them,
# jax.checkpoint policies, measured no faster: 245-252 ms against 245 ms, at 96-121 MiB against 80.)


def unit_lower_inverse(a_XCC, exact: bool = True):
  """(I + A)⁻¹ for strictly lower-triangular A [..., C, C], by recursive 2×2 block inversion.

  [[L₁₁, 0], [L₂₁, L₂₂]]⁻¹ = [[L₁₁⁻¹, 0], [−L₂₂⁻¹ L₂₁ L₁₁⁻¹, L₂₂⁻¹]]: the two diagonal halves are
  inverted together (side by side on the batch axis) down to 1×1 blocks (whose inverse is 1), C padded
  to a power of two with identity: log₂C levels of batched matmuls, O(C³/3) flops per chunk, at HIGHEST
  precision (`precision.matmul(exact=True)`). Exact (no truncated series), and unlike
  lax.linalg.triangular_solve fast on CPU (XLA's CPU triangular solve runs ~500× slower than a matmul
  of the same size on a batch of 64×64 systems, 2 cores).
  exact=False runs the dots at the platform's precision (this op before the precision policy; kept to
  measure the difference under `precision.emulate`).
  """
  *lead, C, _ = a_XCC.shape
  n = 1 << max(C - 1, 0).bit_length()
  if n != C:
    a_XCC = jnp.pad(a_XCC, [(0, 0)] * len(lead) + [(0, n - C), (0, n - C)])
  small = tuning.current().small_block
  return _inverse(a_XCC.reshape(-1, n, n), small, exact).reshape(*lead, n, n)[..., :C, :C]


def _inverse(a_Mnn, small: int, exact: bool):
  """The recursion on a flat batch [M, n, n] (the halves go side by side on axis 0: rank stays 3)."""
  M, n, _ = a_Mnn.shape
  if n == 1:
    return jnp.ones_like(a_Mnn)
  h = n // 2
  x = _inverse(jnp.concatenate([a_Mnn[:, :h, :h], a_Mnn[:, h:, h:]], axis=0), small, exact)
  x11, x22 = x[:M], x[M:]
  off = -_matmul(x22, _matmul(a_Mnn[:, h:, :h], x11, small, exact), small, exact)
  top = jnp.concatenate([x11, jnp.zeros_like(off)], axis=-1)
  return jnp.concatenate([top, jnp.concatenate([off, x22], axis=-1)], axis=-2)


def _matmul(x_Mab, y_Mbc, small: int, exact: bool):
  """x @ y (at HIGHEST if exact); blocks of size <= small as a broadcast product summed (one fused loop)."""
  if x_Mab.shape[-1] <= small:
    return (x_Mab[:, :, :, None] * y_Mbc[:, None, :, :]).sum(axis=2)
  return precision.matmul(x_Mab, y_Mbc, exact=exact)


# The recursion's lowest levels multiply [M, h, h] blocks with h = 1, 2, 4, where XLA's CPU dot is mostly call
# overhead: as fused elementwise products they cost ~0.6x (measured on 512 blocks of 64x64, one core: the
# inverse 13.1 -> 7.8 ms; 8x8 blocks this way measured no faster). Accuracy unchanged: rel. RMS vs a float64
# inverse 1.07e-7 either way, 2.90e-7 -> 2.97e-7 with keys at correlation 0.99 and beta up to 2. The threshold is
# tuning.py's `small_block` (4 on CPU).


@jax.custom_vjp
def unit_lower_solve(a_XCC, r_XCD):
  """(I + A)⁻¹ R for strictly lower-triangular A [..., C, C] and R [..., C, D].

  Forward: the exact inverse (`unit_lower_inverse`) times R. Backward by hand, the triangular
  solve's own rule rather than autodiff through the block recursion (~30% of the op's fwd+bwd
  time on CPU): with X = (I + A)⁻¹ and Y = X R, ∂R = Xᵀ ∂Y and ∂A = −strict_lower(∂R Yᵀ).
  """
  return _solve_fwd(a_XCC, r_XCD)[0]


def _solve_fwd(a_XCC, r_XCD):
  x_XCC = unit_lower_inverse(a_XCC)
  y_XCD = precision.einsum("...cs,...sd->...cd", x_XCC, r_XCD, exact=True)
  return y_XCD, (x_XCC, y_XCD)


def _solve_bwd(res, dy_XCD):
  x_XCC, y_XCD = res
  C = x_XCC.shape[-1]
  dr_XCD = precision.einsum("...sc,...sd->...cd", x_XCC, dy_XCD, exact=True)
  da_XCC = -precision.einsum("...cd,...sd->...cs", dr_XCD, y_XCD, exact=True)
  return jnp.where(np.tril(np.ones((C, C), bool), -1), da_XCC, 0.0), dr_XCD


unit_lower_solve.defvjp(_solve_fwd, _solve_bwd)


def state_pass(s0_BHKV, w_NBHCK, u_NBHCV, k_NBHCK, decay_NBHk):
  """The state passing over chunks n (fla's chunk_delta_h), a lax.scan of two matmuls a step:

      δ_n = U_n − W_n S_n,    S_{n+1} = diag(d_n) S_n + K_nᵀ δ_n     (K_n = K ⊙ e^r, d_n = e^Γ)

  Returns (S_N, [S_n], [δ_n]); decay None means d = 1. Float32 operands whatever the input dtype (the
  carried state is never rounded to bf16); the platform's precision. (A hand-written backward for it, a reverse
  scan with the weight gradients batched after it, measured no faster than autodiff's on CPU.)
  """
  def step(s_BHKV, x):
    w_BHCK, u_BHCV, k_BHCK, d_BHk = x
    delta_BHCV = u_BHCV - precision.einsum("bhck,bhkv->bhcv", w_BHCK, s_BHKV)
    s_next = s_BHKV if d_BHk is None else d_BHk[..., None] * s_BHKV
    return s_next + precision.einsum("bhck,bhcv->bhkv", k_BHCK, delta_BHCV), (s_BHKV, delta_BHCV)

  s_BHKV, (s_in_NBHKV, delta_NBHCV) = lax.scan(step, s0_BHKV, (w_NBHCK, u_NBHCV, k_NBHCK, decay_NBHk))
  return s_BHKV, s_in_NBHKV, delta_NBHCV


def _chunk_group(q_BTHK, k_BTHK, v_BTHV, beta_BTH, g_BTHk, s0_BHKV, C: int, vector: bool, operand_dtype=None):
  """The WY/UT form over one group of tokens (all its chunks at once); returns (o, S_last)."""
  dot = lambda spec, x, y: precision.einsum(spec, x, y, operand_dtype=operand_dtype)
  B, T, H, K = q_BTHK.shape
  V = v_BTHV.shape[-1]
  N = math.ceil(T / C)
  q, k, v = (chunk_lib._to_chunks(x, N, C) for x in (q_BTHK, k_BTHK, v_BTHV))   # [N,B,H,C,·]
  beta = chunk_lib._to_chunks(beta_BTH[..., None], N, C)                       # [N,B,H,C,1]
  strict = np.tril(np.ones((C, C), bool), -1)
  causal = np.tril(np.ones((C, C), bool))

  if g_BTHk is None:
    kk = dot("nbhck,nbhsk->nbhcs", k, k)
    qk = jnp.where(causal, dot("nbhck,nbhsk->nbhcs", q, k), 0.0)
    q_in, k_in, k_out, decay = q, k, k, None
  else:
    g = chunk_lib._to_chunks(g_BTHk, N, C)                 # [N, B, H, C, 1 or K]
    if vector:   # two binary-splitting passes (stacking them into one is ~1.7× slower on CPU)
      qk, prefix, suffix, total = chunk_lib._intra_vector(q, k, g, operand_dtype)
      kk = chunk_lib._intra_vector(k, k, g, operand_dtype)[0]
    else:
      prefix, suffix = chunk_lib._prefix_suffix(g)
      total = prefix[..., -1, :]
      w = jnp.exp(chunk_lib._pair_sums(g)[..., 0])          # [N, B, H, C, C], 0 above the diagonal
      kk = dot("nbhck,nbhsk->nbhcs", k, k) * w
      qk = dot("nbhck,nbhsk->nbhcs", q, k) * w
    e_pre = jnp.exp(prefix)
    q_in, k_in, k_out = q * e_pre, k * e_pre, k * jnp.exp(suffix)
    decay = jnp.exp(total)                                  # e^{Γ}: [N, B, H, 1 or K]
  a = jnp.where(strict, kk, 0.0) * beta                     # A_ts = β_t (k_t·k_s e^{D_ts}), s < t

  # W = (I + A)⁻¹ diag(β) (K ⊙ e^b), U = (I + A)⁻¹ diag(β) V: one unit lower-triangular solve.
  sol = unit_lower_solve(a, beta * jnp.concatenate([k_in, v], axis=-1))
  w_NBHCK, u_NBHCV = sol[..., :K], sol[..., K:]
  s = jnp.zeros((B, H, K, V), q.dtype) if s0_BHKV is None else s0_BHKV
  s, s_in_NBHKV, delta = state_pass(s, w_NBHCK, u_NBHCV, k_out, decay)
  o = dot("nbhck,nbhkv->nbhcv", q_in, s_in_NBHKV) + dot("nbhcs,nbhsv->nbhcv", qk, delta)
  return chunk_lib._from_chunks(o, T), s


def _is_vector(g_BTHk) -> bool:
  return g_BTHk is not None and g_BTHk.shape[-1] > 1


def parallel(q_BTHK, k_BTHK, v_BTHV, beta_BTH, g_BTHk, s0_BHKV, operand_dtype=None):
  """The T×T form: one chunk holding the whole sequence (float32 in, scale in q, g clamped).

  operand_dtype: None, or bf16: the large products' operand dtype (float32 accumulation; module docstring).
  """
  T = q_BTHK.shape[1]
  vector = _is_vector(g_BTHk)
  C = 1 << (T - 1).bit_length() if vector else T
  return _chunk_group(q_BTHK, k_BTHK, v_BTHV, beta_BTH, g_BTHk, s0_BHKV, C, vector, operand_dtype)


def chunk(q_BTHK, k_BTHK, v_BTHV, beta_BTH, g_BTHk, s0_BHKV, chunk_size: int, operand_dtype=None):
  """Chunkwise form (float32 in, scale in q, g clamped finite). g: None, [B,T,H,1] or [B,T,H,K].

  Sequences longer than two groups run group by group (tuning's `delta_group_tokens`, whole chunks;
  None: one group; with tuning's `memory_budget`, the largest group that fits it) in a rematerialized
  lax.scan that carries the state; shorter ones in one pass.
  operand_dtype: None, or bf16: the large products' operand dtype (float32 accumulation).
  """
  B, T, H, K = q_BTHK.shape
  V = v_BTHV.shape[-1]
  vector = _is_vector(g_BTHk)
  C = max(1, min(chunk_size, T))
  if vector:   # binary splitting needs a power of two
    C = 1 << (C - 1).bit_length()
  tokens = group_tokens(q_BTHK, k_BTHK, v_BTHV, beta_BTH, g_BTHk, s0_BHKV, C, operand_dtype)
  G = 1 if tokens is None else math.ceil(T / max(tokens, C))
  if G < 2:
    return _chunk_group(q_BTHK, k_BTHK, v_BTHV, beta_BTH, g_BTHk, s0_BHKV, C, vector, operand_dtype)

  # G groups of L tokens (whole chunks), padded like the chunks: q = k = v = β = 0, log α = 0.
  L = math.ceil(math.ceil(T / G) / C) * C

  def groups(x_BTD):   # [B, T, ...] -> [G, B, L, ...]
    if G * L != T:
      x_BTD = jnp.pad(x_BTD, [(0, 0), (0, G * L - T)] + [(0, 0)] * (x_BTD.ndim - 2))
    return x_BTD.reshape(B, G, L, *x_BTD.shape[2:]).swapaxes(0, 1)

  xs = tuple(groups(x) for x in (q_BTHK, k_BTHK, v_BTHV, beta_BTH))
  xs += (None if g_BTHk is None else groups(g_BTHk),)

  @jax.checkpoint
  def body(s_BHKV, x):
    o_BLHV, s_BHKV = _chunk_group(*x, s_BHKV, C, vector, operand_dtype)
    return s_BHKV, o_BLHV

  s = jnp.zeros((B, H, K, V), q_BTHK.dtype) if s0_BHKV is None else s0_BHKV
  s, o_GBLHV = lax.scan(body, s, xs)
  return o_GBLHV.swapaxes(0, 1).reshape(B, G * L, H, V)[:, :T], s


def group_tokens(q, k, v, beta, g, s0, C: int, operand_dtype=None):
  """The group size `chunk` uses for these inputs (abstract ones will do) and chunk length C: tuning's
  `delta_group_tokens`, or with tuning's `memory_budget` the largest group that fits it (group_budget.group_tokens)."""
  return group_budget.group_tokens(chunk, "delta_group_tokens", (q, k, v, beta, g, s0), C, operand_dtype)


def group_memory(q, k, v, beta, g, s0, C: int, group_tokens, operand_dtype=None):
  """Compiled fwd+bwd bytes of `chunk` for these inputs' shapes in groups of group_tokens (None: one group),
  on the current backend (group_budget.group_memory)."""
  return group_budget.group_memory(chunk, "delta_group_tokens", (q, k, v, beta, g, s0), C, group_tokens, operand_dtype)
