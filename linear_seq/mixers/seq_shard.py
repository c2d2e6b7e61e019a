"""Runs a linear mixer's op call under `jax.shard_map` over the ambient mesh's 'data' and 'seq' axes.

Long-context training splits T over the mesh axis 'seq' (the inner axis; 'data' the outer). Everything in a
mixer except its op call stays ordinary GSPMD code (projections, short convs, norms, segment/reset logic, RoPE
positions; XLA moves conv halos and document boundaries itself); only the op, whose recurrence crosses the
shards, runs per shard with `seq_axis=SEQ_AXIS` (exact: ops/seq_parallel.py). The mesh comes from JAX's own
context (`with jax.set_mesh(mesh):` around the jitted step).

Data parallelism alone ('data' > 1, no 'seq') runs the op per data shard too: each device then holds whole
sequences, and the op moves no activations between devices. Left to GSPMD, ops that reshape the batch
together with other axes (the delta rule's triangular inverse flattens [chunks, B, H]) would all-gather the
batch. When the call's B does not split over 'data' (or T over 'seq'; a one-token decode step, a short prompt),
the op runs unsharded.

Used by the linear, retention, gla, deltanet, deltaproduct and mamba2 mixers, and by s4 for data parallelism
(it refuses mesh.seq > 1).
"""
from typing import Callable, Sequence

import jax
from jax.sharding import PartitionSpec as P

DATA_AXIS, SEQ_AXIS = "data", "seq"


def seq_size() -> int:
  """The size of the ambient mesh's 'seq' axis (1 without one)."""
  mesh = jax.sharding.get_abstract_mesh()
  return dict(zip(mesh.axis_names, mesh.axis_sizes)).get(SEQ_AXIS, 1) if mesh.axis_names else 1


def call(fn: Callable, args: Sequence, kinds: str):
  """fn(*args, seq_axis=...) -> (o [B, T, ...], state pytree with leading B), sequence-parallel if it can be.

  kinds: one letter per arg: 't' [B, T, ...] (batch over 'data', T over 'seq'), 'b' [B, ...] (a state: batch
  over 'data', replicated over 'seq'; the initial state), 'r' replicated (a fixed decay [H], a projection).
  None args are passed through.
  """
  if len(kinds) != len(args):
    raise ValueError(f"kinds {kinds!r} needs one letter per argument ({len(args)})")
  mesh = jax.sharding.get_abstract_mesh()
  sizes = dict(zip(mesh.axis_names, mesh.axis_sizes)) if mesh.axis_names else {}
  seq, data = sizes.get(SEQ_AXIS, 1), sizes.get(DATA_AXIS, 1)
  B, T = args[0].shape[:2]
  if seq > 1 and (T % seq or B % data):
    return fn(*args, seq_axis=None)
  if seq == 1 and (data == 1 or B % data):
    return fn(*args, seq_axis=None)
  batch = DATA_AXIS if DATA_AXIS in sizes else None
  time = SEQ_AXIS if seq > 1 else None
  spec = {"t": P(batch, time), "b": P(batch), "r": P()}
  given = [i for i, a in enumerate(args) if a is not None]

  axes = tuple(a for a in (batch, time) if a is not None)

  def per_shard(*present):
    full = [None] * len(args)
    for i, a in zip(given, present):
      # A replicated input (parameters, or arrays made from them only) is cast to varying at the boundary, so
      # its cotangent is reduced over the shards once, on its own shape, not on the larger arrays the op
      # computes from it (S4's kernel spectrum [H, T] would otherwise be all-reduced every step).
      full[i] = jax.tree.map(lambda x: jax.lax.pcast(x, axes, to="varying"), a) if kinds[i] == "r" else a
    return fn(*full, seq_axis=time)

  return jax.shard_map(per_shard, in_specs=tuple(spec[kinds[i]] for i in given),
                       out_specs=(spec["t"], spec["b"]))(*[args[i] for i in given])
