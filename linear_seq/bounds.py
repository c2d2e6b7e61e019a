"""Range checks on config values that the model's and optimizer's own checks do not cover (train.check_config
calls this, so a bad value is one ConfigError line before anything compiles, not a traceback mid-run)."""
import ml_collections

# dotted field -> (lowest allowed, highest allowed or None, what it must be)
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
  """ValueError naming every field out of its range (fields a config does not have are skipped)."""
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
