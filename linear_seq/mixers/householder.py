"""DeltaProduct's recurrence (Siems et al. 2025) as the delta rule over a token axis expanded n_h times.

Per token t, n = n_h delta steps j = 0..n−1 with their own key, value and write strength, the decay applied once
before the first step and the query read after the last:

    S_{t,−1} = diag(α_t) S_{t−1}
    S_{t,j}  = (I − β_{t,j} k_{t,j}ᵀ k_{t,j}) S_{t,j−1} + β_{t,j} k_{t,j}ᵀ v_{t,j}        j = 0, …, n−1
    S_t = S_{t,n−1}          o_t = scale · q_t S_t

so the transition of token t is a product of n generalized Householder matrices times diag(α_t), identity
plus rank n instead of DeltaNet's rank 1. It is exactly `ops.delta_rule` run over T·n steps in the order (t, j)
(token t's n steps consecutive), with log α_t at step (t, 0) and 0 at the others, q_t at step (t, n−1) and
0 at the others, and the outputs of the steps (t, n−1) kept (fla's GatedDeltaProduct does the same for its
recurrent form). Every form of the op (chunk, parallel, recurrent, assoc), its decoding state and its
sequence parallelism therefore carry over; a −inf (a document's first token) at step (t, 0) resets the state
before token t's first step. Legend: B batch, T time, n steps per token, H heads, K key dim, V value dim.
"""
import jax
import jax.numpy as jnp

from linear_seq import ops


def interleave(q_BTHK, k_BTnHK, v_BTnHV, beta_BTnH, log_decay=None):
  """The delta rule's inputs over the expanded axis T·n: (q, k, v, beta, log_decay) with q_t at step (t, n−1),
  log α_t ([B, T, H] or [B, T, H, K]) at step (t, 0), zeros elsewhere; log_decay None stays None."""
  B, T, n, H, K = k_BTnHK.shape
  flat = lambda x_BTn: x_BTn.reshape(B, T * n, *x_BTn.shape[3:])   # noqa: E731
  at_step = lambda x_BT, j: jnp.zeros((B, T, n) + x_BT.shape[2:], x_BT.dtype).at[:, :, j].set(x_BT)  # noqa: E731
  q = flat(at_step(q_BTHK, n - 1)) if n > 1 else q_BTHK
  g = None if log_decay is None else (flat(at_step(log_decay, 0)) if n > 1 else log_decay)
  return q, flat(k_BTnHK), flat(v_BTnHV), flat(beta_BTnH), g


def last_steps(o_BTnHV: jax.Array, n: int) -> jax.Array:
  """[B, T·n, H, V] -> [B, T, H, V]: the outputs at each token's last step."""
  B, Tn, H, V = o_BTnHV.shape
  return o_BTnHV.reshape(B, Tn // n, n, H, V)[:, :, -1]


def delta_product(q_BTHK, k_BTnHK, v_BTnHV, beta_BTnH, log_decay=None, *, scale=None, initial_state=None,
                  mode: str = "chunk", chunk_size: int = 64):
  """o [B, T, H, V], S [B, H, K, V] of the recurrence above (shapes of `ops.delta_rule`, with an n axis after
  T for k, v, beta; log_decay None | [B, T, H] | [B, T, H, K], −inf = reset before the token)."""
  n = k_BTnHK.shape[2]
  o, s = ops.delta_rule(*interleave(q_BTHK, k_BTnHK, v_BTnHV, beta_BTnH, log_decay), scale=scale,
                        initial_state=initial_state, mode=mode, chunk_size=chunk_size)
  return last_steps(o, n), s
