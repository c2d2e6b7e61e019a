"""Softmax attention (the quadratic baseline), layout [B, T, H, K] as jax.nn.dot_product_attention."""
import jax
import jax.numpy as jnp
import numpy as np

from linear_seq.checks import check_shape

_LEGEND = "(q [B,Tq,H,K], k [B,Tk,H,K], v [B,Tk,H,V])"


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


def softmax_attention(q, k, v, *, causal: bool = True, scale: float | None = None,
                      segment_ids=None, mask=None, bias=None):
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
    bias: optional float added to the logits, broadcastable to [B, H, Tq, Tk] (e.g. ALiBi).
  Returns:
    o [B, Tq, H, V] in v's dtype. Logits, softmax and the weighted sum run in float32. A query
    with no allowed key gets o = 0.
  """
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
  if scale is None:
    scale = K ** -0.5
  full = (B, H, Tq, Tk)

  logits = jnp.einsum("bqhk,bshk->bhqs", q, k, preferred_element_type=jnp.float32) * scale
  if bias is not None:
    if not _broadcasts_to(np.shape(bias), full):
      raise ValueError(f"bias has shape {list(np.shape(bias))}, expected broadcastable to "
                       f"[B, H, Tq, Tk] = {list(full)}")
    logits = logits + jnp.asarray(bias, jnp.float32)

  allowed = jnp.ones((1, 1, Tq, Tk), bool)
  if causal:
    q_pos = jnp.arange(Tq) + (Tk - Tq)
    allowed = allowed & (q_pos[:, None] >= jnp.arange(Tk)[None, :])
  if segment_ids is not None:
    allowed = allowed & _segment_mask(segment_ids, B, Tq, Tk)[:, None]
  if mask is not None:
    if not _broadcasts_to(np.shape(mask), full):
      raise ValueError(f"mask has shape {list(np.shape(mask))}, expected broadcastable to "
                       f"[B, H, Tq, Tk] = {list(full)}")
    allowed = allowed & jnp.asarray(mask, bool)

  # -inf before exp (masking after exp would give NaN gradients); rows with no key give 0.
  logits = jnp.where(allowed, logits, -jnp.inf)
  row_max = jax.lax.stop_gradient(jnp.max(logits, axis=-1, keepdims=True))
  row_max = jnp.where(jnp.isfinite(row_max), row_max, 0.0)
  p_BHQS = jnp.exp(logits - row_max)
  denom = jnp.sum(p_BHQS, axis=-1)  # [B, H, Tq]
  o_BQHV = jnp.einsum("bhqs,bshv->bqhv", p_BHQS, v.astype(jnp.float32))
  denom = jnp.where(denom > 0, denom, 1.0)
  return (o_BQHV / jnp.transpose(denom, (0, 2, 1))[..., None]).astype(v.dtype)
