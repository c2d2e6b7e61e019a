"""The delta rule (DeltaNet, Yang et al. 2024) and its gated forms: Gated DeltaNet (Yang, Kautz &
Hatamizadeh 2025) with a scalar decay per head, KDA (Kimi Delta Attention) with a per-channel decay."""
import jax
import jax.numpy as jnp
from flax import nnx

from linear_seq import ops
from linear_seq.mixers import dt_gate, householder, modes, segments, seq_shard
from linear_seq.mixers.head_norm import HeadNorm
from linear_seq.mixers.short_conv import ShortConv
from linear_seq.checks import check_choice

GATES = ("none", "scalar", "channel")
BETAS = ("sigmoid", "2sigmoid")
GATE_ACTS = {"swish": jax.nn.swish, "sigmoid": jax.nn.sigmoid}


def l2_normalize(x: jax.Array, eps: float = 1e-6) -> jax.Array:
  """x / ‖x‖ over the last axis, computed in float32, returned in x's dtype."""
  x32 = x.astype(jnp.float32)
  return (x32 * jax.lax.rsqrt(jnp.sum(x32 * x32, axis=-1, keepdims=True) + eps)).astype(x.dtype)


def beta_option(cfg) -> str:
  """'2sigmoid' with model.negative_eigenvalues (or its older alias model.delta_beta=2sigmoid), else
  model.delta_beta."""
  return "2sigmoid" if cfg.negative_eigenvalues else cfg.delta_beta


def config_options(cfg) -> dict:
  """DeltaNet's (and DeltaProduct's) constructor options from a ModelConfig."""
  return dict(gate=cfg.delta_gate, beta=beta_option(cfg), gate_rank=cfg.gate_rank, dt_min=cfg.dt_min,
              dt_max=cfg.dt_max, mode=modes.linear_mode(cfg.mode), chunk_size=cfg.chunk_size,
              output_gate=cfg.output_gate, qk_heads=cfg.delta_qk_heads, head_dim=cfg.head_dim,
              value_head_dim=cfg.value_head_dim, norm_eps=cfg.delta_norm_eps, gate_act=cfg.output_gate_act,
              gate_out_rank=cfg.output_gate_rank, A_init=cfg.A_init, dtype=cfg.compute_dtype)


class DeltaNet(nnx.Module):
  """S_t = (I − β_t k_tᵀ k_t) diag(α_t) S_{t−1} + β_t k_tᵀ v_t, o_t = q_t S_t K^−½; `ops.delta_rule`.

  q, k, v = SiLU(ShortConv(x W_q ‖ x W_k ‖ x W_v)) (a causal depthwise conv, kernel conv_width = 4, its
  own; packed documents reset it), q and k L2-normalized per head in float32, K = head_dim (default
  d_model / H), V = value_head_dim (default K). qk_heads < H (Qwen3-Next's num_k_heads < num_v_heads): q and k
  have qk_heads heads, head h (of values, β, α, state) reads q/k head h // (H / qk_heads).
  β_t = σ(x_t W_β) per head, or 2σ(·) with beta='2sigmoid' (β ∈ (0, 2): negative eigenvalues of the
  transition, Grazzi et al. 2025). gate: 'none' (α = 1, DeltaNet), 'scalar' (Gated DeltaNet:
  log α = −exp(A_log)·softplus(x W_a + dt_bias), one per head, Mamba-2's parametrization and init, see
  `dt_gate`) or 'channel' (KDA: the same with x W_a a rank-`gate_rank` projection to K channels per head,
  dt_bias per channel, A_log per head). Output y = W_o (HeadNorm(o) ⊙ act(x W_g)), act = swish (or sigmoid,
  KDA), W_g a full projection or (gate_out_rank > 0) a rank-gate_out_rank pair (KDA); HeadNorm's epsilon
  norm_eps; output_gate=False: y = W_o HeadNorm(o) (no g projection).
  segment_ids: log α = −inf at a document's first token (exact reset).
  householder_steps n > 1: DeltaProduct (`mixers.DeltaProduct`, see householder.py): n keys, values and β per
  token (W_k: d_model → n·qk_heads·K, W_v: d_model → n·H·V, W_β: d_model → n·H), the gate once per token;
  n = 1 is DeltaNet.
  State: {'S': [B, H, K, V] float32, 'conv': [B, conv_width−1, (1 + n)·qk_heads·K + n·H·V]}.
  """
  owns_short_conv = True  # the block's model.conv_width must be 0 (ModelConfig checks)
  supports_negative_eigenvalues = True  # model.negative_eigenvalues: β = 2σ(·) ∈ (0, 2)

  def __init__(self, d_model: int, num_heads: int, *, gate: str = "none", beta: str = "sigmoid",
               gate_rank: int = 16, conv_width: int = 4, dt_min: float = 1e-3, dt_max: float = 1e-1,
               mode: str = "", chunk_size: int = 64, output_gate: bool = True, householder_steps: int = 1,
               qk_heads: int = 0,
               head_dim: int = 0, value_head_dim: int = 0, norm_eps: float = 1e-5, gate_act: str = "swish",
               gate_out_rank: int = 0, A_init: str = "uniform", dtype=jnp.float32, rngs: nnx.Rngs):
    check_choice("deltanet gate", gate, GATES)
    check_choice("deltanet beta", beta, BETAS)
    check_choice("deltanet output gate activation", gate_act, tuple(GATE_ACTS))
    if not isinstance(householder_steps, int) or isinstance(householder_steps, bool) or householder_steps < 1:
      raise ValueError(f"householder_steps must be an integer >= 1 (delta steps per token), got "
                       f"{householder_steps!r}")
    if not head_dim and d_model % num_heads:
      raise ValueError(f"d_model {d_model} must divide by num_heads {num_heads}")
    if gate == "channel" and gate_rank <= 0:
      raise ValueError(f"gate_rank must be a positive integer, got {gate_rank}")
    qk_heads = qk_heads or num_heads
    if num_heads % qk_heads:
      raise ValueError(f"deltanet: num_heads {num_heads} must divide by delta_qk_heads {qk_heads}")
    self.d_model, self.num_heads, self.head_dim = d_model, num_heads, head_dim or d_model // num_heads
    self.qk_heads, self.value_dim = qk_heads, value_head_dim or self.head_dim
    self.gate, self.beta, self.gate_act, self.householder_steps = gate, beta, gate_act, householder_steps
    self.mode, self.chunk_size, self.dtype = mode or "chunk", chunk_size, dtype
    H, K, V, n = num_heads, self.head_dim, self.value_dim, householder_steps
    qk_width, v_width = qk_heads * K, H * V
    lin = lambda n_out, n_in=d_model: nnx.Linear(n_in, n_out, use_bias=False, dtype=dtype, rngs=rngs)
    # Creation order (q, k, v, g, o) fixes which key each draws: the same init as before output_gate existed.
    self.q_proj, self.k_proj, self.v_proj = lin(qk_width), lin(n * qk_width), lin(n * v_width)
    self.g_proj = (lin(v_width) if output_gate and not gate_out_rank
                   else nnx.Sequential(lin(gate_out_rank), lin(v_width, gate_out_rank)) if output_gate else None)
    self.o_proj = lin(d_model, v_width)
    self.b_proj = lin(n * H)
    self.conv = ShortConv((1 + n) * qk_width + n * v_width, conv_width, dtype=dtype, rngs=rngs)
    if gate == "scalar":
      self.a_proj = lin(H)
    elif gate == "channel":
      self.gate_down = lin(gate_rank)
      self.gate_up = lin(H * K, gate_rank)
    if gate != "none":
      self.A_log = nnx.Param(dt_gate.init_A_log(rngs.params(), (H,), A_init))
      self.dt_bias = nnx.Param(dt_gate.init_dt_bias(rngs.params(), (H,) if gate == "scalar" else (H, K),
                                                    dt_min, dt_max))
    self.out_norm = HeadNorm(H, V, eps=norm_eps)

  @classmethod
  def from_config(cls, cfg, *, rngs: nnx.Rngs) -> "DeltaNet":
    return cls(cfg.d_model, cfg.num_heads, **config_options(cfg), rngs=rngs)

  def init_state(self, batch_size: int, max_len: int = 0) -> dict:
    del max_len
    return {"S": jnp.zeros((batch_size, self.num_heads, self.head_dim, self.value_dim), jnp.float32),
            "conv": self.conv.init_state(batch_size)}

  def state_size(self, seq_len: int = 0) -> int:
    del seq_len
    return self.num_heads * self.head_dim * self.value_dim + self.conv.state_size()

  def log_decay(self, x_BTD) -> jax.Array | None:
    """log α ≤ 0, float32: None (gate 'none'), [B, T, H] ('scalar') or [B, T, H, K] ('channel')."""
    B, T, _ = x_BTD.shape
    if self.gate == "none":
      return None
    if self.gate == "scalar":
      return dt_gate.log_decay(dt_gate.step_size(self.a_proj(x_BTD), self.dt_bias[...]), self.A_log[...])
    a_BTHK = self.gate_up(self.gate_down(x_BTD)).reshape(B, T, self.num_heads, self.head_dim)
    return dt_gate.log_decay(dt_gate.step_size(a_BTHK, self.dt_bias[...]), self.A_log[...][:, None])

  def __call__(self, x_BTD, *, state=None, segment_ids=None):
    B, T, _ = x_BTD.shape
    H, K, V, Hq, n = self.num_heads, self.head_dim, self.value_dim, self.qk_heads, self.householder_steps
    state = state or {}
    qkv_BTC = jnp.concatenate([self.q_proj(x_BTD), self.k_proj(x_BTD), self.v_proj(x_BTD)], axis=-1)
    qkv_BTC, conv_state = self.conv(qkv_BTC, state=state.get("conv"), segment_ids=segment_ids)
    q_BTC, k_BTC, v_BTC = jnp.split(jax.nn.silu(qkv_BTC), [Hq * K, (1 + n) * Hq * K], axis=-1)
    # q/k heads: [B, T, m, Hq, K] -> L2-normalized, each repeated for its H / Hq value heads
    heads = lambda a_BTC, m: jnp.repeat(l2_normalize(a_BTC.reshape(B, T, m, Hq, K)), H // Hq, axis=3)
    q_BTHK, k_BTnHK, v_BTnHV = heads(q_BTC, 1)[:, :, 0], heads(k_BTC, n), v_BTC.reshape(B, T, n, H, V)
    beta_BTnH = jax.nn.sigmoid(self.b_proj(x_BTD).astype(jnp.float32)).reshape(B, T, n, H)
    if self.beta == "2sigmoid":
      beta_BTnH = 2.0 * beta_BTnH
    log_a = self.log_decay(x_BTD)
    reset_BT = segments.reset_log_decay(segment_ids)
    if reset_BT is not None:
      reset = reset_BT[:, :, None] if log_a is None or log_a.ndim == 3 else reset_BT[:, :, None, None]
      log_a = jnp.broadcast_to(reset_BT[:, :, None], (B, T, H)) if log_a is None else log_a + reset
    mode = self.mode if T > 1 else "recurrent"
    # n > 1: the delta rule over T·n steps, token t's n steps consecutive (householder.py).
    o_BTnHV, S = seq_shard.call(
        lambda q, k, v, beta, g, s, seq_axis: ops.delta_rule(
            q, k, v, beta, g, initial_state=s, mode=mode, chunk_size=self.chunk_size, seq_axis=seq_axis),
        (*householder.interleave(q_BTHK, k_BTnHK, v_BTnHV, beta_BTnH, log_a), state.get("S")), "tttttb")
    o_BTHV = householder.last_steps(o_BTnHV, n)
    o_BTD = self.out_norm(o_BTHV).reshape(B, T, H * V)
    if self.g_proj is not None:
      o_BTD = o_BTD * GATE_ACTS[self.gate_act](self.g_proj(x_BTD))
    return self.o_proj(o_BTD), {"S": S, "conv": conv_state}
