"""train.loss_positions: the head only at each row's weighted positions gives the same loss terms and gradients
as the head at every position, and a batch with more weighted positions than it covers is refused."""
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from linear_seq import config_lib
from linear_seq import eval_lib
from linear_seq import sharding
from linear_seq import steps
from linear_seq import train
from linear_seq import validation

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "configs")


def _config(**overrides):
  config = config_lib.load_sibling(os.path.join(CONFIGS, "mqar.py"), "mqar").get_config("tiny=True")
  return config_lib.apply_overrides(config, overrides)


def _batch(B=5, T=16, V=64, K=3, seed=0):
  """Rows with 0..K weighted positions anywhere in the row (one row none, one all K at the end), weights
  of different sizes, packed documents."""
  rng = np.random.default_rng(seed)
  w = np.zeros((B, T), np.float32)
  for b in range(1, B):
    pos = [T - 3, T - 2, T - 1] if b == B - 1 else rng.choice(T, rng.integers(1, K + 1), replace=False)
    w[b, pos] = rng.uniform(0.5, 2.0, len(pos))
  seg = np.cumsum(rng.random((B, T)) < 0.1, axis=1).astype(np.int32) + 1
  return {"inputs": rng.integers(0, V, (B, T)).astype(np.int32), "segment_ids": seg,
          "targets": rng.integers(0, V, (B, T)).astype(np.int32), "weights": w}


def test_terms_and_gradients_match_the_head_at_every_position():
  config = _config()
  V = 64
  static, _, shardings = steps.setup(config, V, sharding.make_mesh())
  state = steps.init_state(config, V, static, shardings)
  batch = sharding.global_batch(_batch(V=V), static.mesh)
  grad_fn = jax.jit(jax.value_and_grad(steps._loss, has_aux=True), static_argnames=("graphdef", "loss_positions"))
  with jax.set_mesh(static.mesh):   # 0: the head at every position; 3: at each row's 0 to 3 weighted positions
    (loss0, terms0), grads0 = grad_fn(state["params"], state["rest"], batch, graphdef=static.graphdef, loss_positions=0)
    (loss, terms), grads = grad_fn(state["params"], state["rest"], batch, graphdef=static.graphdef, loss_positions=3)
  np.testing.assert_allclose(loss, loss0, rtol=1e-6)
  for k in terms0:
    np.testing.assert_allclose(terms[k], terms0[k], rtol=1e-6, atol=1e-6, err_msg=k)
  for a, b in zip(jax.tree.leaves(grads), jax.tree.leaves(grads0)):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
  assert float(terms0["weight"]) > 0 and np.count_nonzero(np.asarray(terms0["position_weight"])) > 3


def test_weighted_positions_in_order_then_unweighted():
  w = jnp.asarray([[0, 2, 0, 1, 0], [0, 0, 0, 0, 0], [1, 1, 0, 0, 1]], jnp.float32)
  np.testing.assert_array_equal(steps.weighted_positions(w, 3), [[1, 3, 0], [0, 1, 2], [0, 1, 4]])


def test_a_row_with_more_weighted_positions_is_refused(tmp_path):
  steps.check_loss_positions(np.ones((2, 4)), 0)   # 0: logits everywhere, nothing to check
  steps.check_loss_positions(np.eye(4)[:2], 1)
  with pytest.raises(ValueError, match=r"train.loss_positions=1, but a row of the batch has 2 positions"):
    steps.check_loss_positions(np.asarray([[1, 0, 1, 0]]), 1)
  # the tiny MQAR task has 2 answers per row: loss_positions=1 stops before the first step, as a config error
  config = _config(**{"train.loss_positions": 1, "train.num_steps": 2})
  with pytest.raises(validation.ConfigError, match="set it to at least 2"):
    train.train_and_evaluate(config, str(tmp_path / "run"))
  # evaluation checks each batch the same way: a config error too, which evaluate reports in one line
  info = validation.check_config(config)
  static, _, shardings = steps.setup(config, info.vocab_size, sharding.make_mesh())
  state = steps.init_state(config, info.vocab_size, static, shardings)
  with pytest.raises(validation.ConfigError, match="set it to at least 2"):
    eval_lib.run_eval(state, static, config, info)
  with pytest.raises(validation.ConfigError, match=r"train.loss_positions must be >= 0"):
    validation.check_config(_config(**{"train.loss_positions": -1}))
