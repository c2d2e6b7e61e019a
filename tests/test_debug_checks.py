"""Debug checks (checks.checked, --config.train.debug_checks): the ops' value checks run inside jit too."""
import os
import threading

import jax
from jax.experimental import checkify
import jax.numpy as jnp
import numpy as np
import pytest

from linear_seq import checks
from linear_seq import config_lib
from linear_seq import ops
from linear_seq import sharding
from linear_seq import steps

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "configs")
B, T, H, K = 1, 6, 2, 3


def _loss(q, k, v, log_decay):
  return jnp.sum(ops.linear_recurrence(q, k, v, log_decay, mode="chunk", chunk_size=4)[0])


def _inputs(sign):
  key = jax.random.key(0)
  q, k, v = (jax.random.normal(jax.random.fold_in(key, i), (B, T, H, K)) for i in range(3))
  return q, k, v, sign * jnp.abs(jax.random.normal(jax.random.fold_in(key, 3), (B, T, H)))


def test_a_positive_log_decay_fails_under_jit_and_grad():
  q, k, v, bad = _inputs(+1.0)
  plain = jax.jit(jax.grad(_loss, argnums=3))
  assert np.all(np.isfinite(plain(q, k, v, bad)))  # off by default: no check under jit, only wrong values
  with pytest.raises(ValueError, match="log_decay must be ≤ 0"):  # eager: the usual check
    _loss(q, k, v, bad)
  grad = checks.checked(jax.grad(_loss, argnums=3))
  with pytest.raises(checkify.JaxRuntimeError, match=rf"log_decay out of range \(debug check under jit: "
                     rf"min {float(bad.min())}, max {float(bad.max())}\)"):
    grad(q, k, v, bad)
  q, k, v, good = _inputs(-1.0)  # a valid input: the same values as the plain jitted function
  np.testing.assert_array_equal(grad(q, k, v, good), plain(q, k, v, good))


def test_string_messages_and_checks_needing_concrete_values():
  def f(g, n):
    checks.if_concrete(g, lambda a: np.all((a > 0) & (a < 1)), "gamma must be in (0, 1)")
    checks.if_concrete(n, lambda i: int(i) < 3, "skipped under jit: int() of a tracer")
    return g * n
  f_checked = checks.checked(f)
  assert float(f_checked(jnp.float32(0.5), jnp.int32(7))) == 3.5
  with pytest.raises(checkify.JaxRuntimeError, match=r"gamma must be in \(0, 1\) \(debug check under jit: min 2"):
    f_checked(jnp.float32(2.0), jnp.int32(1))


def test_trainer_option_checks_inside_the_eval_step():
  """--config.train.debug_checks=True: the steps are checkified; NaN weights fail at the first op that checks
  its input (the gate's log decay) instead of giving a NaN loss."""
  config = config_lib.load_sibling(os.path.join(CONFIGS, "mqar.py"), "mqar").get_config("tiny=True,mixer=gla")
  config = config_lib.apply_overrides(config, {"train.debug_checks": True, "data.seq_len": 8})
  static, abstract, shardings = steps.setup(config, 16, sharding.make_mesh())
  state = steps.init_state(config, 16, static, shardings)
  params = jax.tree.map(lambda p: jnp.full_like(p, jnp.nan), state["params"])
  batch = {"inputs": jnp.zeros((2, 8), jnp.int32), "targets": jnp.zeros((2, 8), jnp.int32),
           "weights": jnp.ones((2, 8), jnp.float32)}
  with pytest.raises(checkify.JaxRuntimeError, match="debug check under jit"):
    static.eval_step(params, state["rest"], batch)


def test_debug_checks_nest_and_restore_the_setting():
  assert not checks.debug_checks_active()
  with checks.debug_checks():
    assert checks.debug_checks_active()
    with checks.debug_checks(enabled=False):
      assert not checks.debug_checks_active()
      with checks.debug_checks():
        assert checks.debug_checks_active()
      assert not checks.debug_checks_active()
    assert checks.debug_checks_active()
    with pytest.raises(RuntimeError, match="boom"):  # an exception inside restores the outer setting
      with checks.debug_checks(enabled=False):
        raise RuntimeError("boom")
    assert checks.debug_checks_active()
  assert not checks.debug_checks_active()


def test_debug_checks_are_per_thread():
  """A plain jit traced in another thread while a `checked` trace is open stages nothing (with a module-level
  counter it would call checkify.check outside checkify and fail)."""
  inside, traced = threading.Event(), threading.Event()
  seen = {}

  def checked_thread():
    with checks.debug_checks():
      inside.set()
      seen["checked"] = checks.debug_checks_active()
      traced.wait(timeout=60)

  def f(g):
    checks.if_concrete(g, lambda a: np.all(a > 0), "g must be > 0")
    return g * 2

  thread = threading.Thread(target=checked_thread)
  thread.start()
  try:
    assert inside.wait(timeout=60)
    seen["plain"] = checks.debug_checks_active()
    out = float(jax.jit(f)(jnp.float32(-1.0)))  # traced here, in this thread: the check is skipped
  finally:
    traced.set()
    thread.join()
  assert seen == {"checked": True, "plain": False}
  assert out == -2.0
