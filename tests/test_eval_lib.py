"""The evaluation loop: sums accumulated on the device equal the per-batch float64 host sums."""
import os
import types

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from linear_seq import config_lib
from linear_seq import eval_lib
from linear_seq import sharding
from linear_seq import steps
from linear_seq import validation
from linear_seq.data import registry

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "configs")


def host_float64_totals(state, static, config, split="validation"):
  """The loop as it was: every batch's loss terms fetched to the host and added in float64."""
  @jax.jit
  def terms(params, rest, batch):   # one compile (eagerly, the mixers' scans were traced and compiled per batch)
    logits, _ = nnx.merge(static.graphdef, params, rest)(batch["inputs"], segment_ids=batch.get("segment_ids"))
    return steps.loss_terms(logits, batch)

  totals, batches = None, 0
  for batch in eval_lib.make_eval_iterator(config, split):
    sums = jax.device_get(terms(state["params"], state["rest"], batch))
    sums = {k: np.asarray(v, np.float64) for k, v in sums.items()}
    totals = sums if totals is None else {k: totals[k] + sums[k] for k in totals}
    batches += 1
  return totals, batches


def test_device_accumulation_equals_host_float64_sums(monkeypatch):
  config = config_lib.load_sibling(os.path.join(CONFIGS, "mqar.py"), "mqar").get_config("tiny=True")
  config = config_lib.apply_overrides(config, {"eval.batch_size": 4, "eval.max_batches": 0})  # the whole split
  info = validation.check_config(config)
  static, _, shardings = steps.setup(config, info.vocab_size, sharding.make_mesh())
  state = steps.init_state(config, info.vocab_size, static, shardings)
  monkeypatch.setattr(eval_lib, "PROGRESS_SECONDS", 0.0)  # a progress line before every batch but the first
  lines = []
  result = eval_lib.run_eval(state, static, config, info, position_loss=True, progress=lines.append)
  totals, batches = host_float64_totals(state, static, config)
  assert batches > 1 and result["eval_batches"] == batches
  assert lines == [f"evaluating the validation split: {batches} batches of 4 × 16 tokens (the first compiles)…",
                   *(f"evaluating the validation split: {k}/{batches} batches" for k in range(1, batches))]
  assert result["eval_tokens"] == int(totals["weight"])
  np.testing.assert_allclose(result["eval_loss"], totals["nll"] / totals["weight"], rtol=1e-6)
  np.testing.assert_allclose(result["accuracy"], totals["correct"] / totals["weight"], rtol=1e-6)
  expected = [n / c if c > 0 else None for n, c in zip(totals["position_nll"], totals["position_weight"])]
  assert [p is None for p in result["position_loss"]] == [e is None for e in expected]
  np.testing.assert_allclose([p for p in result["position_loss"] if p is not None],
                             [e for e in expected if e is not None], rtol=1e-6)


def test_compensated_sum_keeps_float64_accuracy():
  """3,000 additions of a fraction and of a count past 2**24: plain float32 drifts, the accumulator does not."""
  r = np.random.default_rng(0)
  xs = r.uniform(0.0, 1.0, 3000).astype(np.float32)
  ones = {"nll": np.float32(0.0), "weight": np.float32(2.0 ** 25)}
  acc = (ones, jax.tree.map(np.zeros_like, ones))
  naive = np.float32(2.0 ** 25)
  for x in xs:
    acc = eval_lib._accumulate(acc, {"nll": x, "weight": np.float32(1.0)})
    naive = naive + np.float32(1.0)
  total = {k: float(acc[0][k]) + float(acc[1][k]) for k in ones}
  assert total["weight"] == 2.0 ** 25 + 3000 and naive == np.float32(2.0 ** 25)  # float32 alone loses every 1
  np.testing.assert_allclose(total["nll"], np.sum(xs.astype(np.float64)), rtol=1e-12)


def test_an_evaluation_builds_its_examples_once(monkeypatch):
  """run_eval counts its batches and iterates over the same examples: data.make_examples runs once per evaluation
  (it ran twice: num_batches built them, then the iterator again), and the count is still the iterator's."""
  config = config_lib.load_sibling(os.path.join(CONFIGS, "mqar.py"), "mqar").get_config("tiny=True")
  config = config_lib.apply_overrides(config, {"eval.batch_size": 4, "eval.max_batches": 0})
  builds = []
  real = registry.make_examples

  def counted(*args, **kwargs):
    builds.append(args[1])
    return real(*args, **kwargs)

  monkeypatch.setattr(registry, "make_examples", counted)  # (data.make_iterator calls it there)
  monkeypatch.setattr(eval_lib.data, "make_examples", counted)
  # a stand-in for the compiled evaluation step: the batch's weight and token sums
  static = types.SimpleNamespace(mesh=sharding.make_mesh(), eval_step=lambda params, rest, batch: {
      "nll": jnp.sum(batch["inputs"] * batch["weights"]), "weight": jnp.sum(batch["weights"]),
      "correct": jnp.sum(batch["weights"])})
  result = eval_lib.run_eval({"params": {}, "rest": {}}, static, config, types.SimpleNamespace(kind="synthetic"))
  assert builds == ["validation"]
  assert result["eval_batches"] == -(-int(config.data.num_eval) // 4) == eval_lib.num_batches(config)
  assert builds == ["validation", "validation"]  # num_batches alone still builds them
