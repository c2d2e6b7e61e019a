"""Kernelized linear attention (seed eq. 6-11): φ(q) φ(k)ᵀ v, any feature map, optional fixed decay."""
import math

import jax
import jax.numpy as jnp
from flax import nnx

from linear_seq import ops
from linear_seq.mixers import random_projection as rp
from linear_seq.mixers import modes, qkv_conv, segments, seq_shard
from linear_seq.mixers.head_norm import HeadNorm
from linear_seq.checks import check_choice

RANDOM_FEATURE_MAPS = ("favor", "rbf")
# Maps whose kernel φ(q)·φ(k) can be negative or zero-sum: the D⁻¹ denominator is unsafe for them.
SIGNED_FEATURE_MAPS = ("identity", "sincos")
NORMALIZATIONS = ("denominator", "norm", "none")
STABILIZED_FEATURE_MAPS = ("exp", "favor", "rbf")


def resolve_normalize(feature_map: str, normalize: str) -> str:
  """'' -> 'denominator' for positive maps, 'norm' for signed ones; rejects denominator + signed map."""
  if not normalize:
    return "norm" if feature_map in SIGNED_FEATURE_MAPS else "denominator"
  check_choice("linear-attention normalization", normalize, NORMALIZATIONS)
  if normalize == "denominator" and feature_map in SIGNED_FEATURE_MAPS:
    raise ValueError(
        f"normalize='denominator' needs a positive feature map, but {feature_map!r} can be negative; "
        f"use normalize='norm' (output norm, TransNormer style) or 'none', or a positive map "
        f"(not one of {', '.join(SIGNED_FEATURE_MAPS)})")
  return normalize


class LinearAttention(nnx.Module):
  """o_t = φ(q_t) S_t [/ φ(q_t) z_t], S_t = a S_{t−1} + φ(k_t)ᵀ v_t per head; `ops.linear_attention`.

  K = V = d_model / H. Random-feature maps (favor, rbf) hold W [K, num_features] as a `RandomProjection`
  and see q, k scaled by K^−¼, so favor approximates softmax attention exp(q·k/√K).
  normalize: 'denominator' (eq. 9; positive maps only), 'norm' (per-head RMS norm of the output,
  TransNormer) or 'none'. decay: fixed a per head (eq. 10-11; with the denominator the (1−a) cancels).
  segment_ids: the state resets at a document's first token (the op's `reset`).
  State: (S [B,H,K',V], z [B,H,K']) with the denominator, else S [B,H,K',V], float32; K' = feature dim.
  qkv_conv_width > 0: short convs on q, k, v after their projections; state {'core': the above, 'conv': ...}.
  """
  supports_qkv_conv = True

  def __init__(self, d_model: int, num_heads: int, *, feature_map: str = "elu1", num_features: int = 64,
               normalize: str = "", decay: tuple = (), mode: str = "", chunk_size: int = 64,
               qkv_conv_width: int = 0, dtype=jnp.float32, rngs: nnx.Rngs):
    if d_model % num_heads:
      raise ValueError(f"d_model {d_model} must divide by num_heads {num_heads}")
    phi = ops.feature_map(feature_map)  # raises on an unknown name, listing the valid maps
    self.feature_map = feature_map
    self.normalize = resolve_normalize(feature_map, normalize)
    # exp-type maps are stabilized inside the op (keys in a running-max frame, so the denominator is
    # O(1) in that frame): a tiny eps keeps the result independent of the frame, i.e. of chunking, of
    # prefill/decode splits and of earlier documents; other maps keep the op's default.
    self.eps = 1e-12 if feature_map in STABILIZED_FEATURE_MAPS else 1e-6
    self.d_model, self.num_heads, self.head_dim = d_model, num_heads, d_model // num_heads
    self.mode, self.chunk_size, self.dtype = mode or "chunk", chunk_size, dtype
    if decay:
      if len(decay) not in (1, num_heads):
        raise ValueError(f"decay needs 1 or num_heads={num_heads} values, got {len(decay)}: {decay}")
      if not all(0.0 < a <= 1.0 for a in decay):
        raise ValueError(f"decay values must lie in (0, 1], got {decay}")
      self.log_decay_H = tuple(math.log(a) for a in (tuple(decay) * num_heads)[:num_heads])
    else:
      self.log_decay_H = None
    lin = lambda: nnx.Linear(d_model, d_model, use_bias=False, dtype=dtype, rngs=rngs)
    self.q_proj, self.k_proj, self.v_proj, self.o_proj = lin(), lin(), lin(), lin()
    self.qkv_conv = qkv_conv.maybe(d_model, qkv_conv_width, dtype=dtype, rngs=rngs)
    self.projection = (rp.RandomProjection(rp.draw(rngs.params(), self.head_dim, num_features))
                       if feature_map in RANDOM_FEATURE_MAPS else None)
    if self.normalize == "norm":
      self.out_norm = HeadNorm(num_heads, self.head_dim)
    proj = None if self.projection is None else self.projection[...]
    self.feature_dim = jax.eval_shape(
        lambda p: phi(jnp.zeros((1, self.head_dim)), **({} if p is None else {"projection": p})),
        proj).shape[-1]

  @classmethod
  def from_config(cls, cfg, *, rngs: nnx.Rngs) -> "LinearAttention":
    return cls(cfg.d_model, cfg.num_heads, feature_map=cfg.feature_map, num_features=cfg.num_features,
               normalize=cfg.normalize, decay=cfg.decay, mode=modes.linear_mode(cfg.mode),
               chunk_size=cfg.chunk_size, qkv_conv_width=qkv_conv.width(cfg),
               dtype=cfg.compute_dtype, rngs=rngs)

  def init_state(self, batch_size: int, max_len: int = 0):
    del max_len  # constant-size state
    S = jnp.zeros((batch_size, self.num_heads, self.feature_dim, self.head_dim), jnp.float32)
    if self.normalize == "denominator":
      S = S, jnp.zeros((batch_size, self.num_heads, self.feature_dim), jnp.float32)
    return qkv_conv.init_state(S, self.qkv_conv, batch_size)

  def state_size(self, seq_len: int = 0) -> int:
    del seq_len
    n = self.num_heads * self.feature_dim * self.head_dim
    n += self.num_heads * self.feature_dim if self.normalize == "denominator" else 0
    return n + qkv_conv.state_size(self.qkv_conv)

  def __call__(self, x_BTD, *, state=None, segment_ids=None):
    B, T, _ = x_BTD.shape
    H, K = self.num_heads, self.head_dim
    state, conv_state = qkv_conv.split_state(state, self.qkv_conv)
    (q_BTHK, k_BTHK, v_BTHK), conv_state = qkv_conv.project(
        x_BTD, (self.q_proj, self.k_proj, self.v_proj), H, self.qkv_conv, state=conv_state,
        segment_ids=segment_ids)
    projection = None
    if self.projection is not None:
      q_BTHK, k_BTHK = q_BTHK * K ** -0.25, k_BTHK * K ** -0.25
      projection = self.projection[...]
    log_decay = None if self.log_decay_H is None else jnp.asarray(self.log_decay_H, jnp.float32)
    # A reset, not log α = −inf in log_decay: the op weights keys by (1 − α) (eq. 10-11), which
    # would zero every key of an undecayed map.
    reset = None if segment_ids is None else segments.boundaries(segment_ids)
    mode = self.mode if T > 1 else "recurrent"
    o_BTHK, state = seq_shard.call(
        lambda q, k, v, r, w, s, seq_axis: ops.linear_attention(
            q, k, v, feature_map=self.feature_map, projection=w, normalize=self.normalize == "denominator",
            log_decay=log_decay, eps=self.eps, initial_state=s, mode=mode, chunk_size=self.chunk_size,
            reset=r, seq_axis=seq_axis),
        (q_BTHK, k_BTHK, v_BTHK, reset, projection, state), "ttttrb")
    if self.normalize == "norm":
      o_BTHK = self.out_norm(o_BTHK)
    return self.o_proj(o_BTHK.reshape(B, T, H * K)), qkv_conv.join_state(state, conv_state, self.qkv_conv)
