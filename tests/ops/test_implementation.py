"""The recurrence ops' `implementation=` keyword: resolved per backend, validated, and 'xla' (today's only one,
the exact reference) gives the same result as the default."""
import jax
import numpy as np
import pytest

from linear_seq import ops
from linear_seq.ops import implementation


def test_resolve_per_backend_and_errors():
  for backend in ("cpu", "gpu", "tpu"):
    assert implementation.resolve(None, backend) == implementation.resolve("auto", backend) == "xla"
  assert implementation.resolve("xla") == "xla"
  with pytest.raises(ValueError, match="unknown implementation 'pallas'; valid: xla, auto"):
    implementation.resolve("pallas")


def test_ops_take_the_keyword():
  q, k, v = jax.random.normal(jax.random.key(0), (3, 1, 9, 2, 4))
  g = -jax.nn.softplus(jax.random.normal(jax.random.key(1), (1, 9, 2)))
  o, _ = ops.linear_recurrence(q, k, v, g, mode="recurrent")
  o2, _ = ops.linear_recurrence(q, k, v, g, mode="recurrent", implementation="xla")
  np.testing.assert_array_equal(o, o2)
  beta = jax.nn.sigmoid(g)
  d, _ = ops.delta_rule(q, k, v, beta, g, mode="recurrent", implementation="auto")
  d2, _ = ops.delta_rule(q, k, v, beta, g, mode="recurrent")
  np.testing.assert_array_equal(d, d2)
  with pytest.raises(ValueError, match="unknown implementation 'triton'"):
    ops.delta_rule(q, k, v, beta, g, implementation="triton")
  with pytest.raises(ValueError, match="unknown implementation 'triton'"):
    ops.linear_recurrence(q, k, v, g, implementation="triton")
