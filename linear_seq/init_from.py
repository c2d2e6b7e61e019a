"""train.init_from: a new run's model from another workdir's checkpoint (fine-tuning, e.g. a converted model).

  python -m linear_seq.main --config=configs/workdir.py:runs/llama --workdir=runs/llama_ft \
      --config.train.init_from=runs/llama --config.data.dataset=local_text --config.data.path=corpus/

restore() reads the source workdir's config.json and its latest intact checkpoint (each step verified against
its integrity manifest first; a damaged latest falls back to an older one with a warning), and gives the
model: its parameters and its other state (e.g. random-feature projections). The trainer starts from them at
step 0 with a fresh optimizer state and this config's data order and schedule. The source is opened read-only:
nothing there is written, moved or quarantined.

Compatibility: every model.* field must equal the source's (fields its config.json predates count at their
defaults), except the compute forms COMPUTE_FIELDS, and the parameters' shapes must match (the effective
vocabulary, when model.vocab_size = 0 takes it from the data). A problem raises validation.ConfigError (not a
workdir, another architecture: naming the field) or checkpoint.CheckpointError (no or no intact checkpoint),
before the trainer creates its workdir.
"""
import dataclasses
import os
from typing import Any

import jax
import ml_collections

from linear_seq import checkpoint
from linear_seq import config_lib
from linear_seq import data
from linear_seq import model as model_lib
from linear_seq import plugins
from linear_seq import steps
from linear_seq import validation

# model.* fields that choose how the same model is computed (not its parameters or function): may differ.
COMPUTE_FIELDS = ("model.dtype", "model.mode", "model.chunk_size", "model.attention_impl")


def check_compatible(source_config: ml_collections.ConfigDict, config: ml_collections.ConfigDict,
                     source: str) -> None:
  """ConfigError naming the first model.* field (not in COMPUTE_FIELDS) whose value differs from the source's."""
  theirs, ours = (config_lib.flatten(config_lib.to_dict(c.model), "model.") for c in (source_config, config))
  defaults = {f"model.{f.name}": f.default for f in dataclasses.fields(model_lib.ModelConfig)
              if f.default is not dataclasses.MISSING}
  missing = object()
  for key in sorted(set(theirs) | set(ours)):
    if key in COMPUTE_FIELDS:
      continue
    there, here = theirs.get(key, defaults.get(key, missing)), ours.get(key, defaults.get(key, missing))
    if there != here:
      show = lambda v: "(absent)" if v is missing else repr(v)  # pylint: disable=unnecessary-lambda-assignment
      raise validation.ConfigError(
          f"train.init_from={source!r} holds another architecture: {key} is {show(there)} there, {show(here)} "
          f"here (fine-tuning keeps every model.* field but {', '.join(f[6:] for f in COMPUTE_FIELDS)}; start "
          f"from its config: --config=configs/workdir.py:{source})")


def _vocab_size(source_config: ml_collections.ConfigDict, source: str) -> int:
  if int(source_config.model.vocab_size):
    return int(source_config.model.vocab_size)
  try:
    plugins.import_modules(source_config)
    return data.restored_info(source_config.data, source).vocab_size
  except (KeyError, ValueError, OSError) as e:
    raise validation.ConfigError(f"train.init_from={source!r}: its vocabulary size cannot be read ({e})") from e


def check_source(source: str) -> ml_collections.ConfigDict:
  """The source workdir's config; ConfigError if it is not a folder or has no readable config.json."""
  if not os.path.isdir(source):
    raise validation.ConfigError(f"train.init_from={source!r} is not a folder (a workdir to fine-tune from)")
  try:
    return config_lib.load_saved(source)
  except FileNotFoundError as e:
    raise validation.ConfigError(f"train.init_from={source!r} has no config.json: not a workdir (train or "
                                 "linear_seq.convert one first)") from e
  except ValueError as e:
    raise validation.ConfigError(f"train.init_from={source!r}: {e}") from e


def restore(source: str, config: ml_collections.ConfigDict, vocab_size: int, mesh: jax.sharding.Mesh,
            abstract: steps.State) -> tuple[int, Any, Any]:
  """(the source's step, params, rest) for this run (`abstract`: its train state from steps.setup); the
  arrays are on the source's shardings (the trainer puts them on its own)."""
  source_config = check_source(source)
  check_compatible(source_config, config, source)
  theirs = _vocab_size(source_config, source)
  ours = int(config.model.vocab_size) or int(vocab_size)
  if theirs != ours:
    raise validation.ConfigError(f"train.init_from={source!r} holds another architecture: its vocabulary has "
                                 f"{theirs} entries, this run's {ours} (model.vocab_size, or the data's)")
  try:
    _, source_abstract, source_shardings = steps.setup(source_config, theirs, mesh)
  except (KeyError, ValueError) as e:
    raise validation.ConfigError(f"train.init_from={source!r}: its config.json does not build a model ({e})") from e
  if not os.path.isdir(checkpoint.checkpoint_dir(source)):
    raise checkpoint.CheckpointError(f"train.init_from={source!r} holds no checkpoints (nothing trained or "
                                     "converted there)")
  ckpt = checkpoint.Checkpointer(source, read_only=True)
  try:
    step, state, _ = ckpt.restore(checkpoint.abstract_like(source_abstract, source_shardings))
  except checkpoint.CheckpointError as e:   # (one line: the per-step reasons joined)
    reasons = "; ".join(line.strip() for line in str(e).splitlines() if line.strip())
    raise checkpoint.CheckpointError(f"train.init_from={source!r}: {reasons}; nothing was written") from e
  finally:
    ckpt.close()
  for part in ("params", "rest"):
    shapes = [jax.tree_util.tree_flatten_with_path(t)[0] for t in (state[part], abstract[part])]
    paths = [[jax.tree_util.keystr(p) for p, _ in s] for s in shapes]
    if paths[0] != paths[1]:
      raise validation.ConfigError(f"train.init_from={source!r} holds another architecture: its {part} are "
                                   f"{len(paths[0])} arrays, this model's {len(paths[1])}")
    for (path, there), (_, here) in zip(*shapes):
      if tuple(there.shape) != tuple(here.shape) or there.dtype != here.dtype:
        raise validation.ConfigError(
            f"train.init_from={source!r} holds another architecture: {part}{jax.tree_util.keystr(path)} is "
            f"{there.dtype}{list(there.shape)} there, {here.dtype}{list(here.shape)} here")
  return step, state["params"], state["rest"]
