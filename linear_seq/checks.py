"""The ops' input checks with one-line messages, shared by the ops, the mixers and the model (imports nothing from
linear_seq; config validation is linear_seq/validation.py). Value checks run on concrete values only: under
jit/grad/vmap the values are tracers, unknown until run time, and the check is skipped (`if_concrete`) -- unless
debug checks are on: a function wrapped by `checked(fn)` (the trainer's `--config.train.debug_checks=True`) is
traced with the same checks staged in by `jax.experimental.checkify`, so e.g. a positive log_decay computed inside a
jitted step raises checkify.JaxRuntimeError naming it (with the array's min and max) instead of producing huge
values."""
import contextlib
import contextvars
import difflib
import functools
from typing import Any, Callable, Iterator, Union

import jax
from jax.experimental import checkify
import jax.numpy as jnp
import numpy as np

# True while a `checked` function is traced in this thread / context: if_concrete stages its check into it.
# A ContextVar, not a global: a trace in another thread (or asyncio task) keeps its own setting.
_staging = contextvars.ContextVar("linear_seq_checks_staging", default=False)


def is_concrete(x) -> bool:
  """True when x's values are known now (not a tracer under jit/grad/vmap)."""
  return not isinstance(x, jax.core.Tracer)


def if_concrete(x, ok: Callable[[np.ndarray], Any], message: Union[str, Callable[[np.ndarray], str]]) -> None:
  """Raises ValueError(message) when x is concrete and ok(np.asarray(x)) is false; skips a traced x.

  message: a string, or a function of the values (to name the offending ones)."""
  if not is_concrete(x):
    if _staging.get():
      _staged_check(x, ok, message)
    return
  values = np.asarray(x)
  if not ok(values):
    raise ValueError(message(values) if callable(message) else message)


def _staged_check(x, ok: Callable[[Any], Any], message) -> None:
  """checkify.check of ok(x) on a traced x (the ok functions use NumPy calls that also take tracers); a check
  that needs concrete values (e.g. int(x)) stays skipped."""
  try:
    passed = jnp.all(jnp.asarray(ok(x)))
  except (jax.errors.ConcretizationTypeError, TypeError):
    return
  if isinstance(message, str):
    text = message
  else:  # a function of the values (e.g. _log_decay_message): its name says what is checked
    text = f"{getattr(message, '__name__', 'value').strip('_').removesuffix('_message')} out of range"
  text = text.replace("{", "{{").replace("}", "}}")
  if jnp.issubdtype(x.dtype, jnp.complexfloating) or jnp.issubdtype(x.dtype, jnp.bool_):
    checkify.check(passed, f"{text} (debug check under jit)")
  else:
    checkify.check(passed, f"{text} (debug check under jit: min {{lo}}, max {{hi}})", lo=jnp.min(x),
                   hi=jnp.max(x))


@contextlib.contextmanager
def debug_checks(enabled: bool = True) -> Iterator[None]:
  """While active, value checks on traced arrays are staged as checkify checks (only valid inside a
  checkify-transformed function: use `checked`); enabled=False turns them off inside an enclosing block. The
  setting is per thread (a contextvars.ContextVar) and restored on exit, however the blocks nest."""
  token = _staging.set(enabled)
  try:
    yield
  finally:
    _staging.reset(token)


def debug_checks_active() -> bool:
  """Whether value checks on traced arrays are staged now (inside `debug_checks()` in this thread)."""
  return _staging.get()


def checked(fn: Callable[..., Any], **jit_kwargs) -> Callable[..., Any]:
  """jax.jit(fn, **jit_kwargs) with the ops' value checks run on device (jax.experimental.checkify): a failing
  check raises checkify.JaxRuntimeError with its message after the call. Slower; for debugging."""
  jitted = jax.jit(checkify.checkify(fn, errors=checkify.user_checks), **jit_kwargs)

  @functools.wraps(fn)
  def run(*args, **kwargs):
    with debug_checks():  # the first call traces fn with the checks; later calls reuse that trace
      err, out = jitted(*args, **kwargs)
    err.throw()
    return out

  return run


def check_choice(what: str, value, valid) -> None:
  """ValueError naming the valid choices (and the nearest one to a mistyped string, e.g. mamba -> mamba2)."""
  if value not in valid:
    names = [v for v in valid if isinstance(v, str)]
    near = difflib.get_close_matches(value, names, n=1, cutoff=0.6) if isinstance(value, str) else []
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    raise ValueError(f"unknown {what} {value!r}; valid: {', '.join(map(str, valid))}{hint}")


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
