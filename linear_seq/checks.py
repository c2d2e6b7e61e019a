"""Input checks with one-line messages, shared by the ops, the mixers and the model (imports nothing from
linear_seq). Value checks run on concrete values only: under jit/grad/vmap the values are tracers, unknown
until run time, and the check is skipped (`if_concrete`)."""
from typing import Any, Callable, Union

import jax
import numpy as np


def is_concrete(x) -> bool:
  """True when x's values are known now (not a tracer under jit/grad/vmap)."""
  return not isinstance(x, jax.core.Tracer)


def if_concrete(x, ok: Callable[[np.ndarray], Any], message: Union[str, Callable[[np.ndarray], str]]) -> None:
  """Raises ValueError(message) when x is concrete and ok(np.asarray(x)) is false; skips a traced x.

  message: a string, or a function of the values (to name the offending ones)."""
  if not is_concrete(x):
    return
  values = np.asarray(x)
  if not ok(values):
    raise ValueError(message(values) if callable(message) else message)


def check_choice(what: str, value, valid) -> None:
  if value not in valid:
    raise ValueError(f"unknown {what} {value!r}; valid: {', '.join(map(str, valid))}")


def registrar(table: dict, name: str) -> Callable[[Any], Any]:
  """Decorator adding its argument to `table` under `name` (the mixer and tokenizer registries)."""
  def add(obj):
    table[name] = obj
    return obj
  return add


def lookup(what: str, table: dict, name: str):
  """table[name]; ValueError naming the valid names otherwise."""
  check_choice(what, name, tuple(table))
  return table[name]


def check_shape(name: str, x, expected: tuple, legend: str = "") -> None:
  """expected: tuple of ints or None (any size)."""
  shape = tuple(np.shape(x))
  ok = len(shape) == len(expected) and all(e is None or e == s for s, e in zip(shape, expected))
  if not ok:
    exp = "[" + ", ".join("?" if e is None else str(e) for e in expected) + "]"
    raise ValueError(f"{name} has shape {list(shape)}, expected {exp}{' ' + legend if legend else ''}")


def check_positive_int(name: str, value) -> None:
  if not isinstance(value, (int, np.integer)) or value <= 0:
    raise ValueError(f"{name} must be a positive integer, got {value!r}")
