"""Multi-head projections shared by the linear mixers."""
import jax


def project_heads(x_BTD: jax.Array, projections, num_heads: int) -> tuple[jax.Array, ...]:
  """Apply each projection to x [B,T,D] and split its output into heads: one [B,T,H,K] per projection."""
  B, T, _ = x_BTD.shape
  return tuple(p(x_BTD).reshape(B, T, num_heads, -1) for p in projections)
