"""A plug-in mixer, registered from outside the package: a gated exponential moving average per head.

  python -m linear_seq.main --config=configs/default.py:tiny=True --workdir=runs/ema \
      --config.imports=my_mixer --config.model.mixer=ema      (with examples/ on PYTHONPATH)

y_t = W_o (σ(W_g x_t) ⊙ S_t), S_t = a_h S_{t−1} + (1 − a_h) W_v x_t per head h, a_h = sigmoid(learned) —
one call to ops.linear_recurrence with K = 1 (q = 1, k = 1 − a). A mixer needs `from_config(cfg, rngs=)`,
`__call__(x, *, state=None, segment_ids=None) -> (y, state)`, `init_state(batch, max_len)` and
`state_size(seq_len)`; resetting the state where segment_ids changes keeps packed documents apart.
`linear_seq.mixers.check_mixer(EMAMixer)` checks it against the contract of the built-in mixers; run this file
(`PYTHONPATH=. python examples/my_mixer.py`) to print that report.
"""
import jax
import jax.numpy as jnp
from flax import nnx

import linear_seq.mixers
from linear_seq import ops
from linear_seq.mixers import segments


@linear_seq.mixers.register("ema")
class EMAMixer(nnx.Module):
  """Gated per-head exponential moving average of value projections."""

  def __init__(self, d_model: int, num_heads: int, *, rngs: nnx.Rngs):
    self.num_heads, self.head_dim = num_heads, d_model // num_heads
    self.value = nnx.Linear(d_model, d_model, rngs=rngs)
    self.gate = nnx.Linear(d_model, d_model, rngs=rngs)
    self.out = nnx.Linear(d_model, d_model, rngs=rngs)
    self.decay_logit = nnx.Param(jnp.linspace(1.0, 4.0, num_heads))  # a = 0.73 .. 0.98 at init

  @classmethod
  def from_config(cls, cfg, *, rngs: nnx.Rngs) -> "EMAMixer":
    return cls(cfg.d_model, cfg.num_heads, rngs=rngs)

  def init_state(self, batch_size: int, max_len: int = 0) -> jax.Array:
    del max_len
    return jnp.zeros((batch_size, self.num_heads, 1, self.head_dim), jnp.float32)

  def state_size(self, seq_len: int = 0) -> int:
    del seq_len
    return self.num_heads * self.head_dim

  def __call__(self, x_BTD, *, state=None, segment_ids=None):
    B, T, D = x_BTD.shape
    H, Dh = self.num_heads, self.head_dim
    v_BTHV = self.value(x_BTD).reshape(B, T, H, Dh)
    log_a_H = jax.nn.log_sigmoid(self.decay_logit[...].astype(jnp.float32))
    log_decay_BTH = jnp.broadcast_to(log_a_H, (B, T, H))
    reset_BT = segments.reset_log_decay(segment_ids)  # −inf where a new document starts
    if reset_BT is not None:
      log_decay_BTH = log_decay_BTH + reset_BT[..., None]
    q_BTHK = jnp.ones((B, T, H, 1), v_BTHV.dtype)
    k_BTHK = jnp.broadcast_to(-jnp.expm1(log_a_H)[:, None], (B, T, H, 1)).astype(v_BTHV.dtype)
    o_BTHV, state = ops.linear_recurrence(q_BTHK, k_BTHK, v_BTHV, log_decay_BTH, scale=1.0,
                                          initial_state=state, mode="chunk", chunk_size=16)
    y_BTD = o_BTHV.reshape(B, T, D).astype(x_BTD.dtype) * jax.nn.sigmoid(self.gate(x_BTD))
    return self.out(y_BTD), state


if __name__ == "__main__":
  print(linear_seq.mixers.check_mixer(EMAMixer))
