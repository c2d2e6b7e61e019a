"""Per-head output normalization (the "group norm" of RetNet, GLA and TransNormer)."""
import jax
import jax.numpy as jnp
from flax import nnx


class HeadNorm(nnx.Module):
  """RMS-normalizes each head's output vector separately, then a learned per-channel scale.

  x [..., H, V] -> same shape; statistics in float32, result in x's dtype. The scale parameter is named
  `scale` so the optimizer's grouping treats it as a norm (no weight decay).
  """

  def __init__(self, num_heads: int, head_dim: int, *, eps: float = 1e-5):
    self.eps = eps
    self.scale = nnx.Param(jnp.ones((num_heads, head_dim), jnp.float32))

  def __call__(self, x: jax.Array) -> jax.Array:
    x32 = x.astype(jnp.float32)
    inv = jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + self.eps)
    return (x32 * inv * self.scale[...]).astype(x.dtype)
