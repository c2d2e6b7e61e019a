"""Per-backend loop tuning of the chunk forms: one table keyed by JAX backend, overridable (config, tests).

Fields (read when an op is traced, for `jax.default_backend()`):
  delta_group_tokens: tokens per rematerialized outer group of the delta rule's chunk form
    (delta_chunk.py); None runs the whole sequence as one group (no outer scan, no recomputation).
  small_block: the delta rule's triangular inverse multiplies blocks up to this size as fused elementwise
    products instead of dots (delta_chunk.py).
  chunk_size: the chunk length the models use when `model.chunk_size` is 0 (the ops' own default stays 64).
  linear_group_tokens: tokens per rematerialized outer group of the linear recurrence's chunk form (chunk.py,
    used by linear, retention, gla, mamba2); None runs the whole sequence as one group.
  memory_budget: None, or bytes: then both chunk forms ignore their *_group_tokens and choose, per call shape,
    the largest group whose compiled forward+backward fits in the budget (group_budget.py; the measurement
    compiles the op on the current backend, once per shape).

CPU: the values measured on 2 cores (delta_chunk.py's and chunk.py's comments give the measurements); the CPU
program is the one these ops compiled before the table existed. GPU/TPU: the delta rule without remat groups
(one pass: the outer lax.scan's sequential small kernels and the backward's recomputation cost more there than
the memory; set memory_budget, or a group size, to bound the activation memory), chunk 64; the linear form keeps
the 512-token groups it had on every backend, since one group at studies/accel_check.py's largest shape
(B, H, K = 8, 16, 128, T = 32768, bf16 operands) compiles to 79.2 GiB against 29.6 GiB at 512 (CPU compiled
memory analysis), past an H100's 78 GiB. The accelerator values are not
measured here. The linear chunk form has no small-block threshold: its vector-gate splitting's lowest level
(1×1 blocks) is an elementwise product always, and 2×2 / 4×4 blocks that way crashed XLA 0.10.2's CPU runtime
at T=8192 (experiments/benchmark/README.md).
"""
import contextlib
import dataclasses
from typing import Iterator, Optional

import jax


@dataclasses.dataclass(frozen=True)
class Tuning:
  delta_group_tokens: Optional[int]
  small_block: int
  chunk_size: int
  linear_group_tokens: Optional[int]
  memory_budget: Optional[int]


TABLE = {
    "cpu": Tuning(delta_group_tokens=256, small_block=4, chunk_size=16, linear_group_tokens=512,
                  memory_budget=None),
    "gpu": Tuning(delta_group_tokens=None, small_block=4, chunk_size=64, linear_group_tokens=512,
                  memory_budget=None),
    "tpu": Tuning(delta_group_tokens=None, small_block=4, chunk_size=64, linear_group_tokens=512,
                  memory_budget=None),
}
_OPTIONAL = ("delta_group_tokens", "linear_group_tokens", "memory_budget")   # None is a value
FIELDS = tuple(f.name for f in dataclasses.fields(Tuning))
_overrides: dict = {}


def current(backend: Optional[str] = None) -> Tuning:
  """The table's row for `backend` (default: jax.default_backend(); unknown ones get the GPU row) + overrides."""
  backend = backend or jax.default_backend()
  return dataclasses.replace(TABLE.get(backend, TABLE["gpu"]), **_overrides)


def _check(fields: dict) -> dict:
  for name, value in fields.items():
    if name not in FIELDS:
      raise ValueError(f"tuning: unknown field {name!r}; expected one of {FIELDS}")
    ok = isinstance(value, int) and not isinstance(value, bool) and value > 0
    if not (ok or (value is None and name in _OPTIONAL)):
      raise ValueError(f"tuning: {name} must be a positive int{' or None' * (name in _OPTIONAL)}; "
                       f"got {value!r}")
  return fields


def set_overrides(**fields) -> None:
  """Replaces the process-wide overrides (start-up, from the config); fields not given use the table."""
  global _overrides
  _overrides = dict(_check(fields))


@contextlib.contextmanager
def override(**fields) -> Iterator[None]:
  """Within the block (functions traced there), these fields replace the table's."""
  global _overrides
  previous = _overrides
  _overrides = {**previous, **_check(fields)}
  try:
    yield
  finally:
    _overrides = previous
