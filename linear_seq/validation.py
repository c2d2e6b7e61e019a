"""Config validation before anything compiles: ConfigError and check_config (train and evaluate both use them)."""
import os

import jax
import ml_collections

from linear_seq import bounds
from linear_seq import data
from linear_seq import mixers
from linear_seq import ops
from linear_seq import optim
from linear_seq import plugins
from linear_seq import profiling
from linear_seq import steps


class ConfigError(ValueError):
  """A config that cannot run (unknown names, bad sizes, a workdir trained with another model or data, an
  evaluation that finds no data)."""


def layer_mixer_names(model: ml_collections.ConfigDict) -> list[str]:
  """The mixer of every layer: config.model.layer_mixers split on commas, else [config.model.mixer]."""
  names = [s.strip() for s in model.layer_mixers.split(",")] if model.layer_mixers else [model.mixer]
  return [n for n in names if n]


def check_config(config: ml_collections.ConfigDict):
  """Fails fast, before any compile: unknown dataset / mixer / feature map (listing the valid names), model or
  optimizer values that cannot work (ModelConfig's and optim's checks), batch sizes whose activations cannot
  fit in the devices' memory (bounds.check_memory). Plug-in modules (config.imports) are imported first.
  Returns the dataset info."""
  try:
    bounds.check_bounds(config)
    plugins.import_modules(config)
    info = data.dataset_info(config.data)
    for name in layer_mixer_names(config.model):
      mixers.get(name)
    if "linear" in layer_mixer_names(config.model):
      ops.feature_map(config.model.feature_map)
    steps.model_config(config, info.vocab_size)
    bounds.check_memory(config, int(config.model.vocab_size or info.vocab_size), device_memory())
    optim.make_optimizer(config.train)
    profiling.parse_steps(config.train.get("profile_steps", ""))
  except (KeyError, ValueError) as e:
    raise ConfigError(str(e).strip("'\"")) from e
  if config.train.num_steps < 0 or min(config.train.log_every, config.train.eval_every,
                                       config.train.checkpoint_every) <= 0:
    raise ConfigError("train.num_steps must be >= 0 and train.log_every, eval_every, checkpoint_every > 0")
  return info


def check_loss_positions(local: dict, config: ml_collections.ConfigDict) -> None:
  """train.loss_positions must cover every row's weighted positions in this host batch, else the loss would
  drop some: a ConfigError saying the value needed (train and evaluate check each batch)."""
  try:
    steps.check_loss_positions(local["weights"], int(config.train.get("loss_positions", 0)))
  except ValueError as e:
    raise ConfigError(str(e)) from e


def check_data(config: ml_collections.ConfigDict) -> None:
  """The training and validation splits at their lengths exist and hold examples (synthetic tasks check their
  sizes: vocab_size, num_kv_pairs, num_train, num_eval ...; text: an empty validation split), so training does
  not fail at its first evaluation: ConfigError naming the field otherwise. Text streams are cached, so the
  trainer's iterators reuse what this reads."""
  eval_len = int(config.eval.get("seq_len", 0) or config.data.seq_len)
  for split, seq_len, count in (("train", int(config.data.seq_len), "num_train"),
                                ("validation", eval_len, "num_eval")):
    try:
      examples = data.make_examples(config.data, split, seq_len=seq_len, seed=int(config.data.shuffle_seed))
    except (KeyError, ValueError) as e:
      raise ConfigError(str(e).strip("'\"")) from e
    if not len(examples):  # pylint: disable=g-explicit-length-test  (a plug-in task, a text split without text)
      synthetic = data.DATASETS.get(config.data.dataset) == "synthetic"
      where = (f"data.{count}={config.data.get(count)}" if synthetic
               else f"data.path={config.data.path!r}, data.dataset={config.data.dataset!r}" if config.data.path
               else f"data.dataset={config.data.dataset!r}")
      raise ConfigError(f"the {split} split holds no {'examples' if synthetic else 'text'} ({where}): nothing to "
                        f"{'train on' if split == 'train' else 'evaluate'}")


def device_memory() -> int:
  """Bytes of memory the devices have together: the accelerators' limits summed (over every process), or
  the host's RAM for CPU devices (they share it)."""
  limits = []
  for d in jax.local_devices():
    try:
      limits.append((d.memory_stats() or {}).get("bytes_limit"))
    except Exception:  # pylint: disable=broad-except  (a backend without memory stats)
      limits.append(None)
  if limits and all(limits):
    return int(sum(limits)) * jax.process_count()
  return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * jax.process_count()
