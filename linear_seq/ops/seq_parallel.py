"""Exact sequence parallelism for the diagonal recurrences (LASP-2's state all-gather).

Inside `jax.shard_map`, with T split over the mesh axis `axis` (shard r holds the r-th contiguous block):

  1. each shard runs its block from a zero state (any mode): outputs õ_t and final state S̃_r, and its total
     log decay a_r = Σ_t g_t (per head, or per K channel);
  2. (S̃_r, a_r) are all-gathered (one K×V state per device, independent of T);
  3. an exclusive prefix gives the state entering shard r:
        S_in,0 = initial_state (or 0),   S_in,r = diag(e^{a_{r−1}}) S_in,r−1 + S̃_{r−1};
  4. each shard adds the contribution of S_in,r in float32:  o_t = õ_t + (q_t ⊙ e^{b_t}) S_in,r  with
     b_t = Σ_{l≤t} g_l from the shard's start (inclusive of t; an associative scan of same-sign terms, so
     e^{b_t} is exact to rounding however strong the gates, and a reset makes it exactly 0).

The final state (after the last shard) is returned replicated through an explicit reduction: the psum of the
last shard's state and zeros elsewhere (an `all_gather` result still counts as per-shard under shard_map's
`check_vma=True`, so it could not be returned with out_specs=P()). Gradients come from autodiff through the
collectives (all_gather ↔ psum_scatter, psum ↔ broadcast): no hand-written reverse pass.

Signed decays (`decay_sign`, signed_decay.py) never reach `run`: the caller folds the global running sign into
q and k first, the parity entering each shard being the XOR of the earlier shards' totals (`parity_before`).
"""
from typing import Callable

import jax
import jax.numpy as jnp
from jax import lax


def initial_carry(s0_BHKV, k_BTHK, v_BTHV):
  """The initial state of a lax.scan over the inputs: s0 (zeros if None) plus exact zeros built from k and
  v, so that inside `jax.shard_map` it is per-shard exactly where the inputs are (a scan's carry must have
  the type of its body's output; a plain jnp.zeros is replicated). Costs nothing measurable."""
  zeros = jnp.einsum("bthk,bthv->bhkv", k_BTHK[:, :0], v_BTHV[:, :0])
  return zeros if s0_BHKV is None else s0_BHKV + zeros


def from_last_shard(x, axis: str):
  """x of the axis's last shard, replicated (an explicit reduction: psum of x there and zeros elsewhere)."""
  last = lax.axis_index(axis) == lax.axis_size(axis) - 1
  return lax.psum(jnp.where(last, x, jnp.zeros_like(x)), axis)


def run(form: Callable, q_BTHK, k_BTHK, v_BTHV, g_BTHk, s0_BHKV, axis: str):
  """A computation form `form(q, k, v, g, s0) -> (o, S)` made exact across the shards of `axis`.

  Same inputs as the forms (float32, scale in q, g None | [B,T,H,1] | [B,T,H,K] clamped finite), T being
  the shard's block. Returns (o [B,T,H,V] for the block, S after the last shard [B,H,K,V], replicated).
  """
  o_BTHV, s_BHKV = form(q_BTHK, k_BTHK, v_BTHV, g_BTHk, None)
  R, r = lax.axis_size(axis), lax.axis_index(axis)
  s_RBHKV = lax.all_gather(s_BHKV, axis)
  if g_BTHk is None:
    total_BHk1, decay_RBHk1 = None, None
  else:
    total_BHk1 = jnp.exp(jnp.sum(g_BTHk, axis=1))[..., None]
    decay_RBHk1 = lax.all_gather(total_BHk1, axis)
  s = jnp.zeros_like(s_BHKV) if s0_BHKV is None else s0_BHKV
  s_in = []
  for j in range(R):   # exclusive prefix over the (few) shards: R·K·V work per device
    s_in.append(s)
    s = s_RBHKV[j] + (s if decay_RBHk1 is None else decay_RBHk1[j] * s)
  s_in_BHKV = lax.dynamic_index_in_dim(jnp.stack(s_in), r, keepdims=False)
  if g_BTHk is None:
    q_in_BTHK = q_BTHK
    s_out_BHKV = s_BHKV + s_in_BHKV
  else:
    q_in_BTHK = q_BTHK * jnp.exp(lax.associative_scan(jnp.add, g_BTHk, axis=1))
    s_out_BHKV = s_BHKV + total_BHk1 * s_in_BHKV
  o_BTHV = o_BTHV + jnp.einsum("bthk,bhkv->bthv", q_in_BTHK, s_in_BHKV)
  return o_BTHV, from_last_shard(s_out_BHKV, axis)


def parity_before(odd_BHk, axis: str):
  """Whether an odd number of negative decay factors lie in the shards before this one (bool [B,H,k]).

  odd_BHk: the shard's own total parity (bool). XOR of the all-gathered totals of shards 0..r−1 (exact).
  """
  odd_RBHk = lax.all_gather(odd_BHk.astype(jnp.int32), axis)
  acc, before = jnp.zeros_like(odd_RBHk[0]), []
  for j in range(lax.axis_size(axis)):
    before.append(acc)
    acc = acc ^ odd_RBHk[j]
  return lax.dynamic_index_in_dim(jnp.stack(before), lax.axis_index(axis), keepdims=False) == 1


def segmented_max_in(seen_BH, m_BH, axis: str):
  """The running (reset seen, max) pair entering this shard, from each shard's own totals.

  seen_BH / m_BH: whether the shard has a reset and its running max at its last token. Returns the exclusive
  prefix over the shards before this one of the segmented max (a ∘ b = (a.seen | b.seen, b.m if b.seen else
  max(a.m, b.m))), starting from (False, −inf). Stop-gradient values: no gradient flows here.
  """
  seen_RBH, m_RBH = lax.all_gather(seen_BH, axis), lax.all_gather(m_BH, axis)
  seen, m = jnp.zeros_like(seen_BH), jnp.full_like(m_BH, -jnp.inf)
  seen_in, m_in = [], []
  for j in range(lax.axis_size(axis)):
    seen_in.append(seen)
    m_in.append(m)
    seen, m = seen | seen_RBH[j], jnp.where(seen_RBH[j], m_RBH[j], jnp.maximum(m, m_RBH[j]))
  r = lax.axis_index(axis)
  pick = lambda xs: lax.dynamic_index_in_dim(jnp.stack(xs), r, keepdims=False)
  return pick(seen_in), pick(m_in)
