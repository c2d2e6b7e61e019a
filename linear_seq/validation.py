"""Config validation before anything compiles: ConfigError and check_config (train and evaluate both use them)."""
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
  optimizer values that cannot work (ModelConfig's and optim's checks). Plug-in modules (config.imports) are
  imported first. Returns the dataset info."""
  try:
    bounds.check_bounds(config)
    plugins.import_modules(config)
    info = data.dataset_info(config.data)
    for name in layer_mixer_names(config.model):
      mixers.get(name)
    if "linear" in layer_mixer_names(config.model):
      ops.feature_map(config.model.feature_map)
    steps.model_config(config, info.vocab_size)
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
