"""Slow, obviously-right float64 references (numpy Python loops) for testing the fast ops.

Other ops may add their own references beside their code; this file holds the recurrence's.
"""
import numpy as np


def _alpha(log_decay, shape_BTHK, decay_sign=None) -> np.ndarray:
  """decay_sign · exp(log_decay) broadcast to [B,T,H,K] (log_decay None | [H] | [B,T,H] | [B,T,H,K];
  decay_sign None or ±1 of log_decay's shape)."""
  if log_decay is None:
    return np.ones(shape_BTHK)

  def bthk(x):
    x = np.asarray(x, np.float64)
    return x[None, None, :, None] if x.ndim == 1 else (x[..., None] if x.ndim == 3 else x)

  alpha = np.exp(bthk(log_decay))
  if decay_sign is not None:
    alpha = np.where(bthk(decay_sign) < 0, -alpha, alpha)
  return np.broadcast_to(alpha, shape_BTHK)


def _loop(q, k, v, log_decay, scale, initial_state, write, decay_sign=None):
  """The shared float64 loop: S' = diag(α_t) S_{t-1}, S_t = write(S', k_t, v_t, (b, t, h)), o_t = scale q_t S_t."""
  q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
  B, T, H, K = q.shape
  V = v.shape[-1]
  scale = K ** -0.5 if scale is None else float(scale)
  alpha = _alpha(log_decay, (B, T, H, K), decay_sign)
  s = np.zeros((B, H, K, V)) if initial_state is None else np.array(initial_state, np.float64)
  o = np.zeros((B, T, H, V))
  for t in range(T):
    for b in range(B):
      for h in range(H):
        s[b, h] = write(alpha[b, t, h][:, None] * s[b, h], k[b, t, h], v[b, t, h], (b, t, h))
        o[b, t, h] = scale * q[b, t, h] @ s[b, h]
  return o, s


def linear_recurrence_reference(q, k, v, log_decay=None, *, scale=None, initial_state=None, decay_sign=None):
  """S_t = diag(α_t) S_{t-1} + k_tᵀ v_t, o_t = scale · q_t S_t, one step at a time, with
  α_t = exp(log_decay_t), times decay_sign_t (±1) when given.

  Shapes as `ops.linear_recurrence`: q, k [B,T,H,K], v [B,T,H,V], log_decay None | [H] |
  [B,T,H] | [B,T,H,K] (−inf = reset), decay_sign None or log_decay's shape, initial_state
  [B,H,K,V]. Returns float64 numpy (o [B,T,H,V], S [B,H,K,V]).
  """
  return _loop(q, k, v, log_decay, scale, initial_state, lambda s, k_t, v_t, _: s + np.outer(k_t, v_t),
               decay_sign)


def delta_rule_reference(q, k, v, beta, log_decay=None, *, scale=None, initial_state=None):
  """The delta rule one step at a time: S' = diag(α_t) S_{t-1}, S_t = S' + β_t k_tᵀ (v_t − k_t S'),
  o_t = scale · q_t S_t.

  Shapes as `ops.delta_rule`: q, k [B,T,H,K], v [B,T,H,V], beta [B,T,H], log_decay None | [H] |
  [B,T,H] | [B,T,H,K] (−inf = reset), initial_state [B,H,K,V]. Returns float64 numpy
  (o [B,T,H,V], S [B,H,K,V]).
  """
  beta = np.asarray(beta, np.float64)
  return _loop(q, k, v, log_decay, scale, initial_state,
               lambda s, k_t, v_t, i: s + beta[i] * np.outer(k_t, v_t - k_t @ s))
