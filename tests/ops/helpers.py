"""Shared test utilities for the ops: a relative-RMS metric and random-cotangent gradients.

`rel_rms(a, b)` is fla's error ratio: RMS(a − b) / RMS(b), computed in float64 on the host.
`vjp_grads(f, args, cotangents)` pulls fixed random cotangents back through `f`, so every output
(all of o and the final state, say) contributes to every gradient compared.
"""
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np


def rel_rms(a, b) -> float:
  """RMS(a − b) / RMS(b) in float64; 0 when both are all zero. Non-finite values give inf."""
  a = np.asarray(a, np.float64)
  b = np.asarray(b, np.float64)
  if a.shape != b.shape:
    raise ValueError(f"shape mismatch: {a.shape} vs {b.shape}")
  if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
    return float("inf")
  err = np.sqrt(np.mean((a - b) ** 2)) if a.size else 0.0
  ref = np.sqrt(np.mean(b ** 2)) if b.size else 0.0
  if ref == 0.0:
    return 0.0 if err == 0.0 else float("inf")
  return float(err / ref)


def assert_close(actual, expected, tol: float, what: str = "") -> None:
  """Asserts rel_rms(actual, expected) ≤ tol for arrays or matching pytrees of arrays."""
  leaves_a, tree_a = jax.tree.flatten(actual)
  leaves_e, tree_e = jax.tree.flatten(expected)
  assert tree_a == tree_e, f"{what}: structure {tree_a} != {tree_e}"
  for i, (a, e) in enumerate(zip(leaves_a, leaves_e)):
    err = rel_rms(a, e)
    label = f"{what}[{i}]" if len(leaves_a) > 1 else what
    assert err <= tol, f"{label}: rel_rms {err:.3g} > {tol:.3g} (shape {np.shape(e)})"


def random_like(key, tree, dtype=None):
  """Standard-normal arrays with the shapes (and dtypes, unless given) of a pytree's leaves."""
  leaves, treedef = jax.tree.flatten(tree)
  keys = jax.random.split(key, max(len(leaves), 1))
  out = [jax.random.normal(k, np.shape(x), dtype or jnp.asarray(x).dtype)
         for k, x in zip(keys, leaves)]
  return jax.tree.unflatten(treedef, out)


def vjp_grads(f: Callable, args: Sequence, cotangents, argnums: Sequence[int] | None = None):
  """Gradients of Σ ⟨f(*args), cotangents⟩ wrt args[i] for i in argnums (default: all).

  `cotangents` matches f's output pytree (e.g. `random_like(key, f(*args))`); entries of args
  that are None are skipped. Returns a tuple aligned with argnums.
  """
  if argnums is None:
    argnums = [i for i, a in enumerate(args) if a is not None]
  argnums = tuple(argnums)

  def f_of(*diff):
    full = list(args)
    for i, d in zip(argnums, diff):
      full[i] = d
    return f(*full)

  out, pullback = jax.vjp(f_of, *[args[i] for i in argnums])
  cot = jax.tree.map(lambda c, o: jnp.asarray(c, jnp.asarray(o).dtype), cotangents, out)
  return pullback(cot)
