"""Short causal convs on q, k and v after their projections (fla's and Zoology's attention-like layers).

With `model.conv_on = 'qkv'` the softmax, linear, retention and gla mixers project x to q, k, v and run a
depthwise causal conv of width `model.conv_width` over each (one `ShortConv` over [q ‖ k ‖ v]: a depthwise
conv of the concatenation is three separate convs), instead of one conv on the block's input. No activation
follows the conv (the op's feature map or the mixer's normalization comes next).

A mixer with such a conv keeps the conv's last W−1 inputs beside its own state:
  state = {'core': <the mixer's state without the conv>, 'conv': [B, W−1, 3·D]}
`split_state` / `join_state` read and build that layout; without a conv the state is the mixer's own.
"""
import jax
import jax.numpy as jnp
from flax import nnx

from linear_seq.mixers.short_conv import ShortConv


def width(cfg) -> int:
  """The q/k/v conv width a mixer built from `cfg` (a ModelConfig) should use: 0 unless conv_on = 'qkv'."""
  return cfg.conv_width if getattr(cfg, "conv_on", "input") == "qkv" else 0


class QKVConv(nnx.Module):
  """x [B,T,D] -> q, k, v [B,T,H,K] through three projections, each followed by a short causal conv."""

  def __init__(self, d_model: int, conv_width: int, *, widths: tuple[int, int, int] | None = None,
               dtype=jnp.float32, rngs: nnx.Rngs):
    """widths: the q, k, v channel counts (default d_model each; grouped-query attention has fewer k, v)."""
    self.widths = tuple(widths or (d_model,) * 3)
    self.conv = ShortConv(sum(self.widths), conv_width, dtype=dtype, rngs=rngs)

  def init_state(self, batch_size: int) -> jax.Array:
    return self.conv.init_state(batch_size)

  def state_size(self) -> int:
    return self.conv.state_size()

  def __call__(self, q_BTD, k_BTD, v_BTD, *, state=None, segment_ids=None):
    """Projected q, k, v [B,T,D] (before the split into heads) -> convolved q, k, v and the conv state."""
    qkv_BTC, state = self.conv(jnp.concatenate([q_BTD, k_BTD, v_BTD], axis=-1), state=state,
                               segment_ids=segment_ids)
    q_BTD, k_BTD, v_BTD = jnp.split(qkv_BTC, [self.widths[0], self.widths[0] + self.widths[1]], axis=-1)
    return (q_BTD, k_BTD, v_BTD), state


def maybe(d_model: int, conv_width: int, *, widths=None, dtype, rngs: nnx.Rngs) -> QKVConv | None:
  """A QKVConv for conv_width >= 2, None for 0."""
  return QKVConv(d_model, conv_width, widths=widths, dtype=dtype, rngs=rngs) if conv_width else None


def project(x_BTD, projections, num_heads: int, conv: QKVConv | None, *, state=None, segment_ids=None):
  """q, k, v [B,T,H,K] from three projections (+ the q/k/v conv when `conv` is given) and the conv state."""
  B, T, _ = x_BTD.shape
  qkv = tuple(p(x_BTD) for p in projections)
  conv_state = None
  if conv is not None:
    qkv, conv_state = conv(*qkv, state=state, segment_ids=segment_ids)
  return tuple(a.reshape(B, T, num_heads, -1) for a in qkv), conv_state


def split_state(state, conv: QKVConv | None):
  """(the mixer's own state, the conv state) from a mixer state; both None for state=None."""
  if conv is None or state is None:
    return state, None
  return state["core"], state["conv"]


def init_state(core, conv: QKVConv | None, batch_size: int):
  """The fresh mixer state from its own fresh state (+ a zero conv state when there is a conv)."""
  return join_state(core, None if conv is None else conv.init_state(batch_size), conv)


def state_size(conv: QKVConv | None) -> int:
  """Floats per sequence the conv adds to the mixer's state (0 without one)."""
  return 0 if conv is None else conv.state_size()


def join_state(core, conv_state, conv: QKVConv | None):
  """The mixer state from its own state and the conv state (just `core` without a conv)."""
  return core if conv is None else {"core": core, "conv": conv_state}
