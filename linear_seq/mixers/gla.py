"""Gated linear attention (GLA, Yang et al. 2024): data-dependent forget gates from a low-rank projection."""
import jax
import jax.numpy as jnp
from flax import nnx

from linear_seq import ops
from linear_seq.mixers import modes, qkv_conv, segments, seq_shard
from linear_seq.mixers.head_norm import HeadNorm


class GatedLinearAttention(nnx.Module):
  """S_t = diag(α_t) S_{t−1} + k_tᵀ v_t, o_t = q_t S_t K^−½; `ops.gated_linear_attention`.

  Gate: log α_t = logsigmoid(x_t W1 W2 + b) / τ (rank r low-rank projection, temperature τ; GLA uses
  τ = 16), a vector over K per head (vector_gate) or one scalar per head. Output as in the GLA paper:
  y = W_o (swish(x W_r) ⊙ GroupNorm(o)). K = V = d_model / H (the paper's K = d_model/2 is not used).
  segment_ids: log α = −inf at a document's first token. State: S [B,H,K,V] float32.
  output_gate=False: y = W_o GroupNorm(o) (no swish gate; the r projection is not created).
  qkv_conv_width > 0: short convs on q, k, v after their projections; state {'core': S, 'conv': ...}.
  negative_eigenvalues: α ↦ 2α − 1 ∈ (−1, 1), the transition's eigenvalues signed (Grazzi et al. 2025), run
  as log |α| and its sign through the op's `decay_sign`.
  """
  supports_negative_eigenvalues = True  # model.negative_eigenvalues: α ↦ 2α − 1
  supports_qkv_conv = True

  def __init__(self, d_model: int, num_heads: int, *, gate_rank: int = 16, gate_temperature: float = 16.0,
               vector_gate: bool = True, mode: str = "", chunk_size: int = 64, output_gate: bool = True,
               qkv_conv_width: int = 0, negative_eigenvalues: bool = False, dtype=jnp.float32,
               rngs: nnx.Rngs):
    if d_model % num_heads:
      raise ValueError(f"d_model {d_model} must divide by num_heads {num_heads}")
    if gate_temperature <= 0:
      raise ValueError(f"gate_temperature must be positive, got {gate_temperature}")
    if gate_rank <= 0:
      raise ValueError(f"gate_rank must be a positive integer, got {gate_rank}")
    self.d_model, self.num_heads, self.head_dim = d_model, num_heads, d_model // num_heads
    self.gate_temperature, self.vector_gate = float(gate_temperature), vector_gate
    self.negative_eigenvalues = bool(negative_eigenvalues)
    self.mode, self.chunk_size, self.dtype = mode or "chunk", chunk_size, dtype
    lin = lambda: nnx.Linear(d_model, d_model, use_bias=False, dtype=dtype, rngs=rngs)
    # Creation order (q, k, v, gate, o) fixes which key each draws: the same init as before output_gate existed.
    self.q_proj, self.k_proj, self.v_proj = lin(), lin(), lin()
    self.r_proj = lin() if output_gate else None
    self.o_proj = lin()
    self.qkv_conv = qkv_conv.maybe(d_model, qkv_conv_width, dtype=dtype, rngs=rngs)
    gate_out = d_model if vector_gate else num_heads
    self.gate_down = nnx.Linear(d_model, gate_rank, use_bias=False, dtype=dtype, rngs=rngs)
    self.gate_up = nnx.Linear(gate_rank, gate_out, use_bias=True, dtype=dtype, rngs=rngs)
    self.out_norm = HeadNorm(num_heads, self.head_dim)

  @classmethod
  def from_config(cls, cfg, *, rngs: nnx.Rngs) -> "GatedLinearAttention":
    return cls(cfg.d_model, cfg.num_heads, gate_rank=cfg.gate_rank, gate_temperature=cfg.gate_temperature,
               vector_gate=cfg.vector_gate, mode=modes.linear_mode(cfg.mode),
               chunk_size=cfg.chunk_size, output_gate=cfg.output_gate, qkv_conv_width=qkv_conv.width(cfg),
               negative_eigenvalues=cfg.negative_eigenvalues, dtype=cfg.compute_dtype, rngs=rngs)

  def init_state(self, batch_size: int, max_len: int = 0):
    del max_len
    S = jnp.zeros((batch_size, self.num_heads, self.head_dim, self.head_dim), jnp.float32)
    return qkv_conv.init_state(S, self.qkv_conv, batch_size)

  def state_size(self, seq_len: int = 0) -> int:
    del seq_len
    return self.num_heads * self.head_dim * self.head_dim + qkv_conv.state_size(self.qkv_conv)

  def log_forget(self, x_BTD) -> jax.Array:
    """log α: [B,T,H,K] (vector gate) or [B,T,H] (scalar gate), float32, ≤ 0."""
    B, T, _ = x_BTD.shape
    logits = self.gate_up(self.gate_down(x_BTD)).astype(jnp.float32)
    log_a = jax.nn.log_sigmoid(logits) / self.gate_temperature
    return log_a.reshape(B, T, self.num_heads, self.head_dim) if self.vector_gate else log_a

  def __call__(self, x_BTD, *, state=None, segment_ids=None):
    B, T, _ = x_BTD.shape
    H, K = self.num_heads, self.head_dim
    state, conv_state = qkv_conv.split_state(state, self.qkv_conv)
    (q_BTHK, k_BTHK, v_BTHK), conv_state = qkv_conv.project(
        x_BTD, (self.q_proj, self.k_proj, self.v_proj), H, self.qkv_conv, state=conv_state,
        segment_ids=segment_ids)
    log_a = self.log_forget(x_BTD)
    sign = None
    if self.negative_eigenvalues:  # α ↦ 2α − 1 ∈ (−1, 1) (Grazzi et al. 2025): log |α| and the sign
      log_a, sign = ops.signed_log_decay(2.0 * jnp.exp(log_a) - 1.0)
    reset_BT = segments.reset_log_decay(segment_ids)
    if reset_BT is not None:
      log_a = log_a + reset_BT.reshape(B, T, *([1] * (log_a.ndim - 2)))
    mode = self.mode if T > 1 else "recurrent"
    o_BTHK, state = seq_shard.call(
        lambda q, k, v, g, sg, s, seq_axis: ops.gated_linear_attention(
            q, k, v, g, initial_state=s, mode=mode, chunk_size=self.chunk_size, seq_axis=seq_axis,
            decay_sign=sg),
        (q_BTHK, k_BTHK, v_BTHK, log_a, sign, state), "tttttb")
    o_BTD = self.out_norm(o_BTHK).reshape(B, T, H * K)
    if self.r_proj is not None:
      o_BTD = jax.nn.swish(self.r_proj(x_BTD)) * o_BTD
    return self.o_proj(o_BTD), qkv_conv.join_state(state, conv_state, self.qkv_conv)
