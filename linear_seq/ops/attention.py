"""Softmax attention (the quadratic baseline), layout [B, T, H, K] as jax.nn.dot_product_attention.

The op calls `jax.nn.dot_product_attention` (XLA by default; cuDNN flash attention on GPUs with
implementation='cudnn') whenever it can express the call: K = V. Causal self-attention (Tq = Tk) uses its
`is_causal`; queries aligned to the end of a longer key sequence (Tq < Tk, a KV cache), packed segments and
user masks go in through its boolean `mask`. `implementation='explicit'` is the float32 masked-softmax form
written out, the reference the tests hold the kernel path to (and the path taken when K ≠ V).
`implementation='chunked'` is the memory-efficient blocked form of `attention_chunked.py` (online softmax,
causal block skipping, segment ids; O(T) memory in training too), for long T and packed documents.
See docs/DESIGN.md for the notation.
"""
import jax
import jax.numpy as jnp
import numpy as np

from linear_seq.checks import check_shape
from linear_seq.ops.attention_chunked import chunked_attention

_LEGEND = "(q [B,Tq,H,K], k [B,Tk,H,K], v [B,Tk,H,V])"
IMPLEMENTATIONS = (None, "cudnn", "explicit", "chunked")


def _broadcasts_to(shape, full) -> bool:
  try:
    return np.broadcast_shapes(shape, full) == full
  except ValueError:
    return False


def _segment_mask(segment_ids, B, Tq, Tk):
  """[B, Tq, Tk] bool: query and key share a segment id."""
  if isinstance(segment_ids, (tuple, list)):
    if len(segment_ids) != 2:
      raise ValueError("segment_ids must be one [B,Tk] array or a pair "
                       f"(q_segment_ids [B,Tq], kv_segment_ids [B,Tk]); got {len(segment_ids)} items")
    q_seg, kv_seg = segment_ids
    check_shape("q_segment_ids", q_seg, (B, Tq), "[B,Tq]")
    check_shape("kv_segment_ids", kv_seg, (B, Tk), "[B,Tk]")
    q_seg = jnp.asarray(q_seg)
  else:
    check_shape("segment_ids", segment_ids, (B, Tk), "[B,Tk] (or a pair [B,Tq], [B,Tk])")
    kv_seg = segment_ids
    q_seg = jnp.asarray(segment_ids)[:, Tk - Tq:]  # queries are the last Tq positions
  kv_seg = jnp.asarray(kv_seg)
  return q_seg[:, :, None] == kv_seg[:, None, :]


def _explicit(q, k, v, allowed, bias, scale):
  """The written-out form in float32: masked logits, a stabilized softmax, the weighted sum of v.

  allowed: bool broadcastable to [B, H, Tq, Tk] (or None: every key); bias: float32 or None.
  """
  logits = jnp.einsum("bqhk,bshk->bhqs", q, k, preferred_element_type=jnp.float32) * scale
  if bias is not None:
    logits = logits + bias
  if allowed is not None:
    # -inf before exp (masking after exp would give NaN gradients); rows with no key give 0.
    logits = jnp.where(allowed, logits, -jnp.inf)
  row_max = jax.lax.stop_gradient(jnp.max(logits, axis=-1, keepdims=True))
  row_max = jnp.where(jnp.isfinite(row_max), row_max, 0.0)
  p_BHQS = jnp.exp(logits - row_max)
  denom = jnp.sum(p_BHQS, axis=-1)  # [B, H, Tq]
  o_BQHV = jnp.einsum("bhqs,bshv->bqhv", p_BHQS, v.astype(jnp.float32))
  denom = jnp.where(denom > 0, denom, 1.0)
  return o_BQHV / jnp.transpose(denom, (0, 2, 1))[..., None]


def _to_4d(x):
  return None if x is None else jnp.reshape(x, (1,) * (4 - x.ndim) + x.shape)


def _kernel(q, k, v, allowed, bias, scale, is_causal, may_be_empty, implementation):
  """jax.nn.dot_product_attention with the same semantics as `_explicit` (a row with no key gives 0)."""
  dtype = jnp.float32 if implementation is None else jnp.result_type(q, k, v)
  o = jax.nn.dot_product_attention(q.astype(dtype), k.astype(dtype), v.astype(dtype), bias=_to_4d(bias),
                                   mask=_to_4d(allowed), scale=scale, is_causal=is_causal,
                                   implementation=implementation)
  if may_be_empty:  # the kernel spreads a fully masked row uniformly over v; the op's contract is 0
    has_key_BHQ = jnp.broadcast_to(jnp.any(allowed, axis=-1), (q.shape[0], q.shape[2], q.shape[1]))
    o = jnp.where(jnp.transpose(has_key_BHQ, (0, 2, 1))[..., None], o, 0.0)
  return o


def softmax_attention(q, k, v, *, causal: bool = True, scale: float | None = None,
                      segment_ids=None, mask=None, bias=None, implementation: str | None = None):
  """o_i = Σ_j softmax_j(scale · q_i·k_j + bias_ij over allowed j) v_j.

  Args:
    q: [B, Tq, H, K]; k: [B, Tk, H, K]; v: [B, Tk, H, V].
    causal: query i sits at key position Tk − Tq + i (queries aligned to the end, as when
      decoding against a cache) and sees keys up to and including that position; needs Tq ≤ Tk.
    scale: logit scale, default K**-0.5.
    segment_ids: packed documents — tokens attend only within their own segment. Either one int
      array [B, Tk] (queries take its last Tq entries) or a pair (q_segment_ids [B, Tq],
      kv_segment_ids [B, Tk]).
    mask: optional bool, broadcastable to [B, H, Tq, Tk]; True = may attend.
    bias: optional float added to the logits, broadcastable to [B, H, Tq, Tk] (e.g. ALiBi); finite
      (exclude keys with `mask`, not with a −inf bias).
    implementation: None (default) — `jax.nn.dot_product_attention` with its default backend, in float32,
      when K = V, else the explicit form; 'cudnn' — its cuDNN flash attention (GPU, K = V, q/k/v in
      float16 or bfloat16, computed in that dtype with float32 accumulation); 'explicit' — the float32
      masked softmax written out (the reference); 'chunked' — `ops.chunked_attention`: online softmax over
      key blocks with a flash-style VJP, nothing of size Tq × Tk stored (causal and segment_ids only: no
      mask or bias, which are Tq × Tk inputs themselves).
  Returns:
    o [B, Tq, H, V] in v's dtype. With implementation None or 'explicit', logits, softmax and the
    weighted sum run in float32 whatever the input dtype; 'chunked' accumulates in float32 from inputs in
    their own dtype. A query with no allowed key gets o = 0.
  """
  if implementation not in IMPLEMENTATIONS:
    raise ValueError(f"unknown implementation {implementation!r}; valid: None, cudnn, explicit, chunked")
  q, k, v = jnp.asarray(q), jnp.asarray(k), jnp.asarray(v)
  if q.ndim != 4:
    raise ValueError(f"q has shape {list(q.shape)}, expected [B, Tq, H, K] {_LEGEND}")
  B, Tq, H, K = q.shape
  check_shape("k", k, (B, None, H, K), _LEGEND)
  Tk = k.shape[1]
  check_shape("v", v, (B, Tk, H, None), _LEGEND)
  if causal and Tq > Tk:
    raise ValueError(f"causal attention needs Tq <= Tk (queries align to the last keys); "
                     f"got Tq={Tq}, Tk={Tk}")
  if implementation == "cudnn" and v.shape[-1] != K:
    raise ValueError(f"implementation='cudnn' needs K = V (dot_product_attention); got K={K}, V={v.shape[-1]}")
  if scale is None:
    scale = K ** -0.5
  full = (B, H, Tq, Tk)
  if bias is not None:
    if not _broadcasts_to(np.shape(bias), full):
      raise ValueError(f"bias has shape {list(np.shape(bias))}, expected broadcastable to "
                       f"[B, H, Tq, Tk] = {list(full)}")
    bias = jnp.asarray(bias, jnp.float32)
  if mask is not None and not _broadcasts_to(np.shape(mask), full):
    raise ValueError(f"mask has shape {list(np.shape(mask))}, expected broadcastable to "
                     f"[B, H, Tq, Tk] = {list(full)}")
  if implementation == "chunked":
    if mask is not None or bias is not None:
      raise ValueError("implementation='chunked' takes causal and segment_ids, not a mask or bias "
                       "(Tq x Tk inputs); use implementation None or 'explicit' for those")
    segs = (None, None)
    if segment_ids is not None:
      _segment_mask(segment_ids, B, Tq, Tk)  # checks the shapes
      segs = (tuple(segment_ids) if isinstance(segment_ids, (tuple, list))
              else (jnp.asarray(segment_ids)[:, Tk - Tq:], segment_ids))
    return chunked_attention(q, k, v, causal=causal, scale=scale, q_segment_ids=segs[0],
                             kv_segment_ids=segs[1]).astype(v.dtype)

  use_kernel = implementation == "cudnn" or (implementation is None and v.shape[-1] == K)
  # Top-left causal (the kernel's is_causal) equals ours only when Tq = Tk; otherwise causality is a mask.
  is_causal = bool(causal and use_kernel and Tq == Tk)
  allowed = None
  if causal and not is_causal:
    allowed = (jnp.arange(Tq) + (Tk - Tq))[:, None] >= jnp.arange(Tk)[None, :]
  if segment_ids is not None:
    seg = _segment_mask(segment_ids, B, Tq, Tk)[:, None]
    allowed = seg if allowed is None else allowed & seg
  if mask is not None:
    m = jnp.asarray(mask, bool)
    allowed = m if allowed is None else allowed & m
  if use_kernel:
    # Causal or single-array segments always leave a query its own position; a mask or a segment pair may not.
    may_be_empty = mask is not None or isinstance(segment_ids, (tuple, list))
    o = _kernel(q, k, v, allowed, bias, scale, is_causal, may_be_empty, implementation)
  else:
    o = _explicit(q, k, v, allowed, bias, scale)
  return o.astype(v.dtype)
