"""Config and user-input validation before anything compiles: ConfigError and check_config (train and evaluate
both use them), with the range checks on config values that the model's and optimizer's own checks do not cover
(check_bounds) and a memory floor (check_memory), so a bad value is one ConfigError line, not a traceback
mid-run. The ops' input checks are linear_seq/checks.py."""
import os

import jax
import ml_collections

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


# check_bounds: dotted field -> (lowest allowed, highest allowed or None, what it must be)
_RANGES = {
    "data.batch_size": (1, None, "> 0"),
    "data.seq_len": (1, None, "> 0"),
    "data.shuffle_seed": (0, 2**32 - 1, "in [0, 2**32)"),
    "eval.batch_size": (1, None, "> 0"),
    "eval.seq_len": (0, None, ">= 0 (0: data.seq_len)"),
    "eval.max_batches": (0, None, ">= 0 (0: the whole split)"),
    "eval.interim_max_batches": (0, None, ">= 0 (0: as eval.max_batches)"),
    "train.warmup_steps": (0, None, ">= 0"),
    "train.keep_checkpoints": (0, None, ">= 0 (0: keep all)"),
    "train.loss_positions": (0, None, ">= 0 (0: logits at every position)"),
    "train.grad_accum_steps": (1, None, ">= 1 (1: one pass per step)"),
    "train.end_lr_fraction": (0.0, 1.0, "in [0, 1]"),
    "train.b1": (0.0, 1.0, "in [0, 1)"),
    "train.b2": (0.0, 1.0, "in [0, 1)"),
    "model.redraw_every": (0, None, ">= 0 (0: never)"),
    "model.gate_rank": (1, None, "> 0"),
    "model.gate_temperature": (0.0, None, "> 0"),
}
_OPEN_ABOVE = ("train.b1", "train.b2")
_OPEN_BELOW = ("model.gate_temperature",)


def check_bounds(config: ml_collections.ConfigDict) -> None:
  """ValueError naming every field out of its range (fields a config does not have are skipped); check_config
  calls this first."""
  bad = []
  for key, (low, high, what) in _RANGES.items():
    section, name = key.split(".")
    node = config.get(section)
    if node is None or name not in node:
      continue
    value = node[name]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
      bad.append(f"{key} must be a number {what}, got {value!r}")
      continue
    too_high = high is not None and (value >= high if key in _OPEN_ABOVE else value > high)
    too_low = value <= low if key in _OPEN_BELOW else value < low
    if too_low or too_high:
      bad.append(f"{key} must be {what}, got {value!r}")
  if bad:
    raise ValueError("; ".join(bad))


def memory_floor(config: ml_collections.ConfigDict, vocab_size: int) -> dict[str, tuple[int, str]]:
  """A lower bound on the activation bytes of one training step and one evaluation batch, from the sizes
  alone: {'data': (bytes, what), 'eval': (bytes, what)}. Training keeps at least every block's input for the
  backward pass and the float32 logits and their gradient; evaluation at least the logits. The real peak is
  higher (mixer states, MLPs), so a size over the machine's memory cannot run."""
  d, layers = int(config.model.d_model), int(config.model.num_layers)
  b, t = int(config.data.batch_size), int(config.data.seq_len)
  positions = min(int(config.train.get("loss_positions", 0)) or t, t)
  eval_b, eval_t = int(config.eval.batch_size), int(config.eval.seq_len or t)
  return {"data": (4 * b * (t * d * (layers + 1) + 2 * positions * vocab_size),
                   f"data.batch_size × data.seq_len = {b} × {t} tokens"),
          "eval": (4 * eval_b * eval_t * (d + vocab_size),
                   f"eval.batch_size × eval.seq_len = {eval_b} × {eval_t} tokens")}


def check_memory(config: ml_collections.ConfigDict, vocab_size: int, available: int) -> None:
  """ValueError when memory_floor's training or evaluation bytes exceed `available` (the devices' memory),
  before anything is allocated (such a size would run out of memory, or hang building the batch)."""
  gib = lambda n: f"{n / 2**30:,.1f} GiB"
  for section, (need, what) in memory_floor(config, vocab_size).items():
    if need > available:
      raise ValueError(f"{what} need at least {gib(need)} of activations (d_model {config.model.d_model}, "
                       f"{config.model.num_layers} layers, vocabulary {vocab_size}), more than the {gib(available)} "
                       f"of memory here: lower {section}.batch_size or {section}.seq_len")


def layer_mixer_names(model: ml_collections.ConfigDict) -> list[str]:
  """The mixer of every layer: config.model.layer_mixers split on commas, else [config.model.mixer]."""
  names = [s.strip() for s in model.layer_mixers.split(",")] if model.layer_mixers else [model.mixer]
  return [n for n in names if n]


def check_config(config: ml_collections.ConfigDict):
  """Fails fast, before any compile: unknown dataset / mixer / feature map (listing the valid names), model or
  optimizer values that cannot work (ModelConfig's and optim's checks), batch sizes whose activations cannot
  fit in the devices' memory (check_memory). Plug-in modules (config.imports) are imported first.
  Returns the dataset info."""
  try:
    check_bounds(config)
    plugins.import_modules(config)
    info = data.dataset_info(config.data)
    for name in layer_mixer_names(config.model):
      mixers.get(name)
    if "linear" in layer_mixer_names(config.model):
      ops.feature_map(config.model.feature_map)
    steps.model_config(config, info.vocab_size)
    check_memory(config, int(config.model.vocab_size or info.vocab_size), device_memory())
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
