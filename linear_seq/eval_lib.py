"""Evaluation over a split: weighted loss (nats/token), perplexity, bits per byte (text), accuracy (synthetic).

The validation iterator walks the whole split once in non-overlapping windows of eval.seq_len tokens (the last
partial batch padded with weight 0), or its first eval.max_batches batches when that cap is set (the evaluations
during training before its last step: at most eval.interim_max_batches batches when that is set). The per-batch
sums stay on the device: they are added there in float32 with compensated (Neumaier) summation, which keeps
float64-like accuracy over many batches, and come to the host once at the end (no round trip per batch).
Progress goes to `progress` (the log by default): the number of batches before the first (which compiles),
then batches done / total every PROGRESS_SECONDS.
"""
import math
import time
from typing import Any, Callable, Optional

from absl import logging
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from linear_seq import data
from linear_seq import sharding
from linear_seq import steps
from linear_seq import validation
from linear_seq.data import pipeline


PROGRESS_SECONDS = 10.0


def eval_seq_len(config: ml_collections.ConfigDict) -> int:
  return int(config.eval.seq_len or config.data.seq_len)


def eval_lengths(config: ml_collections.ConfigDict) -> tuple[int, ...]:
  """config.eval.lengths ('80,160,320', '' = none): the further evaluation lengths; ValueError unless each is a
  positive integer."""
  value = config.eval.get("lengths", "")
  items = [v.strip() for v in value.split(",") if v.strip()] if isinstance(value, str) else list(value)
  try:
    lengths = tuple(int(v) for v in items)
  except ValueError:
    lengths = ()
  if len(lengths) != len(items) or any(n <= 0 for n in lengths):
    raise ValueError(f"eval.lengths must be comma-separated positive integers (e.g. '80,160,320'), got {value!r}")
  return lengths


def eval_examples(config: ml_collections.ConfigDict, split: str = "validation") -> pipeline.Examples:
  """The split's evaluation examples: rows of eval_seq_len tokens, in order."""
  return data.make_examples(config.data, split, seq_len=eval_seq_len(config), seed=int(config.data.shuffle_seed))


def make_eval_iterator(config: ml_collections.ConfigDict, split: str = "validation",
                       examples: Optional[pipeline.Examples] = None):
  """The split's evaluation batches, once through (examples: eval_examples(config, split), built here if None)."""
  return data.make_iterator(config.data, split, batch_size=int(config.eval.batch_size),
                            seq_len=eval_seq_len(config), seed=int(config.data.shuffle_seed),
                            shard_index=jax.process_index(), shard_count=jax.process_count(), repeat=False,
                            examples=examples)


def num_batches(config: ml_collections.ConfigDict, split: str = "validation",
                examples: Optional[pipeline.Examples] = None) -> int:
  """How many batches make_eval_iterator gives (eval.max_batches caps it); examples: as make_eval_iterator's
  (pass the ones the iterator gets, so that they are built once)."""
  examples = eval_examples(config, split) if examples is None else examples
  total = -(-len(examples) // int(config.eval.batch_size))
  return min(total, int(config.eval.max_batches)) if int(config.eval.max_batches) else total


@jax.jit
def _accumulate(acc, sums):
  """(total, compensation) += sums, leafwise: Neumaier's compensated float32 sum (counts stay exact past 2**24)."""
  total, comp = acc
  new = jax.tree.map(jnp.add, total, sums)
  lost = jax.tree.map(lambda s, x, t: jnp.where(jnp.abs(s) >= jnp.abs(x), (s - t) + x, (x - t) + s),
                      total, sums, new)
  return new, jax.tree.map(jnp.add, comp, lost)


def run_eval(state: steps.State, static: steps.Static, config: ml_collections.ConfigDict,
             info: Any, *, split: str = "validation", position_loss: bool = False,
             interim: bool = False, progress: Callable[[str], None] = logging.info) -> dict[str, Any]:
  """-> {eval_loss, perplexity, bits_per_byte (text) | accuracy (synthetic), eval_tokens, eval_batches
  [, position_loss: list per position]}. interim: an evaluation during training before its last step, which also
  stops at eval.interim_max_batches batches when that is set (every evaluation stops at eval.max_batches if set).
  `progress` gets the progress lines (module docstring)."""
  sharding.check_batch_size(int(config.eval.batch_size), static.mesh, "eval.batch_size")
  caps = [int(config.eval.max_batches)] + ([int(config.eval.get("interim_max_batches", 0))] if interim else [])
  max_batches = min([c for c in caps if c], default=0)
  acc = None  # (total, compensation) on the device
  batches = 0
  examples = eval_examples(config, split)  # once per evaluation: counted, then iterated
  total = num_batches(config, split, examples)
  total = min(total, max_batches) if max_batches else total
  progress(f"evaluating the {split} split: {total} batches of {config.eval.batch_size} × {eval_seq_len(config)} "
           "tokens (the first compiles)…")
  last = time.perf_counter()
  for local in make_eval_iterator(config, split, examples):
    if max_batches and batches >= max_batches:
      break
    if batches and time.perf_counter() - last >= PROGRESS_SECONDS:
      jax.block_until_ready(acc)  # (batches done, not only dispatched)
      progress(f"evaluating the {split} split: {batches}/{total} batches")
      last = time.perf_counter()
    validation.check_loss_positions(local, config)
    batch = sharding.global_batch(local, static.mesh)
    sums = static.eval_step(state["params"], state["rest"], batch)
    acc = (sums, jax.tree.map(jnp.zeros_like, sums)) if acc is None else _accumulate(acc, sums)
    batches += 1
  totals: Optional[dict[str, np.ndarray]] = None
  if acc is not None:
    total, comp = jax.device_get(acc)
    totals = {k: np.asarray(total[k], np.float64) + np.asarray(comp[k], np.float64) for k in total}
  if totals is None or totals["weight"] <= 0:
    raise ValueError(f"the {split} split of {config.data.dataset!r} gave no evaluation tokens "
                     f"(eval.seq_len={eval_seq_len(config)}, eval.batch_size={config.eval.batch_size})")
  loss = float(totals["nll"] / totals["weight"])
  out = {"eval_loss": loss, "perplexity": math.exp(min(loss, 700.0)),
         "eval_tokens": int(totals["weight"]), "eval_batches": batches}
  if info.kind == "text":
    # bits/byte = total nats / ln 2 / bytes predicted (specials such as BOS are not bytes).
    out["bits_per_byte"] = float(totals["nll"] / math.log(2) / max(totals["byte_weight"], 1.0))
  else:
    out["accuracy"] = float(totals["correct"] / totals["weight"])
  if position_loss:
    w = totals["position_weight"]
    out["position_loss"] = [float(n / c) if c > 0 else None for n, c in zip(totals["position_nll"], w)]
  return out

