"""Mamba-2 (Dao & Gu 2024, SSD): a selective state-space layer with a scalar decay per head."""
import jax
import jax.numpy as jnp
from flax import nnx

from linear_seq import ops
from linear_seq.mixers import dt_gate, modes, segments, seq_shard
from linear_seq.mixers.short_conv import ShortConv


class Mamba2(nnx.Module):
  """y = W_out RMSNorm(SSD(x) ⊙ SiLU(z)), the SSD recurrence per head on a state h [N, P].

  in_proj(x) = (z, x, B, C, dt): z, x [E = expand·d_model], B, C [N] (one group, shared by the heads),
  dt [H] with H = E / head_dim heads of P = head_dim channels. x‖B‖C go through a short causal depthwise
  conv (kernel conv_width = 4, its own; packed documents reset it) and SiLU. Then per head, with
  Δ_t = softplus(dt_t + dt_bias) and A = −exp(A_log):
    h_t = exp(Δ_t A) h_{t−1} + B_tᵀ (Δ_t x_t),   y_t = C_t h_t + D x_t,
  i.e. the continuous system h' = A h + Bᵀ x discretized with Ā = exp(ΔA) (ZOH for A) and B̄ = ΔB
  (Euler for B), as Mamba does: the selective (data-dependent Δ, B, C) sibling of S4D. The scan is
  `ops.linear_recurrence(q=C, k=B, v=Δ·x, log_decay=Δ·A, scale=1)`; a document boundary adds log α = −inf.
  Init as Mamba-2 (`dt_gate`): A ~ U[1, 16], Δ log-uniform in [dt_min, dt_max], D = 1. A_log, dt_bias and
  D (parameter `D_skip`) take no weight decay and no S4 learning-rate multiplier.
  State: {'S': [B, H, N, P] float32, 'conv': [B, conv_width−1, E + 2N]}.
  """
  owns_short_conv = True  # the block's model.conv_width must be 0 (ModelConfig checks)

  def __init__(self, d_model: int, *, expand: int = 2, head_dim: int = 64, state_size: int = 64,
               conv_width: int = 4, dt_min: float = 1e-3, dt_max: float = 1e-1, mode: str = "",
               chunk_size: int = 64, dtype=jnp.float32, rngs: nnx.Rngs):
    if not isinstance(expand, int) or expand <= 0 or state_size <= 0 or head_dim <= 0:
      raise ValueError(f"mamba2 needs positive integers expand, head_dim, state_size; got {expand}, "
                       f"{head_dim}, {state_size}")
    inner = expand * d_model
    if inner % head_dim:
      raise ValueError(f"mamba2: expand·d_model = {inner} must divide by mamba_head_dim = {head_dim}")
    self.d_model, self.inner, self.head_dim, self.num_heads = d_model, inner, head_dim, inner // head_dim
    self.n = state_size
    self.mode, self.chunk_size, self.dtype = mode or "chunk", chunk_size, dtype
    H = self.num_heads
    self.in_proj = nnx.Linear(d_model, 2 * inner + 2 * state_size + H, use_bias=False, dtype=dtype,
                              rngs=rngs)
    self.conv = ShortConv(inner + 2 * state_size, conv_width, dtype=dtype, rngs=rngs)
    self.A_log = nnx.Param(dt_gate.init_A_log(rngs.params(), (H,)))
    self.dt_bias = nnx.Param(dt_gate.init_dt_bias(rngs.params(), (H,), dt_min, dt_max))
    self.D_skip = nnx.Param(jnp.ones((H,), jnp.float32))
    self.out_norm = nnx.RMSNorm(inner, epsilon=1e-5, dtype=dtype, rngs=rngs)
    self.out_proj = nnx.Linear(inner, d_model, use_bias=False, dtype=dtype, rngs=rngs)

  @classmethod
  def from_config(cls, cfg, *, rngs: nnx.Rngs) -> "Mamba2":
    return cls(cfg.d_model, expand=cfg.mamba_expand, head_dim=cfg.mamba_head_dim,
               state_size=cfg.state_size, dt_min=cfg.dt_min, dt_max=cfg.dt_max,
               mode=modes.linear_mode(cfg.mode), chunk_size=cfg.chunk_size, dtype=cfg.compute_dtype,
               rngs=rngs)

  def init_state(self, batch_size: int, max_len: int = 0) -> dict:
    del max_len
    return {"S": jnp.zeros((batch_size, self.num_heads, self.n, self.head_dim), jnp.float32),
            "conv": self.conv.init_state(batch_size)}

  def state_size(self, seq_len: int = 0) -> int:
    del seq_len
    return self.num_heads * self.n * self.head_dim + self.conv.state_size()

  def __call__(self, x_BTD, *, state=None, segment_ids=None):
    B, T, _ = x_BTD.shape
    E, N, H, P = self.inner, self.n, self.num_heads, self.head_dim
    state = state or {}
    z_BTE, xbc_BTC, dt_BTH = jnp.split(self.in_proj(x_BTD), [E, 2 * E + 2 * N], axis=-1)
    xbc_BTC, conv_state = self.conv(xbc_BTC, state=state.get("conv"), segment_ids=segment_ids)
    x_BTE, b_BTN, c_BTN = jnp.split(jax.nn.silu(xbc_BTC), [E, E + N], axis=-1)
    dt_BTH = dt_gate.step_size(dt_BTH, self.dt_bias[...])
    log_a_BTH = dt_gate.log_decay(dt_BTH, self.A_log[...])
    reset_BT = segments.reset_log_decay(segment_ids)
    if reset_BT is not None:
      log_a_BTH = log_a_BTH + reset_BT[:, :, None]
    x_BTHP = x_BTE.reshape(B, T, H, P)
    heads = lambda a_BTN: jnp.broadcast_to(a_BTN[:, :, None], (B, T, H, N))
    v_BTHP = (x_BTHP * dt_BTH[..., None]).astype(x_BTD.dtype)
    mode = self.mode if T > 1 else "recurrent"
    y_BTHP, S = seq_shard.call(
        lambda c, b, v, g, s, seq_axis: ops.linear_recurrence(
            c, b, v, g, scale=1.0, initial_state=s, mode=mode, chunk_size=self.chunk_size, seq_axis=seq_axis),
        (heads(c_BTN), heads(b_BTN), v_BTHP, log_a_BTH, state.get("S")), "ttttb")
    y_BTHP = y_BTHP + (self.D_skip[...][:, None] * x_BTHP).astype(y_BTHP.dtype)
    y_BTE = self.out_norm(y_BTHP.reshape(B, T, E) * jax.nn.silu(z_BTE))
    return self.out_proj(y_BTE), {"S": S, "conv": conv_state}
