"""train.grad_accum_steps: N micro-batches give the one-pass loss, gradients and AdamW update (micro-batches
weighted by their loss-token counts) to float32 rounding; bad values are config errors. Exact resume with
accumulation: tests/test_train.py (its runs use 2 micro-batches); data and sequence parallelism:
tests/test_seq_parallel_train.py, on 4 fake devices."""

import jax
import numpy as np
import pytest

from linear_seq import config_lib
from linear_seq import sharding
from linear_seq import steps
from linear_seq import train
from linear_seq import validation
from tests.helpers import DEFAULT_CONFIG, rel_rms

LOSS_TOL = 1e-6  # relative
# Gradients and AdamW updates, relative RMS per leaf. Measured with 4 micro-batches: 2.2e-6 over all gradients
# (at most 2.5e-6 per leaf): 5e-7 from dividing by the token count after the backward pass instead of before it,
# the rest from XLA's kernels for 2-row instead of 8-row matmuls (permuting the rows of one pass moves 6e-8).
GRAD_TOL = 5e-6
# Adam's first update is about lr·sign(g), so a gradient entry near 0 can flip: measured 3.8e-5 per leaf at most.
UPDATE_TOL = 1e-4
B, T, V = 8, 16, 258


def tiny_config(**overrides):
  config = config_lib.load_sibling(DEFAULT_CONFIG, "default").get_config("tiny=True")
  return config_lib.apply_overrides(config, {"data.batch_size": B, "data.seq_len": T, **overrides})


def batch():
  """Packed rows with uneven loss-token counts: micro-batches of 2 rows hold 0 to 31 weighted tokens."""
  rng = np.random.default_rng(0)
  inputs = rng.integers(0, V, (B, T)).astype(np.int32)
  weights = (rng.random((B, T)) < np.linspace(0.0, 1.0, B)[:, None]).astype(np.float32)   # row 0: none
  seg = np.ones((B, T), np.int32)
  seg[1, 5:], seg[6, 11:] = 2, 2
  return {"inputs": inputs, "targets": np.roll(inputs, -1, 1), "weights": weights, "segment_ids": seg}


def test_micro_batches_give_the_one_pass_step():
  config = tiny_config()
  mesh = sharding.make_mesh(jax.devices()[:1])
  static, _, shardings = steps.setup(config, V, mesh)
  state = steps.init_state(config, V, static, shardings)
  b = sharding.global_batch(batch(), mesh)
  per_micro = np.asarray(b["weights"]).reshape(B // 4, 4, T).sum(axis=(0, 2))
  assert len(set(per_micro.tolist())) == 4  # the micro-batches have different loss-token counts

  grads_of = jax.jit(steps.loss_and_grads, static_argnums=(3, 4, 5))
  update = jax.jit(lambda g: static.tx.update(g, state["opt_state"], state["params"])[0])  # the step's update
  loss1, g1 = grads_of(state["params"], state["rest"], b, static.graphdef, 0, 1)
  loss4, g4 = grads_of(state["params"], state["rest"], b, static.graphdef, 0, 4)
  assert abs(float(loss4) - float(loss1)) <= LOSS_TOL * abs(float(loss1))
  for what, (a, e), tol in (("gradients", (g4, g1), GRAD_TOL), ("updates", (update(g4), update(g1)), UPDATE_TOL)):
    errors = [rel_rms(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(e))]
    assert max(errors) <= tol, (what, max(errors))
  # Averaging the micro-batches' mean losses (not weighting them by their token counts) would be far off.
  mean_loss = jax.jit(steps._loss, static_argnums=3)
  means = [float(mean_loss(state["params"], state["rest"], {k: v[i::4] for k, v in b.items()}, static.graphdef)[0])
           for i in range(4)]
  assert abs(np.mean(means) - float(loss1)) > 100 * LOSS_TOL * abs(float(loss1))


@pytest.mark.parametrize("n, message", [
    (3, "train.grad_accum_steps=3 must divide data.batch_size=8"),
    (0, "train.grad_accum_steps must be >= 1"),
])
def test_bad_accumulation_steps_are_config_errors(tmp_path, n, message):
  with pytest.raises(validation.ConfigError, match=message):
    train.train_and_evaluate(tiny_config(**{"train.grad_accum_steps": n}), str(tmp_path))
