"""Mamba-2 (Dao & Gu 2024, SSD): a selective state-space layer with a scalar decay per head."""
import jax
import jax.numpy as jnp
from flax import nnx

from linear_seq import ops
from linear_seq.mixers import dt_gate, modes, segments, seq_shard
from linear_seq.mixers.head_norm import HeadNorm
from linear_seq.mixers.short_conv import ShortConv


class Mamba2(nnx.Module):
  """y = W_out RMSNorm(SSD(x) ⊙ SiLU(z)), the SSD recurrence per head on a state h [N, P].

  in_proj(x) = (z, x, B, C, dt): z, x [E = expand·d_model], B, C [G·N] (G = `groups` groups, default 1; head
  h reads group h // (H / G), HF's n_groups), dt [H] with H = E / head_dim heads of P = head_dim channels.
  x‖B‖C go through a short causal depthwise conv (kernel conv_width = 4, its own; packed documents reset it)
  and SiLU. Then per head, with
  Δ_t = softplus(dt_t + dt_bias) and A = −exp(A_log):
    h_t = exp(Δ_t A) h_{t−1} + B_tᵀ (Δ_t x_t),   y_t = C_t h_t + D x_t,
  i.e. the continuous system h' = A h + Bᵀ x discretized with Ā = exp(ΔA) (ZOH for A) and B̄ = ΔB
  (Euler for B), as Mamba does: the selective (data-dependent Δ, B, C) sibling of S4D. The scan is
  `ops.linear_recurrence(q=C, k=B, v=Δ·x, log_decay=Δ·A, scale=1)`; a document boundary adds log α = −inf.
  Δ is clamped to `dt_limit` when given (HF's time_step_limit). The output RMSNorm normalizes each of
  `norm_groups` groups of E / norm_groups channels (HF: n_groups groups; default 1 = all of E).
  Init as Mamba-2 (`dt_gate`): A ~ U[1, 16] (A_init='arange': A_h = h + 1, HF's), Δ log-uniform in
  [dt_min, dt_max], D = 1. A_log, dt_bias and D (parameter `D_skip`) take no weight decay and no S4
  learning-rate multiplier.
  negative_eigenvalues: Ā = exp(ΔA) ↦ 2Ā − 1 ∈ (−1, 1), the transition's eigenvalues signed (Grazzi et al.
  2025), run as log |Ā| and its sign through the op's `decay_sign`.
  State: {'S': [B, H, N, P] float32, 'conv': [B, conv_width−1, E + 2GN]}.
  """
  owns_short_conv = True  # the block's model.conv_width must be 0 (ModelConfig checks)
  supports_negative_eigenvalues = True  # model.negative_eigenvalues: Ā ↦ 2Ā − 1

  def __init__(self, d_model: int, *, expand: int = 2, head_dim: int = 64, state_size: int = 64,
               conv_width: int = 4, dt_min: float = 1e-3, dt_max: float = 1e-1, mode: str = "",
               chunk_size: int = 64, groups: int = 1, norm_groups: int = 1,
               dt_limit: tuple[float, float] = (0.0, 0.0), A_init: str = "uniform",
               negative_eigenvalues: bool = False, dtype=jnp.float32, rngs: nnx.Rngs):
    if not isinstance(expand, int) or expand <= 0 or state_size <= 0 or head_dim <= 0:
      raise ValueError(f"mamba2 needs positive integers expand, head_dim, state_size; got {expand}, "
                       f"{head_dim}, {state_size}")
    inner = expand * d_model
    if inner % head_dim:
      raise ValueError(f"mamba2: expand·d_model = {inner} must divide by mamba_head_dim = {head_dim}")
    self.d_model, self.inner, self.head_dim, self.num_heads = d_model, inner, head_dim, inner // head_dim
    if groups <= 0 or self.num_heads % groups or norm_groups <= 0 or inner % norm_groups:
      raise ValueError(f"mamba2: the {self.num_heads} heads must divide by mamba_groups = {groups} and the "
                       f"{inner} channels by mamba_norm_groups = {norm_groups}")
    self.n, self.groups, self.dt_limit = state_size, groups, tuple(dt_limit)
    self.mode, self.chunk_size, self.dtype = mode or "chunk", chunk_size, dtype
    self.negative_eigenvalues = bool(negative_eigenvalues)
    H = self.num_heads
    GN = groups * state_size
    self.in_proj = nnx.Linear(d_model, 2 * inner + 2 * GN + H, use_bias=False, dtype=dtype, rngs=rngs)
    self.conv = ShortConv(inner + 2 * GN, conv_width, dtype=dtype, rngs=rngs)
    self.A_log = nnx.Param(dt_gate.init_A_log(rngs.params(), (H,), A_init))
    self.dt_bias = nnx.Param(dt_gate.init_dt_bias(rngs.params(), (H,), dt_min, dt_max))
    self.D_skip = nnx.Param(jnp.ones((H,), jnp.float32))
    self.out_norm = (nnx.RMSNorm(inner, epsilon=1e-5, dtype=dtype, rngs=rngs) if norm_groups == 1
                     else HeadNorm(norm_groups, inner // norm_groups, eps=1e-5))
    self.out_proj = nnx.Linear(inner, d_model, use_bias=False, dtype=dtype, rngs=rngs)

  @classmethod
  def from_config(cls, cfg, *, rngs: nnx.Rngs) -> "Mamba2":
    return cls(cfg.d_model, expand=cfg.mamba_expand, head_dim=cfg.mamba_head_dim,
               state_size=cfg.state_size, dt_min=cfg.dt_min, dt_max=cfg.dt_max,
               mode=modes.linear_mode(cfg.mode), chunk_size=cfg.chunk_size, groups=cfg.mamba_groups,
               norm_groups=cfg.mamba_norm_groups, dt_limit=(cfg.dt_limit_min, cfg.dt_limit_max),
               A_init=cfg.A_init, negative_eigenvalues=cfg.negative_eigenvalues, dtype=cfg.compute_dtype,
               rngs=rngs)

  def init_state(self, batch_size: int, max_len: int = 0) -> dict:
    del max_len
    return {"S": jnp.zeros((batch_size, self.num_heads, self.n, self.head_dim), jnp.float32),
            "conv": self.conv.init_state(batch_size)}

  def state_size(self, seq_len: int = 0) -> int:
    del seq_len
    return self.num_heads * self.n * self.head_dim + self.conv.state_size()

  def _decay(self, dt_BTH):
    """The dt projection [B, T, H] -> (Δ, log |α|, the sign of α or None), α = exp(ΔA) (negative_eigenvalues:
    2 exp(ΔA) − 1): the per-token, per-head factor the scan multiplies the state by."""
    dt_BTH = dt_gate.step_size(dt_BTH, self.dt_bias[...], self.dt_limit)
    log_a_BTH = dt_gate.log_decay(dt_BTH, self.A_log[...])
    if not self.negative_eigenvalues:
      return dt_BTH, log_a_BTH, None
    return dt_BTH, *ops.signed_log_decay(2.0 * jnp.exp(log_a_BTH) - 1.0)

  def transition(self, x_BTD) -> jax.Array:
    """The transition α_t [B, T, H] float32 for the mixer's input x (a diagnostic: which heads decay, hold or,
    with negative_eigenvalues, flip the state's sign at each token), as __call__ applies it."""
    _, log_a_BTH, sign_BTH = self._decay(self.in_proj(x_BTD)[..., -self.num_heads:])
    return jnp.exp(log_a_BTH) * (1.0 if sign_BTH is None else sign_BTH)

  def __call__(self, x_BTD, *, state=None, segment_ids=None):
    B, T, _ = x_BTD.shape
    E, N, H, P, G = self.inner, self.n, self.num_heads, self.head_dim, self.groups
    state = state or {}
    z_BTE, xbc_BTC, dt_BTH = jnp.split(self.in_proj(x_BTD), [E, 2 * E + 2 * G * N], axis=-1)
    xbc_BTC, conv_state = self.conv(xbc_BTC, state=state.get("conv"), segment_ids=segment_ids)
    x_BTE, b_BTN, c_BTN = jnp.split(jax.nn.silu(xbc_BTC), [E, E + G * N], axis=-1)
    dt_BTH, log_a_BTH, sign_BTH = self._decay(dt_BTH)
    reset_BT = segments.reset_log_decay(segment_ids)
    if reset_BT is not None:
      log_a_BTH = log_a_BTH + reset_BT[:, :, None]
    x_BTHP = x_BTE.reshape(B, T, H, P)
    heads = lambda a_BTN: jnp.repeat(a_BTN.reshape(B, T, G, N), H // G, axis=2)   # group of each head
    v_BTHP = (x_BTHP * dt_BTH[..., None]).astype(x_BTD.dtype)
    mode = self.mode if T > 1 else "recurrent"
    y_BTHP, S = seq_shard.call(
        lambda c, b, v, g, sg, s, seq_axis: ops.linear_recurrence(
            c, b, v, g, scale=1.0, initial_state=s, mode=mode, chunk_size=self.chunk_size, seq_axis=seq_axis,
            decay_sign=sg),
        (heads(c_BTN), heads(b_BTN), v_BTHP, log_a_BTH, sign_BTH, state.get("S")), "tttttb")
    y_BTHP = y_BTHP + (self.D_skip[...][:, None] * x_BTHP).astype(y_BTHP.dtype)
    y_BTE = y_BTHP.reshape(B, T, E) * jax.nn.silu(z_BTE)
    if isinstance(self.out_norm, HeadNorm):
      y_BTE = self.out_norm(y_BTE.reshape(B, T, -1, self.out_norm.scale.shape[-1])).reshape(B, T, E)
    else:
      y_BTE = self.out_norm(y_BTE)
    return self.out_proj(y_BTE), {"S": S, "conv": conv_state}
