"""Document boundaries in packed rows, from per-token segment ids.

`segment_ids` int [B, T] holds a document id per token (0 = padding). A change of id between t−1 and t
starts a new document at t. Boundaries are detected within one call: the first token of a call always
continues the state passed in (a call without segment_ids continues the state's last document).
"""
import jax
import jax.numpy as jnp


def boundaries(segment_ids_BT: jax.Array) -> jax.Array:
  """bool [B, T]: True at t > 0 where segment_ids[t] != segment_ids[t−1]."""
  seg = jnp.asarray(segment_ids_BT)
  change = seg[:, 1:] != seg[:, :-1]
  return jnp.concatenate([jnp.zeros_like(change[:, :1]), change], axis=1)


def document_index(segment_ids_BT: jax.Array) -> jax.Array:
  """int32 [B, T]: 0 for the document that continues into the call, +1 at every boundary."""
  return jnp.cumsum(boundaries(segment_ids_BT).astype(jnp.int32), axis=1)


def reset_log_decay(segment_ids_BT: jax.Array | None, dtype=jnp.float32) -> jax.Array | None:
  """[B, T] log α of a reset: −inf at boundaries, 0 elsewhere (None without segment ids)."""
  if segment_ids_BT is None:
    return None
  return jnp.where(boundaries(segment_ids_BT), -jnp.inf, 0.0).astype(dtype)


def positions(segment_ids_BT: jax.Array | None, offset_B: jax.Array, length: int) -> jax.Array:
  """int32 [B, T] position of each token within its document.

  Tokens of the document continuing from the state count on from `offset_B` (the state's position);
  a document starting inside the call counts from 0.
  """
  offset_B = jnp.asarray(offset_B, jnp.int32)
  t_T = jnp.arange(length, dtype=jnp.int32)
  cont_BT = offset_B[:, None] + t_T[None, :]
  if segment_ids_BT is None:
    return cont_BT
  starts_BT = boundaries(segment_ids_BT)
  start_BT = jax.lax.cummax(jnp.where(starts_BT, t_T[None, :], 0), axis=1)
  inside_BT = document_index(segment_ids_BT) > 0
  return jnp.where(inside_BT, t_T[None, :] - start_BT, cont_BT)
