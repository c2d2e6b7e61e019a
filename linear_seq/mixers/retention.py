"""Multi-scale retention (RetNet, Sun et al. 2023): fixed per-head decay γ_h, group norm, swish gate."""
import math

import jax
import jax.numpy as jnp
from flax import nnx

from linear_seq import ops
from linear_seq.mixers import modes, qkv_conv, segments, seq_shard
from linear_seq.mixers.head_norm import HeadNorm
from linear_seq.mixers.rope import rope
from linear_seq.checks import check_choice

POS_ENCODINGS = ("none", "rope")


def default_gammas(num_heads: int) -> tuple:
  """RetNet's multi-scale decays γ_h = 1 − 2^(−5−h), h = 0..H−1."""
  return tuple(1.0 - 2.0 ** (-5 - h) for h in range(num_heads))


class Retention(nnx.Module):
  """y = W_o (swish(x W_g) ⊙ GroupNorm(Retention(q, k, v))), S_t = γ_h S_{t−1} + k_tᵀ v_t per head.

  K = V = d_model / H, scale K^−½ (the op's default). gamma: fixed values (1 or H of them, each in (0, 1))
  or RetNet's multi-scale default. Calls `ops.linear_recurrence` with log_decay = log γ (the same
  recurrence as `ops.retention`) so a document boundary can add its reset (log α = −inf).
  pos_encoding: 'none' (the decay is the only sense of order) or 'rope': q and k rotated by their position
  in the document, so q_t·k_s depends on t − s — RetNet's xPos rotation Θ without its length-extrapolation
  scaling. State: S [B,H,K,V] float32; with 'rope' a dict {'S': S, 'pos': [B] int32 (position of the next
  token in its document)}.
  output_gate=False: y = W_o GroupNorm(o) (no swish gate; the g projection is not created).
  qkv_conv_width > 0: short convs on q, k, v after their projections; state {'core': the above, 'conv': ...}.
  """
  supports_qkv_conv = True

  def __init__(self, d_model: int, num_heads: int, *, gamma: tuple = (), pos_encoding: str = "none",
               mode: str = "", chunk_size: int = 64, output_gate: bool = True, qkv_conv_width: int = 0,
               dtype=jnp.float32, rngs: nnx.Rngs):
    check_choice("retention positional encoding", pos_encoding, POS_ENCODINGS)
    if d_model % num_heads:
      raise ValueError(f"d_model {d_model} must divide by num_heads {num_heads}")
    gamma = tuple(gamma) or default_gammas(num_heads)
    if len(gamma) not in (1, num_heads):
      raise ValueError(f"gamma needs 1 or num_heads={num_heads} values, got {len(gamma)}: {gamma}")
    if not all(0.0 < g < 1.0 for g in gamma):
      raise ValueError(f"gamma values must lie in (0, 1), got {gamma}")
    self.gamma = (gamma * num_heads)[:num_heads]
    if pos_encoding == "rope" and (d_model // num_heads) % 2:
      raise ValueError(f"retention with RoPE needs an even head dim, got d_model/num_heads = {d_model // num_heads}")
    self.pos_encoding = pos_encoding
    self.d_model, self.num_heads, self.head_dim = d_model, num_heads, d_model // num_heads
    self.mode, self.chunk_size, self.dtype = mode or "chunk", chunk_size, dtype
    lin = lambda: nnx.Linear(d_model, d_model, use_bias=False, dtype=dtype, rngs=rngs)
    # Creation order (q, k, v, gate, o) fixes which key each draws: the same init as before output_gate existed.
    self.q_proj, self.k_proj, self.v_proj = lin(), lin(), lin()
    self.g_proj = lin() if output_gate else None
    self.o_proj = lin()
    self.qkv_conv = qkv_conv.maybe(d_model, qkv_conv_width, dtype=dtype, rngs=rngs)
    self.out_norm = HeadNorm(num_heads, self.head_dim)

  @classmethod
  def from_config(cls, cfg, *, rngs: nnx.Rngs) -> "Retention":
    return cls(cfg.d_model, cfg.num_heads, gamma=cfg.gamma, pos_encoding=cfg.retention_pos_encoding,
               mode=modes.linear_mode(cfg.mode), chunk_size=cfg.chunk_size, output_gate=cfg.output_gate,
               qkv_conv_width=qkv_conv.width(cfg), dtype=cfg.compute_dtype, rngs=rngs)

  def init_state(self, batch_size: int, max_len: int = 0):
    del max_len
    S = jnp.zeros((batch_size, self.num_heads, self.head_dim, self.head_dim), jnp.float32)
    core = dict(S=S, pos=jnp.zeros((batch_size,), jnp.int32)) if self.pos_encoding == "rope" else S
    return qkv_conv.init_state(core, self.qkv_conv, batch_size)

  def state_size(self, seq_len: int = 0) -> int:
    del seq_len
    return self.num_heads * self.head_dim * self.head_dim + qkv_conv.state_size(self.qkv_conv)

  def __call__(self, x_BTD, *, state=None, segment_ids=None):
    B, T, _ = x_BTD.shape
    H, K = self.num_heads, self.head_dim
    state, conv_state = qkv_conv.split_state(state, self.qkv_conv)
    (q_BTHK, k_BTHK, v_BTHK), conv_state = qkv_conv.project(
        x_BTD, (self.q_proj, self.k_proj, self.v_proj), H, self.qkv_conv, state=conv_state,
        segment_ids=segment_ids)
    rotary = self.pos_encoding == "rope"
    S_BHKV = state["S"] if rotary and state is not None else state
    if rotary:
      pos_BT = segments.positions(segment_ids, jnp.zeros((B,), jnp.int32) if state is None else state["pos"], T)
      q_BTHK, k_BTHK = rope(q_BTHK, pos_BT), rope(k_BTHK, pos_BT)
    log_decay = jnp.asarray([math.log(g) for g in self.gamma], jnp.float32)
    reset_BT = segments.reset_log_decay(segment_ids)
    if reset_BT is not None:
      log_decay = reset_BT[:, :, None] + log_decay
    mode = self.mode if T > 1 else "recurrent"
    o_BTHK, S_BHKV = seq_shard.call(
        lambda q, k, v, g, s, seq_axis: ops.linear_recurrence(
            q, k, v, g, initial_state=s, mode=mode, chunk_size=self.chunk_size, seq_axis=seq_axis),
        (q_BTHK, k_BTHK, v_BTHK, log_decay, S_BHKV), "ttt" + ("t" if log_decay.ndim == 3 else "r") + "b")
    o_BTD = self.out_norm(o_BTHK).reshape(B, T, H * K)
    new_state = dict(S=S_BHKV, pos=pos_BT[:, -1] + 1) if rotary else S_BHKV
    if self.g_proj is not None:
      o_BTD = jax.nn.swish(self.g_proj(x_BTD)) * o_BTD
    return self.o_proj(o_BTD), qkv_conv.join_state(new_state, conv_state, self.qkv_conv)
