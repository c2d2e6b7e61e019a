"""Short causal depthwise convolution over time (Based / Zoology / H3 "short conv")."""
import jax
import jax.numpy as jnp
from flax import nnx

from linear_seq.mixers import segments


class ShortConv(nnx.Module):
  """y_t = b + Σ_{l<W} w_l ⊙ x_{t−l}, per channel; inputs from an earlier document count as 0.

  x [B, T, D] -> y [B, T, D]. The decode state is the last W−1 inputs, [B, W−1, D] (oldest first),
  so a prefill followed by one-token steps equals one pass over the whole sequence.
  """

  def __init__(self, d_model: int, width: int, *, dtype=jnp.float32, rngs: nnx.Rngs):
    if width < 2:
      raise ValueError(f"conv width must be >= 2 (0 disables the conv), got {width}")
    self.width, self.d_model, self.dtype = width, d_model, dtype
    # Tap l multiplies x_{t−l}; init like a depthwise conv's fan-in (W).
    self.kernel = nnx.Param(
        jax.random.uniform(rngs.params(), (width, d_model), jnp.float32, -1.0, 1.0) / jnp.sqrt(width))
    self.bias = nnx.Param(jnp.zeros((d_model,), jnp.float32))

  def init_state(self, batch_size: int) -> jax.Array:
    return jnp.zeros((batch_size, self.width - 1, self.d_model), self.dtype)

  def state_size(self) -> int:
    return (self.width - 1) * self.d_model

  def __call__(self, x_BTD, *, state=None, segment_ids=None):
    B, T, _ = x_BTD.shape
    W = self.width
    if state is None:
      state = self.init_state(B)
    xp_BSD = jnp.concatenate([state.astype(x_BTD.dtype), x_BTD], axis=1)  # S = W−1+T
    if segment_ids is not None:
      # The W−1 state inputs belong to the continuing document (index 0).
      doc_BS = jnp.concatenate(
          [jnp.zeros((B, W - 1), jnp.int32), segments.document_index(segment_ids)], axis=1)
    kernel_WD = self.kernel[...].astype(x_BTD.dtype)
    y_BTD = jnp.broadcast_to(self.bias[...].astype(x_BTD.dtype), x_BTD.shape)
    for lag in range(W):
      x_lag = xp_BSD[:, W - 1 - lag: W - 1 - lag + T]
      if segment_ids is not None:
        same = doc_BS[:, W - 1 - lag: W - 1 - lag + T] == doc_BS[:, W - 1:]
        x_lag = jnp.where(same[..., None], x_lag, 0)
      y_BTD = y_BTD + kernel_WD[lag] * x_lag
    new_state = xp_BSD[:, T:]
    if segment_ids is not None:
      # Inputs before the last document's start would leak into later calls: zero them.
      stale = doc_BS[:, T:] != doc_BS[:, -1:]
      new_state = jnp.where(stale[..., None], 0, new_state)
    return y_BTD, new_state
