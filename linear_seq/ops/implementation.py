"""Which implementation runs a recurrence op, resolved per backend (as recurrentgemma's `resolve_scan_type`).

`linear_recurrence` and `delta_rule` take `implementation=None | 'auto' | 'xla'`. None and 'auto' resolve from
the backend through DEFAULTS; today every backend resolves to 'xla', the forms written in XLA (recurrence.py,
chunk.py, delta_chunk.py, ...), which stay the exact reference any kernel is tested against. A kernel (Pallas,
Triton) joins IMPLEMENTATIONS with the backends it runs on, and becomes a default only after it passes the
float64-reference tests and the cross-platform export test (tests/test_export.py).
"""
from typing import Optional

import jax

from linear_seq import checks

IMPLEMENTATIONS = ("xla",)
DEFAULTS = {"cpu": "xla", "gpu": "xla", "tpu": "xla"}


def resolve(implementation: Optional[str], backend: Optional[str] = None) -> str:
  """The implementation to run: `implementation` itself, or for None / 'auto' the backend's default."""
  if implementation is None or implementation == "auto":
    return DEFAULTS.get(backend or jax.default_backend(), "xla")
  checks.check_choice("implementation", implementation, IMPLEMENTATIONS + ("auto",))
  return implementation
