"""The delta rule (DeltaNet; Gated DeltaNet with a scalar gate; KDA with a per-channel gate).

Per head, row vectors, state S ∈ R^{K×V} (the orientation of `linear_recurrence`):

    S' = diag(α_t) S_{t-1}                     α_t = exp(log_decay_t); None means α = 1
    S_t = S' + β_t k_tᵀ (v_t − k_t S')         = (I − β_t k_tᵀ k_t) S' + β_t k_tᵀ v_t
    o_t = scale · q_t S_t

α_t multiplies the state before both the prediction k_t S' and the write (the initial state too,
by α_0); log α = −inf clears the state before token t and keeps token t's own write. β multiplies
the error (no sigmoid here; β ∈ [0, 2], above 1 the transition has a negative eigenvalue). The
state carries no scale. Legend: B batch, T time, H heads, K key dim, V value dim.

This module holds the dispatcher, input validation and the `recurrent` (lax.scan) and `assoc`
(lax.associative_scan) forms; the chunkwise WY/UT form (and `parallel`, its one-chunk case)
lives in delta_chunk.py.
"""
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from linear_seq import checks
from linear_seq.ops import delta_chunk
from linear_seq.ops import delta_seq
from linear_seq.ops import implementation as implementation_lib
from linear_seq.ops import recurrence as recurrence_lib
from linear_seq.ops import seq_parallel

MODES = recurrence_lib.MODES


def _validate(q, k, v, beta, log_decay, initial_state, mode, chunk_size, seq_axis):
  B, T, H, K, V = recurrence_lib._validate(q, k, v, initial_state, mode, chunk_size)  # mode, sizes, shapes
  checks.check_shape("beta", beta, (B, T, H), "[B, T, H]")
  checks.if_concrete(beta, lambda b: np.all((b >= 0) & (b <= 2)), _beta_message)   # NaN fails too
  if log_decay is not None:
    checks.if_concrete(log_decay, lambda a: np.all(a <= 0), recurrence_lib._log_decay_message)
  return B, T, H, K, V


def _beta_message(b: np.ndarray) -> str:
  if np.any(np.isnan(b)):
    return "beta contains NaN; expected values in [0, 2]"
  return (f"beta must be in [0, 2] (the op applies no sigmoid); "
          f"got min {float(b.min())}, max {float(b.max())}")


def delta_rule(q, k, v, beta, log_decay=None, *, scale: Optional[float] = None,
               initial_state=None, mode: str = "chunk", chunk_size: int = 64, seq_axis=None,
               implementation: Optional[str] = None):
  """Runs the (gated) delta rule S_t = (I − β_t k_tᵀk_t) diag(α_t) S_{t-1} + β_t k_tᵀ v_t.

  Args:
    q, k: [B, T, H, K] (not normalized here; mixers L2-normalize them).  v: [B, T, H, V].
    beta: [B, T, H], the write strength in [0, 2] (checked when concrete).
    log_decay: log α_t ≤ 0: None (α = 1, DeltaNet), [H] fixed per head, [B, T, H] scalar gate
      (Gated DeltaNet), or [B, T, H, K] per-channel gate (KDA). −inf is an exact reset.
    scale: multiplies q only; None means K**-0.5.
    initial_state: [B, H, K, V] state before t = 0 (zeros if None); differentiable.
    mode: 'recurrent' (lax.scan; decode), 'chunk' (WY/UT chunkwise; training), 'parallel'
      (one chunk of length T), 'assoc' (lax.associative_scan over (M_t, U_t) pairs with
      M_t ∈ R^{K×K}: O(T·K²) memory). All agree to float32 rounding.
    chunk_size: chunk length C for mode='chunk' (rounded up to a power of two for a per-channel
      gate); any T works (padded internally).
    seq_axis: None, or the name of a `jax.shard_map` mesh axis that splits T (shard r holds the r-th
      contiguous block; all inputs are the shard's block): each shard gets exactly the unsharded op's
      outputs for its block, the returned state is the one after the last shard (replicated) and
      initial_state is the state before shard 0 (see delta_seq.py).
    implementation: None / 'auto' (the backend's, ops/implementation.py) or 'xla' (the forms here).

  Precision: computed in float32 (float64 with float64 inputs); with bf16 q, k, v the chunk and parallel
  forms' large products take bf16 operands with float32 accumulation (ops/precision.py), and the
  triangular solve runs at HIGHEST precision whatever the global setting.

  Returns:
    o [B, T, H, V] in the dtype of q, k, v, and the final state S [B, H, K, V] float32 (float64
    under jax_enable_x64 with float64 inputs).
  """
  B, T, H, K, V = _validate(q, k, v, beta, log_decay, initial_state, mode, chunk_size, seq_axis)
  implementation_lib.resolve(implementation)  # 'xla' on every backend today (ops/implementation.py)
  out_dtype = jnp.result_type(q, k, v)
  acc = jnp.promote_types(out_dtype, jnp.float32)
  # Narrower inputs (bf16): the chunk forms' large products take them as operands, accumulating in float32.
  operand = out_dtype if jnp.finfo(out_dtype).bits < 32 else None
  g = recurrence_lib._gate(log_decay, B, T, H, K, acc)   # None, [B,T,H,1] or [B,T,H,K]; clamped
  if scale is None:
    scale = K ** -0.5
  cast = lambda x: jnp.asarray(x).astype(acc)
  q, k, v, beta = cast(q) * scale, cast(k), cast(v), cast(beta)
  s0 = None if initial_state is None else cast(initial_state)

  def form(q, k, v, beta, g, s0):
    s0 = seq_parallel.initial_carry(s0, k, v)   # per-shard zeros inside shard_map (scan carries)
    if mode == "recurrent":
      return recurrent(q, k, v, beta, g, s0)
    if mode == "assoc":
      return assoc(q, k, v, beta, g, s0)
    if mode == "parallel":
      return delta_chunk.parallel(q, k, v, beta, g, s0, operand)
    return delta_chunk.chunk(q, k, v, beta, g, s0, chunk_size, operand)

  if seq_axis is None:
    o, s = form(q, k, v, beta, g, s0)
  else:
    o, s = delta_seq.run(form, q, k, v, beta, g, s0, seq_axis)
  return o.astype(out_dtype), s


def recurrent(q_BTHK, k_BTHK, v_BTHV, beta_BTH, g_BTHk, s0_BHKV):
  """lax.scan over time (float32 in, scale already in q, g clamped finite)."""
  B, T, H, K = q_BTHK.shape
  V = v_BTHV.shape[-1]
  s = jnp.zeros((B, H, K, V), q_BTHK.dtype) if s0_BHKV is None else s0_BHKV
  tm = lambda x: jnp.moveaxis(x, 1, 0)
  a = None if g_BTHk is None else tm(jnp.exp(g_BTHk))
  xs = (tm(q_BTHK), tm(k_BTHK), tm(v_BTHV), tm(beta_BTH), a)

  def step(s_BHKV, x):
    q_BHK, k_BHK, v_BHV, beta_BH, a_BHk = x
    if a_BHk is not None:
      s_BHKV = a_BHk[..., None] * s_BHKV
    err_BHV = v_BHV - jnp.einsum("bhk,bhkv->bhv", k_BHK, s_BHKV)
    s_BHKV = s_BHKV + k_BHK[..., :, None] * (beta_BH[..., None] * err_BHV)[..., None, :]
    o_BHV = jnp.einsum("bhk,bhkv->bhv", q_BHK, s_BHKV)
    return s_BHKV, o_BHV

  s, o_TBHV = jax.lax.scan(step, s, xs)
  return jnp.moveaxis(o_TBHV, 0, 1), s


def assoc(q_BTHK, k_BTHK, v_BTHV, beta_BTH, g_BTHk, s0_BHKV):
  """lax.associative_scan over (M_t, U_t), M_t = (I − β_t k_tᵀk_t) diag(α_t), U_t = β_t k_tᵀ v_t.

  Composed as (M₁, U₁)∘(M₂, U₂) = (M₂M₁, M₂U₁ + U₂); the initial state enters through the first
  pair (U_0 ← M_0 S_{-1} + U_0). Materializes a K×K matrix and a K×V state per token:
  O(T·K·(K + V)) memory, O(log T) depth and O(T·K²·(K + V)) flops — a reference form, not fast.
  """
  B, T, H, K = q_BTHK.shape
  bk_BTHK = beta_BTH[..., None] * k_BTHK
  m_BTHKK = jnp.eye(K, dtype=q_BTHK.dtype) - bk_BTHK[..., :, None] * k_BTHK[..., None, :]
  if g_BTHk is not None:
    m_BTHKK = m_BTHKK * jnp.exp(g_BTHk)[..., None, :]   # right factor diag(α): scales columns
  u_BTHKV = bk_BTHK[..., :, None] * v_BTHV[..., None, :]
  if s0_BHKV is not None:
    u_BTHKV = u_BTHKV.at[:, 0].add(jnp.einsum("bhij,bhjv->bhiv", m_BTHKK[:, 0], s0_BHKV))

  def combine(x, y):
    m1, u1 = x
    m2, u2 = y
    return (jnp.einsum("...ij,...jl->...il", m2, m1),
            jnp.einsum("...ij,...jv->...iv", m2, u1) + u2)

  _, s_BTHKV = jax.lax.associative_scan(combine, (m_BTHKK, u_BTHKV), axis=1)
  o_BTHV = jnp.einsum("bthk,bthkv->bthv", q_BTHK, s_BTHKV)
  return o_BTHV, s_BTHKV[:, -1]
