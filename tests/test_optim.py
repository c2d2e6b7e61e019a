"""Learning-rate schedule, parameter groups (weight-decay masks, SSM lr multiplier) and clipping."""
from flax import nnx
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest

from linear_seq import optim


def train_config(**kw) -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict(dict(num_steps=100, learning_rate=1e-2, warmup_steps=10, end_lr_fraction=0.1,
                                     weight_decay=0.5, b1=0.9, b2=0.98, grad_clip=1.0, ssm_lr_multiplier=0.1))
  c.update(kw)
  return c


def test_schedule_warmup_then_cosine_to_end_fraction():
  s = optim.make_schedule(train_config())
  lr = np.array([float(s(i)) for i in range(0, 101)])
  np.testing.assert_allclose(lr[:10], 1e-2 * np.arange(1, 11) / 10, rtol=1e-6)  # linear warmup, lr(0) > 0
  np.testing.assert_allclose(lr[10], 1e-2, rtol=1e-6)
  np.testing.assert_allclose(lr[55], 1e-3 + 9e-3 * 0.5, rtol=1e-5)  # half way down the cosine
  np.testing.assert_allclose(lr[100], 1e-3, rtol=1e-5)
  assert np.all(np.diff(lr[10:]) <= 1e-9)


def get(tree, path):
  for k in path:
    tree = tree[k]
  return tree


class Toy(nnx.Module):
  def __init__(self):
    self.dense = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
    self.norm = nnx.RMSNorm(2, rngs=nnx.Rngs(0))
    self.log_dt = nnx.Param(jnp.zeros(2))


def test_groups_weight_decay_and_ssm_multiplier():
  params = nnx.state(Toy(), nnx.Param)
  labels = optim.param_labels(params, optim.param_label)
  flat = {optim.path_names(p): v for p, v in jax.tree_util.tree_flatten_with_path(labels)[0]}
  assert flat == {("dense", "bias"): "no_decay", ("dense", "kernel"): "decay", ("norm", "scale"): "no_decay",
                  ("log_dt",): "ssm"}
  # Zero gradients: the Adam step is 0, so an update is exactly -lr · (wd · p) on 'decay' params only.
  tx = optim.make_optimizer(train_config(warmup_steps=0), optim.param_label)
  zeros = jax.tree.map(jnp.zeros_like, params)
  updates, _ = tx.update(zeros, tx.init(params), params)
  np.testing.assert_allclose(updates["dense"]["kernel"][...], -1e-2 * 0.5 * params["dense"]["kernel"][...],
                             rtol=1e-6)
  for path in (("dense", "bias"), ("norm", "scale"), ("log_dt",)):
    assert not np.any(get(updates, path)[...]), path
  # Unit gradients: Adam's first step is ±1 per entry, times lr (×0.1 for the SSM group).
  ones = jax.tree.map(jnp.ones_like, params)
  tx = optim.make_optimizer(train_config(warmup_steps=0, weight_decay=0.0, grad_clip=0.0), optim.param_label)
  updates, _ = tx.update(ones, tx.init(params), params)
  np.testing.assert_allclose(updates["log_dt"][...], -1e-3, rtol=1e-4)
  np.testing.assert_allclose(updates["dense"]["bias"][...], -1e-2, rtol=1e-4)


def test_clipping_by_global_norm():
  """Clipping acts before Adam: clipped gradients (norm 20 -> 1) give the same second update as feeding the
  pre-clipped gradients to an optimizer without clipping, and a different one from not clipping."""
  def second_update(grad_clip, g1):
    tx = optim.make_optimizer(train_config(grad_clip=grad_clip, weight_decay=0.0), lambda path: "decay")
    params = {"w": jnp.zeros(4)}
    opt_state = tx.init(params)
    _, opt_state = tx.update(g1, opt_state, params)
    return tx.update({"w": jnp.full((4,), 0.1)}, opt_state, params)[0]["w"]
  g1 = {"w": jnp.full((4,), 10.0)}
  clipped = second_update(1.0, g1)
  np.testing.assert_allclose(clipped, second_update(0.0, {"w": jnp.full((4,), 0.5)}), rtol=1e-6)
  assert not np.allclose(clipped, second_update(0.0, g1), rtol=1e-3)


def test_bad_values_and_labels():
  with pytest.raises(ValueError, match="learning_rate must be > 0"):
    optim.make_optimizer(train_config(learning_rate=0.0), optim.param_label)
  with pytest.raises(ValueError, match="returned 'oops'; valid: decay, no_decay, ssm"):
    optim.param_labels({"w": jnp.zeros(1)}, lambda path: "oops")
