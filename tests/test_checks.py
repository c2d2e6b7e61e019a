"""linear_seq.checks: concrete values are checked, traced ones skipped; the module imports nothing of ours."""
import ast
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from linear_seq import checks


def test_if_concrete_checks_concrete_values_and_skips_traced_ones():
  positive = lambda a: np.all(a > 0)
  checks.if_concrete(jnp.ones(3), positive, "never")
  with pytest.raises(ValueError, match="^x must be > 0$"):
    checks.if_concrete(np.array([1.0, -1.0]), positive, "x must be > 0")
  with pytest.raises(ValueError, match=r"^min is -2.0$"):  # a message built from the values
    checks.if_concrete([1.0, -2.0], positive, lambda a: f"min is {a.min()}")
  seen = []

  @jax.jit
  def f(x):
    checks.if_concrete(x, lambda a: seen.append(a) or False, "unreachable")  # traced: never called
    return x
  f(-jnp.ones(2))
  jax.grad(lambda x: (checks.if_concrete(x, positive, "unreachable"), x)[1])(-1.0)
  assert seen == []


def test_check_helpers_messages():
  with pytest.raises(ValueError, match="unknown mode 'x'; valid: a, b"):
    checks.check_choice("mode", "x", ("a", "b"))
  with pytest.raises(ValueError, match=r"k has shape \[2, 3\], expected \[2, \?, 4\] \(legend\)"):
    checks.check_shape("k", np.zeros((2, 3)), (2, None, 4), "(legend)")
  with pytest.raises(ValueError, match="chunk_size must be a positive integer, got 0"):
    checks.check_positive_int("chunk_size", 0)


def test_checks_imports_nothing_from_linear_seq():
  """ops, mixers and the model import it, so it must not import them (no cycles)."""
  with open(checks.__file__) as f:
    tree = ast.parse(f.read())
  imported = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
  imported += [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
  assert not [m for m in imported if m.startswith("linear_seq")], imported
  assert os.path.basename(os.path.dirname(checks.__file__)) == "linear_seq"
