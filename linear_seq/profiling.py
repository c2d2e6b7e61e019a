"""Profiling: `--config.train.profile_steps=START,END` traces training steps START..END with jax.profiler.

The trace goes to WORKDIR/profile/ (plugins/profile/<run>/<host>.xplane.pb, plus a Perfetto trace.json.gz),
viewable with `tensorboard --logdir WORKDIR/profile` (Profile tab, needs the `tensorboard-plugin-profile`
package) or in Perfetto (https://ui.perfetto.dev, open the .trace.json.gz). Pick START after the first step
so compilation is not in the trace.
"""
import os
from typing import Optional

import jax

PROFILE_DIR = "profile"


def parse_steps(spec: str) -> Optional[tuple[int, int]]:
  """'START,END' -> (START, END) with 1 <= START <= END; '' -> None; ValueError otherwise (one line)."""
  if not spec:
    return None
  parts = str(spec).split(",")
  try:
    start, end = (int(p) for p in parts)
  except ValueError:
    raise ValueError(f"train.profile_steps must be 'START,END' (two step numbers), got {spec!r}") from None
  if not 1 <= start <= end:
    raise ValueError(f"train.profile_steps needs 1 <= START <= END, got {spec!r}")
  return start, end


class Profiler:
  """Starts a trace before step START (or the first step after it, when resuming inside the range) and stops it
  after step END once the step's results are ready."""

  def __init__(self, spec: str, workdir: str):
    self.steps = parse_steps(spec)
    self.directory = os.path.join(workdir, PROFILE_DIR)
    self._active = self._done = False

  def before(self, step: int) -> None:
    if self.steps and not (self._active or self._done) and self.steps[0] <= step <= self.steps[1]:
      os.makedirs(self.directory, exist_ok=True)
      jax.profiler.start_trace(self.directory, create_perfetto_trace=True)
      self._active = True

  def after(self, step: int, outputs) -> None:
    if self._active and step >= self.steps[1]:
      jax.block_until_ready(outputs)
      self.close()

  def close(self) -> None:
    if self._active:
      jax.profiler.stop_trace()
      self._active, self._done = False, True
