"""Exact sequence parallelism for the delta rule: (M_r, S̃_r) pairs over the shards of a mesh axis.

The delta rule's state transition is a K×K matrix, A_t = (I − β_t k_tᵀk_t) diag(α_t), so a shard's effect on
the state entering it is S_out = M_r S_in + S̃_r with M_r = A_T⋯A_1 (its transition product, per head) and S̃_r
its final state from zero. For fixed q, k, β, α the op is linear in (v, S_in) jointly, so one run of any form
on the augmented values [v | 0] from the augmented state [0 | I] gives at once

    [õ | q̃]  (õ_t the outputs from zero, q̃_t = q_t A_t⋯A_1 the map of S_in into o_t),
    [S̃ | M]  (the final state from zero, and the transition product M_r),

the zero columns costing K extra value columns of the same chunk solve (the WY/UT inverse is shared).
Then, inside `jax.shard_map` over `axis`:
  1. all-gather (M_r, S̃_r) (K×(K+V) per device, independent of T);
  2. exclusive prefix composed as (M₂M₁, M₂S₁ + S₂): S_in,0 = initial_state (or 0), S_in,r = M_{r−1} S_in,r−1
     + S̃_{r−1};
  3. o_t = õ_t + q̃_t S_in,r and S_out,r = S̃_r + M_r S_in,r, in float32 before any output cast.
A reset (log α = −inf, clamped to recurrence.LOG_DECAY_FLOOR) makes e^{b} exactly 0 from it on, so M_r
and the q̃_t after it are exactly 0 (a reset at a shard's first token makes S_in,r irrelevant, exactly). The final
state after the last shard is returned replicated by an explicit reduction (seq_parallel.from_last_shard).
Gradients come from autodiff through the collectives: no hand-written reverse pass.
"""
from typing import Callable

import jax.numpy as jnp
from jax import lax

from linear_seq.ops import seq_parallel


def run(form: Callable, q_BTHK, k_BTHK, v_BTHV, beta_BTH, g_BTHk, s0_BHKV, axis: str):
  """A delta-rule form `form(q, k, v, beta, g, s0) -> (o, S)` made exact across the shards of `axis`.

  Same inputs as the forms (float32, scale in q, g None | [B,T,H,1] | [B,T,H,K] clamped finite), T being the
  shard's block. Returns (o [B,T,H,V] for the block, S after the last shard [B,H,K,V], replicated).
  """
  B, _, H, K = k_BTHK.shape
  V = v_BTHV.shape[-1]
  zeros_BTHK = jnp.zeros_like(k_BTHK) + k_BTHK[:, :0].sum(axis=1, keepdims=True)   # per-shard exact zeros
  v_aug = jnp.concatenate([v_BTHV, zeros_BTHK], axis=-1)
  eye_BHKK = jnp.broadcast_to(jnp.eye(K, dtype=k_BTHK.dtype), (B, H, K, K))
  s0_aug = seq_parallel.initial_carry(
      jnp.concatenate([jnp.zeros((B, H, K, V), k_BTHK.dtype), eye_BHKK], axis=-1), k_BTHK, v_aug)
  o_aug, s_aug = form(q_BTHK, k_BTHK, v_aug, beta_BTH, g_BTHk, s0_aug)
  o_BTHV, qin_BTHK = o_aug[..., :V], o_aug[..., V:]
  s_BHKV, m_BHKK = s_aug[..., :V], s_aug[..., V:]

  R, r = lax.axis_size(axis), lax.axis_index(axis)
  s_RBHKV, m_RBHKK = lax.all_gather(s_BHKV, axis), lax.all_gather(m_BHKK, axis)
  s = jnp.zeros_like(s_BHKV) if s0_BHKV is None else s0_BHKV
  s_in = []
  for j in range(R):   # exclusive prefix over the (few) shards: R·K²·V work per device
    s_in.append(s)
    s = jnp.einsum("bhij,bhjv->bhiv", m_RBHKK[j], s) + s_RBHKV[j]
  s_in_BHKV = lax.dynamic_index_in_dim(jnp.stack(s_in), r, keepdims=False)
  o_BTHV = o_BTHV + jnp.einsum("bthk,bhkv->bthv", qin_BTHK, s_in_BHKV)
  s_out_BHKV = s_BHKV + jnp.einsum("bhij,bhjv->bhiv", m_BHKK, s_in_BHKV)
  return o_BTHV, seq_parallel.from_last_shard(s_out_BHKV, axis)
