"""The `reset` keywords added for packed documents: linear_attention and ssm_diag_channels.

A reset at t must give exactly what running the documents separately gives (from a zero state).
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from linear_seq import ops
from tests.helpers import rel_rms

B, T, H, K, t_a = 2, 9, 2, 4, 4
RESET = jnp.zeros((B, T), bool).at[:, t_a].set(True)


@pytest.mark.parametrize("feature_map,normalize,log_decay,mode", [
    ("elu1", True, None, "chunk"),                      # undecayed keys keep weight 1 between resets
    ("favor", True, jnp.log(jnp.array([0.9, 0.5])), "recurrent"),
    ("identity", False, None, "parallel"),
])
def test_linear_attention_reset_equals_separate_documents(feature_map, normalize, log_decay, mode):
  q, k, v = jax.random.normal(jax.random.key(0), (3, B, T, H, K))
  kw = dict(feature_map=feature_map, normalize=normalize, log_decay=log_decay, mode=mode, chunk_size=3)
  if feature_map == "favor":
    kw["projection"] = ops.random_projection(jax.random.key(1), K, 8)
  f = jax.jit(lambda q, k, v, reset=None: ops.linear_attention(q, k, v, reset=reset, **kw)[0])
  o = f(q, k, v, RESET)
  o_a = f(q[:, :t_a], k[:, :t_a], v[:, :t_a])
  o_b = f(q[:, t_a:], k[:, t_a:], v[:, t_a:])
  assert rel_rms(o, jnp.concatenate([o_a, o_b], axis=1)) < 1e-5


@pytest.mark.parametrize("mode", ["scan", "assoc", "chunk"])
def test_ssm_diag_channels_reset_equals_separate_documents(mode):
  Hc, N = 3, 4
  keys = jax.random.split(jax.random.key(2), 4)
  u = jax.random.normal(keys[0], (B, T, Hc))
  lam = jax.lax.complex(-jnp.full((Hc, N), 0.3), jnp.arange(Hc * N, dtype=jnp.float32).reshape(Hc, N))
  Ab, Bb = ops.discretize_diagonal(lam, jnp.ones((Hc, N), jnp.complex64), 0.1)
  C = jax.lax.complex(*jax.random.normal(keys[1], (2, Hc, N)))
  D = jax.random.normal(keys[2], (Hc,))
  x0 = jax.lax.complex(*jax.random.normal(keys[3], (2, B, Hc, N)))
  reset = RESET.at[:, 0].set(jnp.array([True, False]))  # row 0 also drops the initial state
  f = jax.jit(ops.ssm_diag_channels, static_argnames="mode")
  y, x_T = f(u, Ab, Bb, C, D, mode=mode, initial_state=x0, reset=reset)
  y_a, _ = f(u[:, :t_a], Ab, Bb, C, D, mode="fft", initial_state=x0.at[0].set(0))
  y_b, x_b = f(u[:, t_a:], Ab, Bb, C, D, mode="fft")
  assert rel_rms(y, jnp.concatenate([y_a, y_b], axis=1)) < 1e-5
  assert rel_rms(jnp.abs(x_T), jnp.abs(x_b)) < 1e-5


def test_reset_errors():
  q = jnp.ones((B, T, H, K))
  with pytest.raises(ValueError, match="reset has shape"):
    ops.linear_attention(q, q, q, reset=jnp.zeros((B, T + 1), bool))
  u, a = jnp.ones((B, T, 3)), jnp.full((3, 2), 0.5)
  with pytest.raises(ValueError, match="reset needs mode 'scan', 'assoc' or 'chunk'"):
    ops.ssm_diag_channels(u, a, a, a, jnp.ones(3), mode="fft", reset=RESET)
  with pytest.raises(ValueError, match="reset has shape"):
    ops.ssm_diag_channels(u, a, a, a, jnp.ones(3), mode="scan", reset=RESET[:, :3])
