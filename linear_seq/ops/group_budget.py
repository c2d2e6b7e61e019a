"""The rematerialized group size that keeps a chunk form's forward+backward under a memory budget.

The chunk forms (chunk.py, delta_chunk.py) run long sequences in groups of L tokens (whole chunks) in a
rematerialized outer lax.scan: the backward keeps one group's intermediates alive at a time, so the activation
memory grows with L, not T, at the cost of recomputing each group's forward and of G = ⌈T / L⌉ sequential
steps. With tuning's `memory_budget` set (bytes), a form traced at a shape asks `choose` for the largest L that
fits instead of reading its fixed group size from the table.

Memory is what XLA's compiler says the op's forward+backward needs on the current backend: temp + argument +
output bytes of `compiled.memory_analysis()` for the VJP of all the op's outputs wrt all its inputs (the
benchmark's "mem" column, studies/common.compiled_memory). Measuring compiles that function, without running
it, for the candidates one group (no outer scan) and C·2^j < T, largest first, until one fits; each
measurement is cached per shape and group (the forms keep the cache), so a second budget at the same shape
compiles only the sizes not yet measured. Where none fits (the inputs, outputs and gradients alone exceed the
budget) the group with the least memory is used, with a warning.
"""
import dataclasses
import functools
import warnings
from typing import Callable, Optional

import jax
import jax.numpy as jnp

from linear_seq.ops import tuning


def candidates(T: int, C: int) -> list[Optional[int]]:
  """None (one group), then C·2^j for every C·2^j < T, largest first."""
  out, L = [], C
  while L < T:
    out.append(L)
    L *= 2
  return [None] + out[::-1]


def choose(memory: Callable[[Optional[int]], Optional[int]], T: int, C: int, budget: int,
           fallback: Optional[int]) -> Optional[int]:
  """The largest candidate group (`candidates`) whose `memory(L)` (bytes) is at most `budget`.

  Tries the candidates largest first and stops at the first that fits. Memory falls as the group shrinks
  until the per-group carried states and loop overhead take over; once it rises again no smaller group helps,
  and the group with the least memory seen is used, with a warning. memory(L) returns None where the backend
  reports no memory analysis: then `fallback` (the table's size), with a warning.
  """
  least = None   # (memory, group)
  for group in candidates(T, C):
    m = memory(group)
    if m is None:
      warnings.warn("tuning.memory_budget: this backend gives no compiled memory analysis; using the table's "
                    "group size")
      return fallback
    if m <= budget:
      return group
    if least is not None and m > least[0]:
      break
    if least is None or m < least[0]:
      least = (m, group)
  warnings.warn(f"tuning.memory_budget={budget} bytes: no group size fits at T={T} (the least, groups of "
                f"{least[1] or T} tokens, needs {least[0]} bytes); using it")
  return least[1]


def group_tokens(op: Callable, field: str, args: tuple, C: int, operand_dtype=None) -> Optional[int]:
  """The group size a chunk form `op(*args, C, operand_dtype)` uses for these inputs (abstract ones will do):
  tuning's `field` (its *_group_tokens), or with tuning's `memory_budget` the largest group that fits it
  (`choose`, measured by `group_memory`). args[0] is q [B, T, ...]."""
  t = tuning.current()
  fallback = getattr(t, field)
  if t.memory_budget is None:
    return fallback
  return choose(lambda L: group_memory(op, field, args, C, L, operand_dtype), args[0].shape[1], C,
                t.memory_budget, fallback)


def group_memory(op: Callable, field: str, args: tuple, C: int, group_tokens: Optional[int],
                 operand_dtype=None) -> Optional[int]:
  """Compiled fwd+bwd bytes of the chunk form `op(*args, C, operand_dtype)` for these inputs' shapes (arrays,
  abstract ones or None) with tuning's `field` = group_tokens (None: one group), on the current backend
  (`fwd_bwd_memory`; cached per op, shapes, group and the rest of the tuning row)."""
  shapes = tuple(None if x is None else (tuple(x.shape), jnp.dtype(x.dtype)) for x in args)
  operand = None if operand_dtype is None else jnp.dtype(operand_dtype)
  tuned = dataclasses.replace(tuning.current(), **{field: None}, memory_budget=None)   # the rest of the row
  return _group_memory(op, field, shapes, C, operand, group_tokens, jax.default_backend(), tuned)


@functools.lru_cache(maxsize=1024)
def _group_memory(op, field, shapes, C, operand_dtype, group_tokens, backend, tuned):
  del backend, tuned   # in the cache key only
  abstract = tuple(None if s is None else jax.ShapeDtypeStruct(*s) for s in shapes)
  with tuning.override(**{field: group_tokens}, memory_budget=None):
    return fwd_bwd_memory(lambda *xs: op(*xs, C, operand_dtype), abstract)


def compiled_memory(fn: Callable, *abstract_args) -> Optional[int]:
  """temp + argument + output bytes of jax.jit(fn) compiled for `abstract_args` (None without an analysis).

  Compiled as a program of its own, outside any ambient mesh (`_no_mesh`)."""
  with _no_mesh():
    stats = jax.jit(fn).lower(*abstract_args).compile().memory_analysis()
  if stats is None:
    return None
  return int(stats.temp_size_in_bytes + stats.argument_size_in_bytes + stats.output_size_in_bytes)


def fwd_bwd_memory(op: Callable, abstract_args: tuple) -> Optional[int]:
  """Compiled memory of the VJP of `op(*args)`: all its outputs pulled back to all its inputs that are not None
  (abstract_args: jax.ShapeDtypeStruct or None, positionally)."""
  present = tuple(i for i, a in enumerate(abstract_args) if a is not None)

  def call(*xs):
    args = list(abstract_args)
    for i, x in zip(present, xs):
      args[i] = x
    return op(*args)

  def fwd_bwd(xs, cotangents):
    return jax.vjp(call, *xs)[1](cotangents)

  xs = tuple(abstract_args[i] for i in present)
  with _no_mesh():
    cotangents = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), jax.eval_shape(call, *xs))
  return compiled_memory(fwd_bwd, xs, cotangents)


def _no_mesh():
  """A context with no ambient abstract mesh, for a measurement made while tracing inside `jax.shard_map`
  (sequence parallelism: a chunk form chooses its group per shard, at the shard's shapes): there
  `jax.eval_shape`'s results carry the manual mesh's shardings, and jit refused to compile with those (no
  concrete mesh: "Passing lowering_platforms ... is required when only AbstractMesh exists"). The measured
  program is then the one traced outside any mesh at those shapes."""
  return jax.sharding.use_abstract_mesh(jax.sharding.AbstractMesh((), ()))
