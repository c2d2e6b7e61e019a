"""Per-platform settings applied once at start-up from the config: matmul precision and the ops' tuning.

`train.matmul_precision` ('' = the platform's default: TF32 for float32 matmuls on recent NVIDIA GPUs, one
bfloat16 pass on TPUs, float32 on CPU) becomes jax_default_matmul_precision; `train.delta_group_tokens`,
`train.linear_group_tokens`, `train.small_block` and `train.memory_budget_mib` (0 = the backend's row of
ops/tuning.py's table) become the tuning overrides. Products the ops mark exact (the delta rule's triangular
solve) run at HIGHEST whatever this says (ops/precision.py).
"""
import jax
import ml_collections

from linear_seq.ops import tuning

MATMUL_PRECISIONS = ("", "default", "high", "highest", "bfloat16", "tensorfloat32", "float32")


def overrides(train: ml_collections.ConfigDict) -> dict:
  """The tuning overrides the config asks for (ValueError on a value that cannot work)."""
  out = {}
  for field in ("delta_group_tokens", "linear_group_tokens"):
    group = int(train.get(field, 0))
    if group < -1:
      raise ValueError(f"train.{field} must be 0 (the backend's), -1 (no groups) or a positive number of "
                       f"tokens; got {group}")
    if group:
      out[field] = None if group == -1 else group
  small = int(train.get("small_block", 0))
  if small < 0:
    raise ValueError(f"train.small_block must be 0 (the backend's) or positive; got {small}")
  if small:
    out["small_block"] = small
  budget = float(train.get("memory_budget_mib", 0))
  if budget < 0:
    raise ValueError(f"train.memory_budget_mib must be 0 (no budget) or a positive number of MiB; got {budget:g}")
  if budget:
    out["memory_budget"] = max(1, int(budget * 2 ** 20))
  return out


def check(train: ml_collections.ConfigDict) -> None:
  """ValueError unless the config's precision and tuning fields are valid."""
  precision = str(train.get("matmul_precision", ""))
  if precision not in MATMUL_PRECISIONS:
    raise ValueError(f"train.matmul_precision must be one of {', '.join(map(repr, MATMUL_PRECISIONS))}; "
                     f"got {precision!r}")
  overrides(train)


def apply(train: ml_collections.ConfigDict) -> None:
  """Sets the matmul precision (unless '') and the tuning overrides, process-wide (call once, before tracing)."""
  check(train)
  precision = str(train.get("matmul_precision", ""))
  if precision:
    jax.config.update("jax_default_matmul_precision", precision)
  tuning.set_overrides(**overrides(train))
