"""Mamba-2's data-dependent decay: Δ = softplus(a + dt_bias), log α = −exp(A_log)·Δ, and its init.

Used by mamba2 (Δ also scales the input: B̄ = ΔB) and by deltanet's scalar / per-channel gates (Gated
DeltaNet, KDA). Init as Mamba-2: A ~ U[1, 16] (A_log = log A), Δ log-uniform in [dt_min, dt_max] (floored
at 1e-4) with dt_bias = softplus⁻¹(Δ), so that Δ starts in that range for a ≈ 0. Both parameters are
named so the optimizer gives them no weight decay ('A_log', '*_bias').
"""
import jax
import jax.numpy as jnp

A_RANGE = (1.0, 16.0)
DT_FLOOR = 1e-4
A_INITS = ("uniform", "arange")


def init_A_log(key, shape, kind: str = "uniform") -> jax.Array:
  """log A, float32: A ~ U[1, 16] ('uniform') or A = 1, 2, ..., H over the first axis ('arange', HF Mamba-2's
  init; broadcast over the other axes). 'arange' ignores the key."""
  if kind == "arange":
    return jnp.broadcast_to(jnp.log(jnp.arange(1, shape[0] + 1, dtype=jnp.float32)).reshape(
        (-1,) + (1,) * (len(shape) - 1)), shape)
  if kind != "uniform":
    raise ValueError(f"unknown A init {kind!r}; valid: {', '.join(A_INITS)}")
  return jnp.log(jax.random.uniform(key, shape, jnp.float32, *A_RANGE))


def init_dt_bias(key, shape, dt_min: float = 1e-3, dt_max: float = 1e-1) -> jax.Array:
  """softplus⁻¹(Δ) for Δ log-uniform in [dt_min, dt_max] (floored at 1e-4), float32."""
  if not 0 < dt_min <= dt_max:
    raise ValueError(f"need 0 < dt_min <= dt_max, got dt_min={dt_min}, dt_max={dt_max}")
  u = jax.random.uniform(key, shape, jnp.float32)
  dt = jnp.maximum(jnp.exp(u * (jnp.log(dt_max) - jnp.log(dt_min)) + jnp.log(dt_min)), DT_FLOOR)
  return dt + jnp.log(-jnp.expm1(-dt))  # softplus⁻¹(dt) = log(e^dt − 1)


def step_size(a: jax.Array, dt_bias: jax.Array, limit: tuple[float, float] = (0.0, 0.0)) -> jax.Array:
  """Δ = softplus(a + dt_bias) in float32 (a: the projection of x; dt_bias broadcasts over its last axes),
  clamped to [limit[0], limit[1]] when limit[1] > 0 (HF Mamba-2's time_step_limit; (0, 0): no clamp)."""
  dt = jax.nn.softplus(a.astype(jnp.float32) + dt_bias)
  lo, hi = limit
  return jnp.clip(dt, lo, hi) if hi > 0 else dt


def log_decay(dt: jax.Array, A_log: jax.Array) -> jax.Array:
  """log α = Δ·A with A = −exp(A_log) (≤ 0); A_log broadcasts over dt's trailing axes."""
  return -jnp.exp(A_log) * dt
