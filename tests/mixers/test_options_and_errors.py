"""Registry, option validation (every error message), RoPE, the short conv and random projections."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from linear_seq import mixers
from linear_seq.mixers import random_projection as rp
from linear_seq.mixers import segments
from linear_seq.mixers.rope import rope
from linear_seq.mixers.short_conv import ShortConv


def test_registry():
  assert set(mixers.MIXERS) == {"softmax", "linear", "retention", "gla", "s4", "deltanet", "deltaproduct",
                                "mamba2"}
  assert mixers.get("deltanet") is mixers.DeltaNet and mixers.get("mamba2") is mixers.Mamba2
  assert mixers.get("gla") is mixers.GatedLinearAttention
  with pytest.raises(ValueError, match="unknown mixer 'mamba'; valid: softmax, linear, retention, gla, s4, "
                     "deltanet, deltaproduct, mamba2 \\(did you mean .mamba2.\\?\\)$"):
    mixers.get("mamba")


R = lambda: nnx.Rngs(0)  # noqa: E731
BAD_OPTIONS = [
    (lambda: mixers.LinearAttention(16, 2, feature_map="identity", normalize="denominator", rngs=R()),
     "needs a positive feature map, but 'identity'"),
    (lambda: mixers.LinearAttention(16, 2, feature_map="sincos", normalize="denominator", rngs=R()),
     "use normalize='norm'"),
    (lambda: mixers.LinearAttention(16, 2, normalize="layer", rngs=R()),
     "unknown linear-attention normalization 'layer'; valid: denominator, norm, none"),
    (lambda: mixers.LinearAttention(16, 2, feature_map="cosh", rngs=R()), "elu1"),
    (lambda: mixers.LinearAttention(16, 2, decay=(0.9, 0.9, 0.9), rngs=R()), "decay needs 1 or num_heads=2"),
    (lambda: mixers.LinearAttention(16, 2, decay=(1.5,), rngs=R()), r"decay values must lie in \(0, 1\]"),
    (lambda: mixers.LinearAttention(15, 2, rngs=R()), "must divide by num_heads"),
    (lambda: mixers.Retention(16, 2, gamma=(0.9, 0.9, 0.9), rngs=R()), "gamma needs 1 or num_heads=2"),
    (lambda: mixers.Retention(16, 2, gamma=(1.0,), rngs=R()), r"gamma values must lie in \(0, 1\)"),
    (lambda: mixers.Retention(15, 2, rngs=R()), "must divide by num_heads"),
    (lambda: mixers.Retention(16, 2, pos_encoding="xpos", rngs=R()),
     "unknown retention positional encoding 'xpos'; valid: none, rope"),
    (lambda: mixers.Retention(10, 2, pos_encoding="rope", rngs=R()), "RoPE needs an even head dim, got .* = 5"),
    (lambda: mixers.GatedLinearAttention(16, 2, gate_temperature=0.0, rngs=R()),
     "gate_temperature must be positive"),
    (lambda: mixers.GatedLinearAttention(16, 2, gate_rank=0, rngs=R()), "gate_rank must be a positive"),
    (lambda: mixers.GatedLinearAttention(15, 2, rngs=R()), "must divide by num_heads"),
    (lambda: mixers.SoftmaxAttention(16, 2, pos_encoding="alibi", rngs=R()),
     "unknown positional encoding 'alibi'; valid: none, learned, rope"),
    (lambda: mixers.SoftmaxAttention(15, 2, rngs=R()), "must divide by num_heads"),
    (lambda: mixers.S4D(16, init="legs", rngs=R()), "unknown s4 init 'legs'; valid: lin, inv"),
    (lambda: mixers.S4D(16, discretization="euler", rngs=R()), "zoh, bilinear"),
    (lambda: mixers.S4D(16, mode="chunk", rngs=R()), "unknown s4 mode 'chunk'; valid: fft, scan, assoc"),
    (lambda: mixers.S4D(16, dt_min=0.1, dt_max=0.01, rngs=R()), "need 0 < dt_min <= dt_max"),
    (lambda: mixers.DeltaNet(16, 2, gate="vector", rngs=R()),
     "unknown deltanet gate 'vector'; valid: none, scalar, channel"),
    (lambda: mixers.DeltaNet(16, 2, beta="tanh", rngs=R()), "unknown deltanet beta 'tanh'; valid: sigmoid, 2sigmoid"),
    (lambda: mixers.DeltaNet(15, 2, rngs=R()), "must divide by num_heads"),
    (lambda: mixers.DeltaNet(16, 2, gate="channel", gate_rank=0, rngs=R()), "gate_rank must be a positive"),
    (lambda: mixers.DeltaNet(16, 2, gate="scalar", dt_min=0.1, dt_max=0.01, rngs=R()),
     "need 0 < dt_min <= dt_max"),
    (lambda: mixers.DeltaProduct(16, 2, householder_steps=0, rngs=R()),
     "householder_steps must be an integer >= 1 .delta steps per token., got 0"),
    (lambda: mixers.Mamba2(16, head_dim=12, rngs=R()), "expand·d_model = 32 must divide by mamba_head_dim = 12"),
    (lambda: mixers.Mamba2(16, expand=0, head_dim=8, rngs=R()), "mamba2 needs positive integers"),
    (lambda: mixers.Mamba2(16, head_dim=8, conv_width=1, rngs=R()), "conv width must be >= 2"),
    (lambda: ShortConv(16, 1, rngs=R()), "conv width must be >= 2"),
    (lambda: rope(jnp.zeros((1, 2, 1, 3)), jnp.zeros((1, 2), jnp.int32)), "RoPE needs an even head dim"),
]


@pytest.mark.parametrize("make,message", BAD_OPTIONS, ids=[m for _, m in BAD_OPTIONS])
def test_bad_options_raise(make, message):
  with pytest.raises(ValueError, match=message):
    make()


def test_softmax_cache_overflow_raises():
  """Writing past the KV cache's last slot is an error, not a silent overwrite of the last slots."""
  m = mixers.SoftmaxAttention(8, 2, pos_encoding="none", rngs=R())
  x = jnp.ones((1, 3, 8))
  _, stateless = m(x)                       # fills exactly its T=3 slots (index + T == L is fine)
  with pytest.raises(ValueError, match=r"the KV cache holds 3 slots but index 3 \+ 1 tokens are needed; "
                     r"start from init_state\(batch_size, max_len\) with max_len >= 4"):
    m(x[:, :1], state=stateless)
  with pytest.raises(ValueError, match=r"holds 5 slots but index 3 \+ 3 tokens"):
    m(x, state={**m.init_state(1, 5), "index": jnp.int32(3)})


def test_linear_default_normalization_by_map():
  assert mixers.LinearAttention(16, 2, feature_map="elu1", rngs=R()).normalize == "denominator"
  assert mixers.LinearAttention(16, 2, feature_map="identity", rngs=R()).normalize == "norm"
  assert mixers.LinearAttention(16, 2, feature_map="sincos", normalize="none", rngs=R()).normalize == "none"


def test_retention_rope_sees_relative_positions_only():
  """Starting the document at position 0 or 37 (empty state) gives the same outputs (only t − s matters),
  the state's position counts on, and the rotation does change the outputs."""
  m = mixers.Retention(16, 2, pos_encoding="rope", gamma=(0.9,), rngs=R())
  x = jax.random.normal(jax.random.key(0), (1, 7, 16))
  start0 = m.init_state(1)
  start37 = dict(start0, pos=jnp.full((1,), 37, jnp.int32))
  y0, s0 = m(x, state=start0)
  y37, s37 = m(x, state=start37)
  np.testing.assert_allclose(y37, y0, rtol=1e-4, atol=1e-5)
  assert int(s0["pos"][0]) == 7 and int(s37["pos"][0]) == 44
  y_plain, _ = mixers.Retention(16, 2, gamma=(0.9,), rngs=R())(x)
  assert float(jnp.max(jnp.abs(y_plain - y0))) > 1e-3  # the rotation changes the outputs


def test_rope_is_relative():
  """q·k after RoPE depends only on the position difference."""
  q = jax.random.normal(jax.random.key(0), (1, 1, 1, 8))
  k = jax.random.normal(jax.random.key(1), (1, 1, 1, 8))
  dot = lambda i, j: float(jnp.sum(rope(q, jnp.full((1, 1), i)) * rope(k, jnp.full((1, 1), j))))
  assert abs(dot(5, 2) - dot(13, 10)) < 1e-4
  assert abs(dot(5, 2) - dot(5, 3)) > 1e-3


def test_segment_positions():
  seg = jnp.asarray([[1, 1, 2, 2, 2, 3]])
  assert segments.boundaries(seg).tolist() == [[False, False, True, False, False, True]]
  assert segments.positions(seg, jnp.asarray([7]), 6).tolist() == [[7, 8, 0, 1, 2, 0]]
  assert segments.positions(None, jnp.asarray([7]), 3).tolist() == [[7, 8, 9]]


def test_short_conv_state_and_documents():
  conv = ShortConv(4, 3, rngs=R())
  x = jax.random.normal(jax.random.key(0), (2, 9, 4))
  y, s = conv(x)
  # causal depthwise conv reference
  w, b = np.asarray(conv.kernel[...]), np.asarray(conv.bias[...])
  xp = np.concatenate([np.zeros((2, 2, 4)), np.asarray(x)], axis=1)
  ref = b + sum(w[l] * xp[:, 2 - l:2 - l + 9] for l in range(3))
  np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)
  # prefill + steps
  y1, st = conv(x[:, :4], state=conv.init_state(2))
  ys = [y1]
  for t in range(4, 9):
    yt, st = conv(x[:, t:t + 1], state=st)
    ys.append(yt)
  np.testing.assert_allclose(jnp.concatenate(ys, 1), y, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(st, s, rtol=0, atol=0)
  # packed: second document (from t=4) equals running it alone; its state holds no earlier input
  seg = jnp.asarray([[1] * 4 + [2] * 5] * 2)
  yp, sp = conv(x, segment_ids=seg)
  ya, _ = conv(x[:, 4:])
  np.testing.assert_allclose(yp[:, 4:], ya, rtol=1e-5, atol=1e-6)
  seg_late = jnp.asarray([[1] * 8 + [2]] * 2)
  _, s_late = conv(x, segment_ids=seg_late)
  assert np.all(np.asarray(s_late[:, 0]) == 0) and np.all(np.asarray(s_late[:, 1]) == np.asarray(x[:, 8]))


def test_random_projection_is_state_not_param_and_redraws():
  m = mixers.LinearAttention(16, 2, feature_map="favor", num_features=12, rngs=R())
  assert m.projection[...].shape == (8, 12)
  assert "projection" not in {p[-1] for p, _ in nnx.to_flat_state(nnx.state(m, nnx.Param))}
  assert len(jax.tree.leaves(nnx.state(m, rp.RandomProjection))) == 1
  before = np.asarray(m.projection[...])
  rp.redraw(m.projection, jax.random.key(5))
  assert m.projection[...].shape == before.shape and not np.allclose(m.projection[...], before)
