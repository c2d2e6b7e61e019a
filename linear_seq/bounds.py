"""Range checks on config values that the model's and optimizer's own checks do not cover (train.check_config
calls this, so a bad value is one ConfigError line before anything compiles, not a traceback mid-run)."""
import ml_collections

# dotted field -> (lowest allowed, highest allowed or None, what it must be)
_RANGES = {
    "data.batch_size": (1, None, "> 0"),
    "data.seq_len": (1, None, "> 0"),
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
}
_OPEN_ABOVE = ("train.b1", "train.b2")


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
    if value < low or too_high:
      bad.append(f"{key} must be {what}, got {value!r}")
  if bad:
    raise ValueError("; ".join(bad))
