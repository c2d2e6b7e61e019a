"""Signed decays α_t ∈ [−1, 1] for the diagonal recurrence, by running signs folded into q and k.

With α_t = σ_t·|α_t| (σ_t = ±1 per head, or per key channel for a vector gate), let P_t = Π_{l≤t} σ_l be
the running sign (P_{−1} = 1) and S̃_t = diag(P_t) S_t. Since P_t = σ_t P_{t−1} and σ_t² = 1,

    S̃_t = diag(|α_t|) S̃_{t−1} + (P_t ⊙ k_t)ᵀ v_t        o_t = scale · (P_t ⊙ q_t) S̃_t        S̃_{−1} = S_{−1}

and S_{T−1} = diag(P_{T−1}) S̃_{T−1}: the signed recurrence IS the unsigned one (log |α|) run on sign-flipped
q and k, then one sign flip of the final state. For any range, P_t P_s = Π_{s<l≤t} σ_l = (−1)^(number of
negative factors in (s, t]), so every form's "each exponent is a sum over exactly its own range" holds
unchanged: the magnitudes go through the same code, and a sign flip is exact in floating point. P_t is a
parity (an XOR scan of the negative-factor indicators): exact, no products of floats.

With T split over a `shard_map` axis, the parity entering a shard is the XOR of the earlier shards' totals
(`seq_parallel.parity_before`), so each shard folds exactly the global running sign.

A learned gate α = f(x) that can land exactly on 0 (e.g. 2σ(x) − 1 at x = 0) cannot get its gradient through
log |α| = −inf (the op's gradient wrt log |α| is then α · ∂L/∂α = 0, and ∂ log|α|/∂α = ∞): `signed_log_decay`
floors |α| at TINY = 2⁻⁶⁴ and differentiates log |α| as 1/(σ·max(|α|, TINY)). Every output is affine in
each single α_t, so the op's gradient wrt log |α_t| at |α_t| = TINY is TINY · ∂L/∂α_t up to a relative
O(TINY), and the chain rule returns ∂L/∂α_t itself: finite, and the float64 linear-space reference's.
The values differ from α_t = 0 by terms of relative size ≤ 2⁻⁶⁴ (invisible in float32); an exact reset is
still log_decay = −inf.
"""
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from linear_seq import checks
from linear_seq.ops import seq_parallel

TINY = 2.0 ** -64   # |α| floor of signed_log_decay: log TINY ≈ −44.4; a power of two, so 1/TINY is exact


def check_decay_sign(decay_sign, log_decay, name: str = "log_decay") -> None:
  """decay_sign must have log_decay's shape and hold −1, 0 or +1 (0: α = 0, no sign; read as +1)."""
  if log_decay is None:
    raise ValueError(f"decay_sign was given without {name}: the sign goes with log |α| = {name}")
  if tuple(np.shape(decay_sign)) != tuple(np.shape(log_decay)):
    raise ValueError(f"decay_sign has shape {list(np.shape(decay_sign))}, expected {name}'s shape "
                     f"{list(np.shape(log_decay))} (the sign of each decay α, −1 or +1)")
  checks.if_concrete(decay_sign, lambda s: np.all((s == -1) | (s == 0) | (s == 1)),  # NaN fails
                     _decay_sign_message)


def _decay_sign_message(s: np.ndarray) -> str:
  bad = s[~((s == -1) | (s == 0) | (s == 1))]
  return (f"decay_sign must be −1 or +1 (0 allowed where α = 0), got {bad.ravel()[:3].tolist()}"
          f"{' …' if bad.size > 3 else ''}")


def running_parity(decay_sign_BTHk, seq_axis=None):
  """P_t < 0 as bool [B,T,H,k]: an odd number of negative factors in [0, t] (from the global start)."""
  neg = jnp.asarray(decay_sign_BTHk) < 0
  parity = lax.associative_scan(jnp.not_equal, neg, axis=1)   # inclusive XOR scan
  if seq_axis is not None:
    parity = parity != seq_parallel.parity_before(parity[:, -1], seq_axis)[:, None]
  return parity


def fold(q_BTHK, k_BTHK, parity_BTHk):
  """(P ⊙ q, P ⊙ k): the sign flips (exact) that turn the signed recurrence into the unsigned one."""
  p = jnp.where(parity_BTHk, -1.0, 1.0).astype(q_BTHK.dtype)
  return q_BTHK * p, k_BTHK * p


def unfold_state(s_BHKV, parity_BTHk, seq_axis=None):
  """S_{T−1} = diag(P_{T−1}) S̃_{T−1}; with seq_axis, P_{T−1} of the last shard (replicated)."""
  last_BHk = jnp.where(parity_BTHk[:, -1], -1.0, 1.0).astype(s_BHKV.dtype)
  if seq_axis is not None:
    last_BHk = seq_parallel.from_last_shard(last_BHk, seq_axis)
  return s_BHKV * last_BHk[..., None]


@jax.custom_jvp
def _log_abs(alpha):
  return jnp.log(jnp.maximum(jnp.abs(alpha), TINY))


@_log_abs.defjvp
def _log_abs_jvp(primals, tangents):
  (alpha,), (d_alpha,) = primals, tangents
  signed_magnitude = jnp.where(alpha < 0, -1.0, 1.0).astype(alpha.dtype) * jnp.maximum(jnp.abs(alpha), TINY)
  return _log_abs(alpha), d_alpha / signed_magnitude


def signed_log_decay(alpha):
  """(log_decay, decay_sign) = (log max(|α|, 2⁻⁶⁴), sign α with sign 0 = +1) for the ops' signed decays.

  alpha: any shape, values in [−1, 1] (checked when concrete). Differentiable in alpha, including at
  α = 0 exactly (see the module docstring: the gradient is ∂L/∂α of the linear-space recurrence).
  """
  checks.if_concrete(alpha, lambda a: np.all(np.abs(a) <= 1),   # NaN fails
                     lambda a: ("alpha contains NaN; expected decays in [−1, 1]" if np.any(np.isnan(a)) else
                                f"alpha must lie in [−1, 1]; max |α| is {float(np.max(np.abs(a)))}"))
  alpha = jnp.asarray(alpha)
  if not jnp.issubdtype(alpha.dtype, jnp.floating):
    alpha = alpha.astype(jnp.float32)
  sign = lax.stop_gradient(jnp.where(alpha < 0, -1.0, 1.0).astype(alpha.dtype))
  return _log_abs(alpha), sign
