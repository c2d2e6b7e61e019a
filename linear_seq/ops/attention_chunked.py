"""Memory-efficient softmax attention in plain XLA: online softmax over key blocks (flash attention's math).

Queries and keys are cut into blocks of `block_q` and `block_k` positions (T not a multiple is padded; padded
keys are masked, padded queries dropped). One `lax.scan` runs over a static list of (query block, key block)
pairs, so causal attention skips the blocks above the diagonal without a loop of traced bounds (those are not
reverse-differentiable). Per query row the forward keeps the running max m, the running sum l of exp(s − m) and
the unnormalized output; it returns o = acc / l and saves only o and the log-sum-exp m + log l. The custom VJP
recomputes each block's probabilities p = exp(s − lse) from that and accumulates, with D = Σ_v dO ⊙ O,

    dV_j += pᵀ dO_i      dS = p ⊙ (dO_i V_jᵀ − D_i)      dQ_i += scale · dS K_j      dK_j += scale · dSᵀ Q_i

so nothing of size Tq × Tk is ever stored: memory is O((Tq + Tk)·H·K) plus one [B, H, block_q, block_k] tile.
Logits and every sum accumulate in float32; 16-bit inputs enter the matmuls in their dtype (p and dS are cast
to it), float32 inputs stay float32 throughout.

Shapes: q [B, Tq, H, K], k [B, Tk, Hk, K], v [B, Tk, Hk, V] with H a multiple of Hk (grouped-query attention:
query head h reads key/value head h // (H / Hk)); G = H / Hk inside.
"""
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

BLOCK = 256  # default block size (query and key): of 128, 256, 512, 1024 the fastest LM step on a CPU at T=2048


class _Static(NamedTuple):
  """Everything static about one call (the custom VJP's non-differentiable argument)."""
  Tq: int
  Tk: int
  bq: int
  bk: int
  causal: bool
  scale: float


def block_pairs(Tq: int, Tk: int, bq: int, bk: int, causal: bool) -> np.ndarray:
  """int32 [P, 2] (query block, key block) pairs that hold at least one allowed (query, key), by query block.

  Causal: query i sits at key position Tk − Tq + i (end-aligned) and sees keys up to it.
  """
  nq, nk = -(-Tq // bq), -(-Tk // bk)
  offset = Tk - Tq
  pairs = [(i, j) for i in range(nq) for j in range(nk)
           if not causal or j * bk <= min(i * bq + bq - 1, Tq - 1) + offset]
  return np.asarray(pairs, np.int32).reshape(-1, 2)


def _blocks(x, n, b):
  """[B, T, ...] -> [n, B, b, ...], zero-padded to n·b positions."""
  x = jnp.pad(x, [(0, 0), (0, n * b - x.shape[1])] + [(0, 0)] * (x.ndim - 2))
  return jnp.moveaxis(x.reshape(x.shape[0], n, b, *x.shape[2:]), 1, 0)


def _unblock(x, T):
  """[n, B, b, ...] -> [B, T, ...]."""
  x = jnp.moveaxis(x, 0, 1)
  return x.reshape(x.shape[0], -1, *x.shape[3:])[:, :T]


def _allowed(st: _Static, i, j, qseg_NBb, kseg_NBb):
  """bool, broadcastable to [B, Hk, G, bq, bk]: key exists, causal, same segment."""
  q_pos = i * st.bq + jnp.arange(st.bq)
  k_pos = j * st.bk + jnp.arange(st.bk)
  ok_qk = jnp.broadcast_to(k_pos[None, :] < st.Tk, (st.bq, st.bk))
  if st.causal:
    ok_qk &= k_pos[None, :] <= q_pos[:, None] + (st.Tk - st.Tq)
  ok = ok_qk[None, None, None]
  if qseg_NBb is not None:
    ok = ok & (qseg_NBb[i][:, :, None] == kseg_NBb[j][:, None, :])[:, None, None]
  return ok


def _logits(st, q_BbhgK, k_BbhK, ok):
  s = jnp.einsum("bqhgk,bshk->bhgqs", q_BbhgK, k_BbhK, preferred_element_type=jnp.float32) * st.scale
  return jnp.where(ok, s, -jnp.inf)


def _split_heads(q, Hk):
  B, T, H, K = q.shape
  return q.reshape(B, T, Hk, H // Hk, K)


def _forward(st: _Static, q, k, v, q_seg, kv_seg):
  """(o [B,Tq,H,V] in v's dtype, lse [n_q, B, Hk, G, bq] float32; −inf for a row with no allowed key)."""
  B, _, H, _ = q.shape
  Hk, V = k.shape[2], v.shape[-1]
  G = H // Hk
  nq, nk = -(-st.Tq // st.bq), -(-st.Tk // st.bk)
  q_N = _blocks(_split_heads(q, Hk), nq, st.bq)  # [nq, B, bq, Hk, G, K]
  k_N, v_N = _blocks(k, nk, st.bk), _blocks(v, nk, st.bk)
  qseg_N = None if q_seg is None else _blocks(q_seg, nq, st.bq)
  kseg_N = None if kv_seg is None else _blocks(kv_seg, nk, st.bk)

  def step(carry, ij):
    acc_N, m_N, l_N = carry
    i, j = ij[0], ij[1]
    s = _logits(st, q_N[i], k_N[j], _allowed(st, i, j, qseg_N, kseg_N))  # [B, Hk, G, bq, bk]
    m_old, l_old = m_N[i], l_N[i]
    m_new = jnp.maximum(m_old, jnp.max(s, axis=-1))
    m_safe = jnp.where(jnp.isfinite(m_new), m_new, 0.0)  # a row with no allowed key so far stays at 0
    p = jnp.exp(s - m_safe[..., None])
    alpha = jnp.exp(m_old - m_safe)
    pv = jnp.einsum("bhgqs,bshv->bqhgv", p.astype(v.dtype), v_N[j], preferred_element_type=jnp.float32)
    acc = acc_N[i] * jnp.moveaxis(alpha, 3, 1)[..., None] + pv
    carry = (acc_N.at[i].set(acc), m_N.at[i].set(m_new), l_N.at[i].set(alpha * l_old + jnp.sum(p, -1)))
    return carry, None

  init = (jnp.zeros((nq, B, st.bq, Hk, G, V), jnp.float32),
          jnp.full((nq, B, Hk, G, st.bq), -jnp.inf, jnp.float32), jnp.zeros((nq, B, Hk, G, st.bq), jnp.float32))
  pairs = jnp.asarray(block_pairs(st.Tq, st.Tk, st.bq, st.bk, st.causal))
  (acc_N, m_N, l_N), _ = jax.lax.scan(step, init, pairs)
  has_key = l_N > 0
  o_N = acc_N / jnp.moveaxis(jnp.where(has_key, l_N, 1.0), 4, 2)[..., None]
  lse_N = jnp.where(has_key, m_N + jnp.log(jnp.where(has_key, l_N, 1.0)), -jnp.inf)
  o = _unblock(o_N, st.Tq).reshape(B, st.Tq, H, V).astype(v.dtype)
  return o, lse_N


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _attention(st, q, k, v, q_seg, kv_seg):
  return _forward(st, q, k, v, q_seg, kv_seg)[0]


def _attention_fwd(st, q, k, v, q_seg, kv_seg):
  o, lse_N = _forward(st, q, k, v, q_seg, kv_seg)
  return o, (q, k, v, q_seg, kv_seg, o, lse_N)


def _attention_bwd(st, res, do):
  q, k, v, q_seg, kv_seg, o, lse_N = res
  B, _, H, K = q.shape
  Hk, V = k.shape[2], v.shape[-1]
  nq, nk = -(-st.Tq // st.bq), -(-st.Tk // st.bk)
  split = lambda x: _split_heads(x, Hk)
  q_N, do_N = _blocks(split(q), nq, st.bq), _blocks(split(do), nq, st.bq)
  k_N, v_N = _blocks(k, nk, st.bk), _blocks(v, nk, st.bk)
  qseg_N = None if q_seg is None else _blocks(q_seg, nq, st.bq)
  kseg_N = None if kv_seg is None else _blocks(kv_seg, nk, st.bk)
  # D_i = Σ_v dO_iv O_iv (= Σ_j p_ij dP_ij), [nq, B, Hk, G, bq].
  d_N = jnp.moveaxis(jnp.sum(do_N.astype(jnp.float32) * _blocks(split(o), nq, st.bq).astype(jnp.float32), -1), 2, 4)
  lse_safe_N = jnp.where(jnp.isfinite(lse_N), lse_N, 0.0)

  def step(carry, ij):
    dq_N, dk_N, dv_N = carry
    i, j = ij[0], ij[1]
    ok = _allowed(st, i, j, qseg_N, kseg_N)
    s = _logits(st, q_N[i], k_N[j], ok)
    p = jnp.where(ok, jnp.exp(s - lse_safe_N[i][..., None]), 0.0)  # [B, Hk, G, bq, bk]
    dv = jnp.einsum("bhgqs,bqhgv->bshv", p.astype(do.dtype), do_N[i], preferred_element_type=jnp.float32)
    dp = jnp.einsum("bqhgv,bshv->bhgqs", do_N[i], v_N[j], preferred_element_type=jnp.float32)
    ds = (p * (dp - d_N[i][..., None]) * st.scale).astype(q.dtype)
    dq = jnp.einsum("bhgqs,bshk->bqhgk", ds, k_N[j], preferred_element_type=jnp.float32)
    dk = jnp.einsum("bhgqs,bqhgk->bshk", ds, q_N[i], preferred_element_type=jnp.float32)
    return (dq_N.at[i].add(dq), dk_N.at[j].add(dk), dv_N.at[j].add(dv)), None

  init = (jnp.zeros((nq, B, st.bq, Hk, H // Hk, K), jnp.float32), jnp.zeros((nk, B, st.bk, Hk, K), jnp.float32),
          jnp.zeros((nk, B, st.bk, Hk, V), jnp.float32))
  pairs = jnp.asarray(block_pairs(st.Tq, st.Tk, st.bq, st.bk, st.causal))
  (dq_N, dk_N, dv_N), _ = jax.lax.scan(step, init, pairs)
  dq = _unblock(dq_N, st.Tq).reshape(q.shape).astype(q.dtype)
  return dq, _unblock(dk_N, st.Tk).astype(k.dtype), _unblock(dv_N, st.Tk).astype(v.dtype), None, None


_attention.defvjp(_attention_fwd, _attention_bwd)


def chunked_attention(q, k, v, *, causal: bool = True, scale: float | None = None, q_segment_ids=None,
                      kv_segment_ids=None, block_q: int = BLOCK, block_k: int = BLOCK):
  """o_i = Σ_j softmax_j(scale · q_i·k_j over allowed j) v_j, in blocks (see the module docstring).

  Args:
    q: [B, Tq, H, K]; k: [B, Tk, Hk, K]; v: [B, Tk, Hk, V]; H a multiple of Hk.
    causal: query i sits at key position Tk − Tq + i and sees keys up to it (needs Tq ≤ Tk).
    scale: logit scale, default K**-0.5.
    q_segment_ids, kv_segment_ids: int [B, Tq] and [B, Tk], both or neither: a query sees only keys of
      its own segment id.
    block_q, block_k: block sizes (capped at Tq and Tk).
  Returns:
    o [B, Tq, H, V] in v's dtype; a query with no allowed key gets 0. Differentiable in q, k, v.
  """
  B, Tq, H, K = q.shape
  Tk, Hk = k.shape[1], k.shape[2]
  if H % Hk or k.shape[0] != B or v.shape[:3] != k.shape[:3] or k.shape[3] != K:
    raise ValueError(f"chunked_attention needs q [B,Tq,H,K], k [B,Tk,Hk,K], v [B,Tk,Hk,V] with H a multiple "
                     f"of Hk; got {list(q.shape)}, {list(k.shape)}, {list(v.shape)}")
  if causal and Tq > Tk:
    raise ValueError(f"causal attention needs Tq <= Tk; got Tq={Tq}, Tk={Tk}")
  if (q_segment_ids is None) != (kv_segment_ids is None):
    raise ValueError("pass both q_segment_ids and kv_segment_ids, or neither")
  st = _Static(Tq, Tk, min(block_q, Tq), min(block_k, Tk), bool(causal),
               float(K ** -0.5 if scale is None else scale))
  if q_segment_ids is not None:
    q_segment_ids, kv_segment_ids = jnp.asarray(q_segment_ids, jnp.int32), jnp.asarray(kv_segment_ids, jnp.int32)
  return _attention(st, q, k, v, q_segment_ids, kv_segment_ids)
