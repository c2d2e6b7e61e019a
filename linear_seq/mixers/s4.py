"""S4D (Gu et al. 2022): per-channel diagonal complex state-space systems with learned step sizes."""
import math

import jax
import jax.numpy as jnp
from flax import nnx

from linear_seq import ops
from linear_seq.mixers import modes, segments, seq_shard
from linear_seq.checks import check_choice

S4_INITS = ("lin", "inv")


def init_A(state_size: int, kind: str) -> tuple[jax.Array, jax.Array]:
  """(Re A, Im A) [N] of S4D-Lin (−½ + iπn) or S4D-Inv (−½ + i N/π (N/(2n+1) − 1))."""
  check_choice("s4 init", kind, S4_INITS)
  n = jnp.arange(state_size, dtype=jnp.float32)
  im = math.pi * n if kind == "lin" else state_size / math.pi * (state_size / (2 * n + 1) - 1)
  return jnp.full((state_size,), -0.5, jnp.float32), im


class S4D(nnx.Module):
  """y = GLU(W_o GELU(SSM(x))), one SISO diagonal system per channel (d_model channels).

  Per channel h: x'(t) = A_h x + B u, y = 2·Re(C_h x) + D_h u with A_h = −exp(log_A_real) + i A_imag [N]
  (one of each conjugate pair kept, hence the 2·Re, folded into C), B = 1 (fixed; C absorbs it),
  C complex ~ N(0, 1), learned log Δ_h (log-uniform in [dt_min, dt_max] at init), ZOH or bilinear
  discretization (`ops.discretize_diagonal`), then `ops.ssm_diag_channels`: the FFT convolution for
  training (mode 'fft'), the scan for one-token decoding.
  Document boundaries: the FFT form cannot reset the state, so with segment_ids the layer runs the
  chunkwise form instead of the FFT (or the scan / assoc form, if mode says so) with the state zeroed at
  every document's first token (exact). On one CPU core at the LM's B=32, T=128, D=128, N=64 a layer's
  gradient takes ~16 ms by FFT (no resets), ~310 ms chunkwise and ~910 ms by scan (with resets;
  experiments/benchmark/s4_packed_rows.py). Pass segment_ids=None for rows that hold one document to
  keep the FFT.
  State: x [B, d_model, N] complex64. Parameters `log_A_real`, `A_imag`, `log_dt` are the 'ssm' group.
  """

  def __init__(self, d_model: int, *, state_size: int = 64, init: str = "lin",
               discretization: str = "zoh", dt_min: float = 1e-3, dt_max: float = 1e-1,
               mode: str = "", dtype=jnp.float32, rngs: nnx.Rngs):
    check_choice("discretization", discretization, ops.DISCRETIZE_METHODS)
    self.mode = mode or "fft"
    check_choice("s4 mode", self.mode, ops.SSM_MODES)
    if not 0 < dt_min <= dt_max:
      raise ValueError(f"need 0 < dt_min <= dt_max, got dt_min={dt_min}, dt_max={dt_max}")
    self.d_model, self.state_size_n, self.dtype = d_model, state_size, dtype
    self.discretization = discretization
    re, im = init_A(state_size, init)
    self.log_A_real = nnx.Param(jnp.log(-jnp.broadcast_to(re, (d_model, state_size))))
    self.A_imag = nnx.Param(jnp.broadcast_to(im, (d_model, state_size)))
    self.C = nnx.Param(jax.random.normal(rngs.params(), (d_model, state_size, 2), jnp.float32)
                       * math.sqrt(0.5))
    self.log_dt = nnx.Param(jax.random.uniform(
        rngs.params(), (d_model,), jnp.float32, math.log(dt_min), math.log(dt_max)))
    self.D = nnx.Param(jax.random.normal(rngs.params(), (d_model,), jnp.float32))
    self.out_proj = nnx.Linear(d_model, 2 * d_model, dtype=dtype, rngs=rngs)

  @classmethod
  def from_config(cls, cfg, *, rngs: nnx.Rngs) -> "S4D":
    return cls(cfg.d_model, state_size=cfg.state_size, init=cfg.s4_init,
               discretization=cfg.discretization, dt_min=cfg.dt_min, dt_max=cfg.dt_max,
               mode=modes.ssm_mode(cfg.mode),
               dtype=cfg.compute_dtype, rngs=rngs)

  def init_state(self, batch_size: int, max_len: int = 0) -> jax.Array:
    del max_len
    return jnp.zeros((batch_size, self.d_model, self.state_size_n), jnp.complex64)

  def state_size(self, seq_len: int = 0) -> int:
    """Floats per sequence: d_model × N complex numbers = 2 floats each."""
    del seq_len
    return 2 * self.d_model * self.state_size_n

  def discrete_system(self) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(Ab, Bb, C·2) [d_model, N] complex64."""
    A = jax.lax.complex(-jnp.exp(self.log_A_real[...]), self.A_imag[...])
    dt = jnp.exp(self.log_dt[...])[:, None]
    Ab, Bb = ops.discretize_diagonal(A, jnp.ones_like(A), dt, method=self.discretization)
    C = 2.0 * jax.lax.complex(self.C[..., 0], self.C[..., 1])
    return Ab, Bb, C

  def __call__(self, x_BTD, *, state=None, segment_ids=None):
    T = x_BTD.shape[1]
    Ab, Bb, C = self.discrete_system()
    mode = self.mode if T > 1 else "scan"
    D = self.D[...]

    def run(mode, reset=None):
      def op(x, Ab, Bb, C, D, s, r, seq_axis):
        if seq_axis is not None:
          raise ValueError("the s4 mixer is not sequence-local: it needs mesh.seq = 1")
        return ops.ssm_diag_channels(x, Ab, Bb, C, D, mode=mode, initial_state=s, reset=r)
      # Under data parallelism the op runs per data shard (no activation traffic: GSPMD all-gathers the FFT).
      return seq_shard.call(op, (x_BTD, Ab, Bb, C, D, state, reset), "trrrrbt")

    if segment_ids is None:
      y_BTD, state = run(mode)
    else:
      # The FFT form cannot reset the state at a document boundary: packed rows run the chunkwise form (or
      # the scan / assoc, if chosen) with the state zeroed at every document's first token. (A run-time
      # `lax.cond` between FFT and scan was measured slower under autodiff than the scan alone.)
      y_BTD, state = run("chunk" if mode == "fft" else mode, reset=segments.boundaries(segment_ids))
    y_BTD = jax.nn.gelu(y_BTD)
    a_BTD, b_BTD = jnp.split(self.out_proj(y_BTD), 2, axis=-1)
    return a_BTD * jax.nn.sigmoid(b_BTD), state
