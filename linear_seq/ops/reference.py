"""Slow, obviously-right float64 references (numpy Python loops) for testing the fast ops.

Other ops may add their own references beside their code; this file holds the recurrence's.
"""
import numpy as np


def _alpha(log_decay, shape_BTHK) -> np.ndarray:
  """exp(log_decay) broadcast to [B,T,H,K] (log_decay None | [H] | [B,T,H] | [B,T,H,K])."""
  if log_decay is None:
    return np.ones(shape_BTHK)
  ld = np.asarray(log_decay, np.float64)
  if ld.ndim == 1:
    ld = ld[None, None, :, None]
  elif ld.ndim == 3:
    ld = ld[..., None]
  return np.broadcast_to(np.exp(ld), shape_BTHK)


def _loop(q, k, v, log_decay, scale, initial_state, write):
  """The shared float64 loop: S' = diag(α_t) S_{t-1}, S_t = write(S', k_t, v_t, (b, t, h)), o_t = scale q_t S_t."""
  q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
  B, T, H, K = q.shape
  V = v.shape[-1]
  scale = K ** -0.5 if scale is None else float(scale)
  alpha = _alpha(log_decay, (B, T, H, K))
  s = np.zeros((B, H, K, V)) if initial_state is None else np.array(initial_state, np.float64)
  o = np.zeros((B, T, H, V))
  for t in range(T):
    for b in range(B):
      for h in range(H):
        s[b, h] = write(alpha[b, t, h][:, None] * s[b, h], k[b, t, h], v[b, t, h], (b, t, h))
        o[b, t, h] = scale * q[b, t, h] @ s[b, h]
  return o, s


def linear_recurrence_reference(q, k, v, log_decay=None, *, scale=None, initial_state=None):
  """S_t = diag(exp(log_decay_t)) S_{t-1} + k_tᵀ v_t, o_t = scale · q_t S_t, one step at a time.

  Shapes as `ops.linear_recurrence`: q, k [B,T,H,K], v [B,T,H,V], log_decay None | [H] |
  [B,T,H] | [B,T,H,K] (−inf = reset), initial_state [B,H,K,V]. Returns float64 numpy
  (o [B,T,H,V], S [B,H,K,V]).
  """
  return _loop(q, k, v, log_decay, scale, initial_state, lambda s, k_t, v_t, _: s + np.outer(k_t, v_t))


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
