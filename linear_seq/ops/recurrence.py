"""The linear recurrence behind every linear mixer, in four computation forms.

    S_t = diag(α_t) S_{t-1} + k_tᵀ v_t,      o_t = scale · q_t S_t,      S_{-1} = initial_state

Legend (docs/DESIGN.md): B batch, T time, H heads, K key dim, V value dim. `log_decay` is log α_t ≤ 0;
−inf at a position is an exact state reset (a document boundary in a packed sequence). With `decay_sign`
(±1, log_decay's shape) the decay is α_t = decay_sign · exp(log_decay) ∈ [−1, 1]: the running signs are
folded into q and k (signed_decay.py) and every form runs unchanged on the magnitudes.

This module holds the public dispatcher, input validation, and the `recurrent` (lax.scan) and
`assoc` (lax.associative_scan) forms. `parallel` (masked T×T) lives in parallel.py, `chunk`
(chunkwise-parallel, the training path) in chunk.py.
"""
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from linear_seq import checks
from linear_seq.ops import chunk as chunk_lib
from linear_seq.ops import implementation as implementation_lib
from linear_seq.ops import parallel as parallel_lib
from linear_seq.ops import seq_parallel
from linear_seq.ops import signed_decay

MODES = ("recurrent", "parallel", "chunk", "assoc")

# log α is clamped to this floor: exp of any sum that contains it is exactly 0 in float32 (an exact
# reset), and it keeps −inf out of the arithmetic so no NaN (−inf − −inf, 0·−inf) can reach values
# or gradients. Its gradient is 0, the same as d exp(g)/dg at g = −inf.
LOG_DECAY_FLOOR = -1e4


def _gate(log_decay, B: int, T: int, H: int, K: int, dtype=jnp.float32, floor=LOG_DECAY_FLOOR,
          name="log_decay"):
  """Checks log_decay's shape; returns g [B,T,H,1] (fixed or scalar) or [B,T,H,K] in dtype, or None.
  (Also shapes decay_sign, with floor=None.)"""
  if log_decay is None:
    return None
  shape = tuple(np.shape(log_decay))
  if shape not in ((H,), (B, T, H), (B, T, H, K)):
    raise ValueError(
        f"{name} has shape {list(shape)}, expected [H]=[{H}] (fixed per head), "
        f"[B, T, H]=[{B}, {T}, {H}] (scalar gate) or [B, T, H, K]=[{B}, {T}, {H}, {K}] (vector gate)")
  g = jnp.asarray(log_decay).astype(dtype)
  if floor is not None:
    g = jnp.maximum(g, floor)
  if g.ndim == 1:
    g = jnp.broadcast_to(g[None, None, :, None], (B, T, H, 1))
  elif g.ndim == 3:
    g = g[..., None]
  return g


def _validate(q, k, v, initial_state, mode, chunk_size):
  checks.check_choice("mode", mode, MODES)
  checks.check_positive_int("chunk_size", chunk_size)
  if np.ndim(q) != 4:
    raise ValueError(f"q has shape {list(np.shape(q))}, expected 4 dims [B, T, H, K]")
  B, T, H, K = np.shape(q)
  checks.check_shape("k", k, (B, T, H, K), "[B, T, H, K] (same as q)")
  checks.check_shape("v", v, (B, T, H, None), "[B, T, H, V] (B, T, H as q)")
  V = np.shape(v)[-1]
  if initial_state is not None:
    checks.check_shape("initial_state", initial_state, (B, H, K, V), "[B, H, K, V]")
  return B, T, H, K, V


def linear_recurrence(q, k, v, log_decay=None, *, scale: Optional[float] = None,
                      initial_state=None, mode: str = "chunk", chunk_size: int = 64,
                      seq_axis: Optional[str] = None, decay_sign=None, implementation: Optional[str] = None):
  """Runs S_t = diag(α_t) S_{t-1} + k_tᵀ v_t, o_t = scale · q_t S_t over t = 0..T-1.

  Args:
    q, k: [B, T, H, K].  v: [B, T, H, V].
    log_decay: log α_t ≤ 0: None (α = 1), [H] fixed per head, [B, T, H] scalar gate, or
      [B, T, H, K] vector gate (diag(α_t) over K). −inf is an exact reset.
    scale: multiplies q S; None means K**-0.5.
    initial_state: [B, H, K, V] state before t = 0 (zeros if None); differentiable.
    mode: 'recurrent' (lax.scan; decode), 'parallel' (masked T×T), 'chunk' (chunkwise-parallel;
      training), 'assoc' (lax.associative_scan). All agree to float32 rounding.
    chunk_size: chunk length C for mode='chunk'; any T works (padded internally).
    seq_axis: None, or the name of a `jax.shard_map` mesh axis that splits T (shard r holds the r-th
      contiguous block; all inputs are the shard's block): each shard gets exactly the unsharded op's
      outputs for its block, the returned state is the one after the last shard (replicated, so
      out_specs=P() works) and initial_state is the state before shard 0 (see seq_parallel.py).
    decay_sign: None (α ≥ 0), or the sign of each decay, −1 or +1, with log_decay's shape: then
      α_t = decay_sign · exp(log_decay) ∈ [−1, 1] (0 allowed where α = 0; `signed_log_decay(α)` makes
      both from α, differentiably at α = 0). Exact in every form and under seq_axis; no gradient.
    implementation: None / 'auto' (the backend's, ops/implementation.py) or 'xla' (the forms here).

  Returns:
    o [B, T, H, V] in the inputs' dtype, and the final state S_{T-1} [B, H, K, V] float32.
    States and cumulative log decays are accumulated in float32 whatever the input dtype
    (float64 inputs under jax_enable_x64 stay float64, for references).
    With bf16 q, k, v the chunk and parallel forms' large products take bf16 operands with float32
    accumulation (ops/precision.py; chunk.py's and parallel.py's docstrings list them).
  """
  if log_decay is not None:
    checks.if_concrete(log_decay, lambda a: np.all(a <= 0), _log_decay_message)  # NaN fails too
  if decay_sign is not None:
    signed_decay.check_decay_sign(decay_sign, log_decay)
  implementation_lib.resolve(implementation)  # 'xla' on every backend today (ops/implementation.py)
  return unchecked_linear_recurrence(q, k, v, log_decay, scale=scale, initial_state=initial_state, mode=mode,
                                     chunk_size=chunk_size, seq_axis=seq_axis, decay_sign=decay_sign)


def _log_decay_message(a: np.ndarray) -> str:
  if np.any(np.isnan(a)):
    return "log_decay contains NaN; expected log α ≤ 0 (−inf for a reset)"
  return f"log_decay must be ≤ 0 (decay α = exp(log_decay) in [0, 1]); max is {float(a.max())}"


def unchecked_linear_recurrence(q, k, v, log_decay=None, *, scale: Optional[float] = None,
                                initial_state=None, mode: str = "chunk", chunk_size: int = 64,
                                seq_axis: Optional[str] = None, decay_sign=None):
  """linear_recurrence without the check of log_decay's and decay_sign's values (shapes are still checked),
  for the wrappers in linear_attention.py, which check their own decays once, with their own names.
  decay_sign may have any of log_decay's allowed shapes here; the two broadcast together."""
  B, T, H, K, V = _validate(q, k, v, initial_state, mode, chunk_size)
  out_dtype = jnp.result_type(q, k, v)
  acc = jnp.promote_types(out_dtype, jnp.float32)   # float32, or float64 under x64 in tests
  # Narrower inputs (bf16): the chunk and parallel forms' large products take them as operands, accumulating
  # in float32.
  operand = out_dtype if jnp.issubdtype(out_dtype, jnp.floating) and jnp.finfo(out_dtype).bits < 32 else None
  g = _gate(log_decay, B, T, H, K, acc)
  if scale is None:
    scale = K ** -0.5
  cast = lambda x: jnp.asarray(x).astype(acc)
  q, k, v = cast(q) * scale, cast(k), cast(v)
  s0 = None if initial_state is None else cast(initial_state)
  parity = None
  if decay_sign is not None:   # fold the running signs into q and k: the forms see |α| only
    sign = _gate(decay_sign, B, T, H, K, acc, floor=None, name="decay_sign")
    shape = jnp.broadcast_shapes(g.shape, sign.shape)
    g, sign = jnp.broadcast_to(g, shape), jnp.broadcast_to(sign, shape)
    parity = signed_decay.running_parity(sign, seq_axis)
    q, k = signed_decay.fold(q, k, parity)
  form = {"recurrent": recurrent, "assoc": assoc, "parallel": lambda *a: parallel_lib.parallel(*a, operand),
          "chunk": lambda *a: chunk_lib.chunk(*a, chunk_size, operand)}[mode]
  if seq_axis is None:
    o, s = form(q, k, v, g, s0)
  else:
    o, s = seq_parallel.run(form, q, k, v, g, s0, seq_axis)
  if parity is not None:
    s = signed_decay.unfold_state(s, parity, seq_axis)
  return o.astype(out_dtype), s


def recurrent(q_BTHK, k_BTHK, v_BTHV, g_BTHk, s0_BHKV):
  """lax.scan over time (float32 in, scale already in q). g: None, [B,T,H,1] or [B,T,H,K]."""
  s = seq_parallel.initial_carry(s0_BHKV, k_BTHK, v_BTHV)
  tm = lambda x: jnp.moveaxis(x, 1, 0)
  xs = (tm(q_BTHK), tm(k_BTHK), tm(v_BTHV), None if g_BTHk is None else tm(jnp.exp(g_BTHk)))

  def step(s_BHKV, x):
    q_BHK, k_BHK, v_BHV, a_BHk = x
    if a_BHk is not None:
      s_BHKV = a_BHk[..., None] * s_BHKV
    s_BHKV = s_BHKV + k_BHK[..., :, None] * v_BHV[..., None, :]
    o_BHV = jnp.einsum("bhk,bhkv->bhv", q_BHK, s_BHKV)
    return s_BHKV, o_BHV

  s, o_TBHV = jax.lax.scan(step, s, xs)
  return jnp.moveaxis(o_TBHV, 0, 1), s


def assoc(q_BTHK, k_BTHK, v_BTHV, g_BTHk, s0_BHKV):
  """lax.associative_scan over (α_t, k_tᵀ v_t) with (a1, u1)∘(a2, u2) = (a1 a2, a2 u1 + u2).

  Materializes every S_t: O(T·K·V) memory, O(log T) depth. The initial state is folded into
  the first element: u_0 ← α_0 S_{-1} + k_0ᵀ v_0.
  """
  u_BTHKV = k_BTHK[..., :, None] * v_BTHV[..., None, :]
  if s0_BHKV is not None:
    first = s0_BHKV if g_BTHk is None else jnp.exp(g_BTHk[:, 0])[..., None] * s0_BHKV
    u_BTHKV = u_BTHKV.at[:, 0].add(first)
  if g_BTHk is None:   # not jnp.cumsum: on CPU that is an O(T²) reduce_window (3× slower at T=2048)
    s_BTHKV = jax.lax.associative_scan(jnp.add, u_BTHKV, axis=1)
  else:
    a_BTHk1 = jnp.exp(g_BTHk)[..., None]

    def combine(x, y):
      a1, u1 = x
      a2, u2 = y
      return a1 * a2, a2 * u1 + u2

    _, s_BTHKV = jax.lax.associative_scan(combine, (a_BTHk1, u_BTHKV), axis=1)
  o_BTHV = jnp.einsum("bthk,bthkv->bthv", q_BTHK, s_BTHKV)
  return o_BTHV, s_BTHKV[:, -1]
