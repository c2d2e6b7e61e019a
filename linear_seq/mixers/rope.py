"""Rotary position embedding (RoPE, Su et al. 2021), rotate-half convention."""
import jax
import jax.numpy as jnp


def rope(x_BTHK: jax.Array, positions_BT: jax.Array, *, base: float = 10_000.0) -> jax.Array:
  """Rotates pairs (x_i, x_{i+K/2}) by angle pos · base^(−2i/K). x [B,T,H,K] (K even), positions [B,T]."""
  K = x_BTHK.shape[-1]
  if K % 2:
    raise ValueError(f"RoPE needs an even head dim, got {K}")
  freq_F = base ** (-jnp.arange(0, K // 2, dtype=jnp.float32) * 2.0 / K)
  angle_BTF = positions_BT.astype(jnp.float32)[..., None] * freq_F
  cos_BT1F = jnp.cos(angle_BTF)[:, :, None, :]
  sin_BT1F = jnp.sin(angle_BTF)[:, :, None, :]
  x1, x2 = jnp.split(x_BTHK.astype(jnp.float32), 2, axis=-1)
  out = jnp.concatenate([x1 * cos_BT1F - x2 * sin_BT1F, x2 * cos_BT1F + x1 * sin_BT1F], axis=-1)
  return out.astype(x_BTHK.dtype)
