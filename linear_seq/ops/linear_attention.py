"""Linear-attention wrappers over `linear_recurrence`: kernelized (seed eq. 6-11), retention, GLA.

All three run S_t = diag(α_t) S_{t−1} + k_tᵀ v_t, o_t = scale · q_t S_t (one `linear_recurrence`
call each) and differ in what q, k, α are; see docs/DESIGN.md. Shapes: q, k [B,T,H,K], v [B,T,H,V];
states float32 [B,H,K',V] (K' = feature dim after the feature map).
"""
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from linear_seq.checks import check_shape, if_concrete
from linear_seq.ops.feature_maps import feature_map as _get_feature_map
from linear_seq.ops.feature_maps import positive_kernel_maps
from linear_seq.ops import seq_parallel
from linear_seq.ops import signed_decay
from linear_seq.ops.recurrence import unchecked_linear_recurrence

_LEGEND = "(q [B,T,H,K], k [B,T,H,K], v [B,T,H,V])"


def _check_qkv(q, k, v):
  if np.ndim(q) != 4:
    raise ValueError(f"q has shape {list(np.shape(q))}, expected [B, T, H, K] {_LEGEND}")
  B, T, H, K = np.shape(q)
  check_shape("k", k, (B, T, H, K), _LEGEND)
  check_shape("v", v, (B, T, H, None), _LEGEND)
  return B, T, H, K


def _check_log_decay(log_decay, B, T, H, Kf):
  shape = tuple(np.shape(log_decay))
  if shape not in ((H,), (B, T, H), (B, T, H, Kf)):
    raise ValueError(f"log_decay has shape {list(shape)}, expected [H], [B,T,H] or [B,T,H,K'] = "
                     f"[{H}], [{B}, {T}, {H}] or [{B}, {T}, {H}, {Kf}] (K' = feature dim)")


def _broadcast_decay(d):
  """A [H] / [B,T,H] / [B,T,H,K'] decay as an array broadcastable against k [B,T,H,K']."""
  return d[:, None] if d.ndim == 1 else (d[..., None] if d.ndim == 3 else d)


def _key_stabilizer(log_phi_k, has_initial_state, reset_BTH, seq_axis=None):
  """Running max m_t = max_{j≤t, d} ℓ(k_j)_d per (b, h) since the last reset, gradient stopped.

  Keys in frame m_t are exp(ℓ(k_t) − m_t); moving the state from frame m_{t−1} to m_t multiplies it
  by exp(m_{t−1} − m_t) ≤ 1 — an extra scalar decay. At a full reset (reset_BTH, where the state
  is cleared anyway) the max restarts, so one document's large keys do not squash the next one's.
  The initial state is in frame 0 (m_{−1} = 0, and m ≥ 0 until the first reset); without one,
  m_{−1} = m_0 (the state is zero anyway). Returns (m [B,T,H], extra log decay [B,T,H] ≤ 0).
  With seq_axis (T split over shards) the (reset seen, max) pair of the shards before this one is
  combined in first, so every shard works in exactly the unsharded frame.
  """
  row_max = jax.lax.stop_gradient(jnp.max(log_phi_k, axis=-1))

  def segmented_max(a, b):  # (reset seen, running max) pairs; associative
    return a[0] | b[0], jnp.where(b[0], b[1], jnp.maximum(a[1], b[1]))

  seen_reset, m = jax.lax.associative_scan(segmented_max, (reset_BTH, row_max), axis=1)
  if seq_axis is not None:
    seen_in, m_in = seq_parallel.segmented_max_in(seen_reset[:, -1], m[:, -1], seq_axis)
    seen_reset, m = segmented_max((seen_in[:, None], m_in[:, None]), (seen_reset, m))
    if has_initial_state:   # the global m just before this shard (0 before shard 0)
      m_before = jnp.where(seen_in, m_in, jnp.maximum(m_in, 0.0))
    else:
      m_before = jnp.where(jax.lax.axis_index(seq_axis) == 0, m[:, 0], m_in)
  if has_initial_state:
    m = jnp.where(seen_reset, m, jnp.maximum(m, 0.0))
    m_before = jnp.zeros_like(m[:, 0]) if seq_axis is None else m_before
  elif seq_axis is None:
    m_before = m[:, 0]
  m_prev = jnp.concatenate([m_before[:, None], m[:, :-1]], axis=1)
  # m only drops at resets, where the total decay is −inf anyway; keep this part ≤ 0.
  return m, jnp.minimum(m_prev - m, 0.0)


def linear_attention(q, k, v, *, feature_map: str | Callable = "elu1", projection=None,
                     normalize: bool = True, log_decay=None, eps: float = 1e-6,
                     scale: float | None = None, initial_state=None, mode: str = "chunk",
                     chunk_size: int = 64, reset=None, seq_axis: str | None = None, decay_sign=None):
  """Kernelized causal linear attention (seed eq. 6-9), optionally decayed (eq. 10-11).

      S_t = α_t S_{t−1} + w_t φ(k_t)ᵀ v_t        z_t = α_t z_{t−1} + w_t φ(k_t)
      o_t = φ(q_t) S_t / (φ(q_t)·z_t + eps)      (normalize=True; `scale` cancels, not applied)
      o_t = scale · φ(q_t) S_t                   (normalize=False; scale default K'**-0.5)

  with α_t = exp(log_decay) and w_t = 1 − α_t (eq. 10-11, elementwise over K' for a vector decay;
  α = 1, w = 1 without log_decay). With normalization and a constant per-head decay the (1 − α)
  factor cancels (up to eps): normalized linear attention with decay α. −inf is a reset (w = 1).
  The numerator and z come from ONE recurrence: v gets a column of ones (V + 1) that is split off.

  Stabilization (normalize=True, maps exp / favor / rbf, which are exp of log-features ℓ):
  queries use φ(q_t)·e^{−max_d ℓ(q_t)_d} (a per-query factor that cancels between numerator and
  denominator); keys use exp(ℓ(k_t) − m_t) with m_t the running max over time and features of
  ℓ(k) since the last full reset, the change of frame folded into the recurrence as an extra
  decay exp(m_{t−1} − m_t). Outputs are then exactly those of the unshifted maps except that eps
  is added to the shifted denominator (whose largest key-feature is 1): nothing overflows, and a
  global offset of q or k (±100, say) changes nothing; underflow drops only terms below e^{−87} of
  the largest shifted one (it matters only if q and k spread over ~80 across features). The returned
  state is converted back to frame 0 (the unshifted S, z; it overflows only where the exact state
  is not representable in float32). With normalize=False nothing cancels and no shift is applied.

  Args:
    q, k: [B, T, H, K]; v: [B, T, H, V].
    feature_map: a name from FEATURE_MAPS, or a callable x -> φ(x) (called with projection= when
      one is given; no stabilization). normalize=True needs a map with φ(x)·φ(y) ≥ 0.
    projection: W [K, m] for the random-feature maps (favor, rbf); rejected for the others.
    log_decay: None | [H] | [B,T,H] | [B,T,H,K'], log α ≤ 0.
    initial_state / returned state: (S [B,H,K',V], z [B,H,K']) float32 when normalize, else S.
    mode, chunk_size: passed to `linear_recurrence`.
    reset: optional bool [B, T], True at the first token of a new document (packed rows): the state
      is cleared before that token (α_t = 0) while its key keeps weight w_t = 1 − α of log_decay
      (1 without log_decay), so an undecayed map stays undecayed between resets.
    seq_axis: None, or a `jax.shard_map` axis splitting T (see `linear_recurrence`); the correction
      from earlier shards enters S and z before the division, and the stabilizer's running key max
      is combined across the shards.
    decay_sign: None, or ±1 with log_decay's shape: α = decay_sign · exp(log_decay) ∈ [−1, 1] and the
      key weight w = 1 − α ∈ [0, 2] (see `linear_recurrence`). normalize=False only: with a negative
      decay the denominator φ(q)·z is no longer positive, so normalize=True rejects it.
  Returns:
    (o [B, T, H, V] in v's dtype, state).
  """
  q, k, v = jnp.asarray(q), jnp.asarray(k), jnp.asarray(v)
  B, T, H, _ = _check_qkv(q, k, v)
  V = v.shape[-1]

  fm = _get_feature_map(feature_map) if isinstance(feature_map, str) else None
  if fm is not None:
    if normalize and not fm.positive_kernel:
      raise ValueError(f"feature map {fm.name!r} can give φ(q)·φ(k) < 0, so normalize=True would "
                       f"divide by a sign-changing sum; use normalize=False (with an output norm) "
                       f"or a map from: {', '.join(positive_kernel_maps())}")
    stabilize = normalize and fm.log_fn is not None
    if stabilize:  # queries: per-row shift; keys: shifted below, once resets are known
      lq = fm.log_features(q, projection)
      phi_q = jnp.exp(lq - jax.lax.stop_gradient(jnp.max(lq, axis=-1, keepdims=True)))
      phi_k = lk = fm.log_features(k, projection)
    else:
      phi_q, phi_k = (fm(x.astype(jnp.float32), projection) for x in (q, k))
  elif callable(feature_map):
    kw = {} if projection is None else dict(projection=projection)
    phi_q, phi_k = jnp.asarray(feature_map(q, **kw)), jnp.asarray(feature_map(k, **kw))
    stabilize = False
  else:
    raise ValueError(f"feature_map must be a name or a callable, got {feature_map!r}")
  Kf = phi_q.shape[-1]
  if phi_k.shape != phi_q.shape or phi_q.ndim != 4 or phi_q.shape[:3] != (B, T, H):
    raise ValueError(f"feature map gave φ(q) {list(phi_q.shape)} and φ(k) {list(phi_k.shape)}; "
                     f"expected both [B, T, H, K'] with B, T, H = {B}, {T}, {H}")

  decay = None  # log α [H] | [B,T,H] | [B,T,H,K'] float32
  full_reset_BTH = jnp.zeros((B, T, H), bool)
  if decay_sign is not None:
    if normalize:
      raise ValueError("decay_sign needs normalize=False: with a negative decay the denominator φ(q)·z "
                       "is no longer positive (use an output norm instead)")
    signed_decay.check_decay_sign(decay_sign, log_decay)
  if log_decay is not None:
    _check_log_decay(log_decay, B, T, H, Kf)
    if_concrete(log_decay, lambda a: np.all(a <= 0),  # NaN fails
                "log_decay must be <= 0 everywhere (decay α = exp(log_decay) in [0, 1]; -inf resets)")
    decay = jnp.asarray(log_decay, jnp.float32)
    full_reset_BTH = jnp.all(jnp.broadcast_to(_broadcast_decay(decay), (B, T, H, Kf)) == -jnp.inf,
                             axis=-1)
  if reset is not None:
    check_shape("reset", reset, (B, T), "(bool, True at a document's first token)")
    full_reset_BTH = full_reset_BTH | jnp.asarray(reset, bool)[..., None]
  if stabilize:
    m_BTH, shift_decay = _key_stabilizer(lk, initial_state is not None, full_reset_BTH, seq_axis)
    phi_k = jnp.exp(lk - m_BTH[..., None])
  if decay is not None and decay_sign is None:
    phi_k = phi_k * -jnp.expm1(_broadcast_decay(decay))  # eq. 10-11: k weighted by 1 − α
  elif decay is not None:   # 1 − α with α = ±e^{log_decay}: −expm1 where α ≥ 0, 1 + e^{·} where α < 0
    d, negative = _broadcast_decay(decay), _broadcast_decay(jnp.asarray(decay_sign)) < 0
    phi_k = phi_k * jnp.where(negative, 1.0 + jnp.exp(d), -jnp.expm1(d))
  if stabilize:
    decay = shift_decay if decay is None else _add_decays(decay, shift_decay)
  if reset is not None:
    reset_BTH = jnp.broadcast_to(jnp.where(jnp.asarray(reset, bool), -jnp.inf, 0.0)[..., None],
                                 (B, T, H))
    decay = reset_BTH if decay is None else _add_decays(decay, reset_BTH)

  # float32 features and values: the recurrence accumulates in float32 anyway.
  phi_q, phi_k, v32 = phi_q.astype(jnp.float32), phi_k.astype(jnp.float32), v.astype(jnp.float32)
  if not normalize:
    if initial_state is not None:
      check_shape("initial_state", initial_state, (B, H, Kf, V), "S [B,H,K',V] (normalize=False)")
    o, S = unchecked_linear_recurrence(phi_q, phi_k, v32, decay, scale=scale, initial_state=initial_state,
                                       mode=mode, chunk_size=chunk_size, seq_axis=seq_axis,
                                       decay_sign=decay_sign)
    return o.astype(v.dtype), S

  S0 = None
  if initial_state is not None:
    if not (isinstance(initial_state, (tuple, list)) and len(initial_state) == 2):
      raise ValueError("initial_state must be the pair (S [B,H,K',V], z [B,H,K']) when "
                       "normalize=True")
    check_shape("initial_state S", initial_state[0], (B, H, Kf, V), "[B,H,K',V]")
    check_shape("initial_state z", initial_state[1], (B, H, Kf), "[B,H,K']")
    S0 = jnp.concatenate([jnp.asarray(initial_state[0], jnp.float32),
                          jnp.asarray(initial_state[1], jnp.float32)[..., None]], axis=-1)
  v1 = jnp.concatenate([v32, jnp.ones((B, T, H, 1), jnp.float32)], axis=-1)
  o1, S1 = unchecked_linear_recurrence(phi_q, phi_k, v1, decay, scale=1.0, initial_state=S0, mode=mode,
                                       chunk_size=chunk_size, seq_axis=seq_axis)
  o = o1[..., :V] / (o1[..., V:] + eps)
  if stabilize:
    m_last = m_BTH[:, -1] if seq_axis is None else seq_parallel.from_last_shard(m_BTH[:, -1], seq_axis)
    S1 = S1 * jnp.exp(m_last)[:, :, None, None]  # back to frame 0
  return o.astype(v.dtype), (S1[..., :V], S1[..., V])


def _add_decays(decay, shift_decay_BTH):
  """Sum of a user decay ([H] / [B,T,H] / [B,T,H,K']) and the key-stabilizer decay [B,T,H]."""
  if decay.ndim == 4:
    return decay + shift_decay_BTH[..., None]
  return decay + shift_decay_BTH  # [H] broadcasts over [B,T,H]


def retention(q, k, v, gamma, *, scale: float | None = None, initial_state=None,
              mode: str = "chunk", chunk_size: int = 64, seq_axis: str | None = None, decay_sign=None):
  """Retention (RetNet): S_t = γ_h S_{t−1} + k_tᵀ v_t, o_t = scale · q_t S_t.

  gamma: [H], each in (0, 1) (checked when concrete; under jit the check is skipped).
  seq_axis: None or a `jax.shard_map` axis splitting T (see `linear_recurrence`).
  decay_sign: None or ±1 [H]: the decay is decay_sign · γ_h ∈ (−1, 1) (see `linear_recurrence`).
  Returns (o [B,T,H,V], S [B,H,K,V] float32).
  """
  _, _, H, _ = _check_qkv(q, k, v)
  check_shape("gamma", gamma, (H,), "(one decay per head)")
  if_concrete(gamma, lambda g: np.all((g > 0) & (g < 1)),
              lambda g: f"gamma must lie in (0, 1) for every head, got {g.astype(np.float64).tolist()}")
  if decay_sign is not None:
    signed_decay.check_decay_sign(decay_sign, gamma, "gamma")
  log_decay = jnp.log(jnp.asarray(gamma, jnp.float32))
  return unchecked_linear_recurrence(q, k, v, log_decay, scale=scale, initial_state=initial_state,
                                     mode=mode, chunk_size=chunk_size, seq_axis=seq_axis,
                                     decay_sign=decay_sign)


def gated_linear_attention(q, k, v, log_forget, *, scale: float | None = None,
                           initial_state=None, mode: str = "chunk", chunk_size: int = 64,
                           seq_axis: str | None = None, decay_sign=None):
  """GLA: S_t = diag(α_t) S_{t−1} + k_tᵀ v_t, o_t = scale · q_t S_t, α_t = exp(log_forget_t).

  log_forget: [B,T,H,K] (a gate per key dim) or [B,T,H] (scalar per head), ≤ 0; −inf resets.
  Checked ≤ 0 when concrete. seq_axis: None or a `jax.shard_map` axis splitting T (see
  `linear_recurrence`). decay_sign: None or ±1 with log_forget's shape: α_t = decay_sign ·
  exp(log_forget_t) ∈ [−1, 1] (see `linear_recurrence`). Returns (o [B,T,H,V], S [B,H,K,V] float32).
  """
  B, T, H, K = _check_qkv(q, k, v)
  shape = tuple(np.shape(log_forget))
  if shape not in ((B, T, H, K), (B, T, H)):
    raise ValueError(f"log_forget has shape {list(shape)}, expected [B,T,H,K] = {[B, T, H, K]} "
                     f"or [B,T,H] = {[B, T, H]}")
  if_concrete(log_forget, lambda a: np.all(a <= 0),
              "log_forget must be <= 0 everywhere (a forget gate in [0, 1]; -inf resets)")
  if decay_sign is not None:
    signed_decay.check_decay_sign(decay_sign, log_forget, "log_forget")
  return unchecked_linear_recurrence(q, k, v, log_forget, scale=scale, initial_state=initial_state,
                                     mode=mode, chunk_size=chunk_size, seq_axis=seq_axis,
                                     decay_sign=decay_sign)
