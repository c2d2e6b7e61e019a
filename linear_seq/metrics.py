"""Training metrics: workdir/metrics.jsonl, TensorBoard event files (tensorboardX, no TensorFlow) and progress
output — a tqdm bar on an interactive terminal, plain log lines otherwise.

TensorBoard events go to workdir/tensorboard/<run>, <run> the workdir's folder name, so `tensorboard --logdir`
on a folder of workdirs (or on one workdir) names every run after its workdir.
TensorBoard tags are grouped: train/loss, train/learning_rate, train/grad_norm, train/tokens_per_sec, ...;
eval/loss, eval/bits_per_byte, eval/accuracy. Every line also goes to the log (with the bar, printed above
it) as `step 50/400 (12%, ETA 1m05s): train_loss=...`; the ETA is measured from the end of the first step,
so compilation is not in it.

TensorBoard events are written on a thread of their own behind a bounded queue, so a TensorBoard writer that
dies or hangs (tensorboardX's worker thread killed, e.g. by a wall-clock step back) costs its events, with one
warning, never a training step; a failing metrics.jsonl write (e.g. a full disk) is warned about once.

metrics.jsonl holds one JSON object per line: train lines {step, train_loss, learning_rate, tokens_per_sec, ...}
and eval lines {step, eval_loss, eval_accuracy?, ...}. On resume from step S the lines with step > S are dropped
first, so the file reads as one uninterrupted run (the trainer holds the workdir's lock, so no other writer
appends meanwhile; the truncated file replaces the old one atomically).
"""
import json
import logging as pylogging
import math
import os
import queue
import sys
import threading
import time
from typing import Mapping, Optional

from absl import logging

METRICS_FILE = "metrics.jsonl"
TENSORBOARD_DIR = "tensorboard"


_QUIET_LIBRARIES = ("orbax", "jax", "jaxlib", "grain", "tensorflow_datasets")


# Library warnings that say nothing to act on, dropped too: orbax's on every read-only restore (evaluate, load),
# TFDS's for every local corpus (its builder config, its first preparation: data/text.py logs TFDS's prints
# as 'TFDS: ...'). Matched on the format string (record.msg).
_NOTICES = ("Given directory is read only", "Using custom data configuration", "Variant folder ", "TFDS: ")


class _LibraryInfoFilter(pylogging.Filter):
  """Drops INFO (and lower) records logged from inside orbax / jax / grain / tfds, and the _NOTICES; other
  warnings and errors pass."""

  def filter(self, record: pylogging.LogRecord) -> bool:
    if str(record.msg).startswith(_NOTICES):
      return False
    if record.levelno > pylogging.INFO:
      return True
    return not any(f"{os.sep}{lib}{os.sep}" in record.pathname for lib in _QUIET_LIBRARIES)


def quiet_library_logs(verbose: bool = False) -> None:
  """Entry points call this so the plain progress lines are not drowned in orbax's per-save INFO logs and the
  libraries' notices; verbose=True (their --verbose) shows everything."""
  handler = logging.get_absl_handler()
  present = [f for f in handler.filters if isinstance(f, _LibraryInfoFilter)]
  if verbose:
    for f in present:
      handler.removeFilter(f)
  elif not present:
    handler.addFilter(_LibraryInfoFilter())


def read_metrics(workdir: str, *, quiet: bool = False) -> list[dict]:
  """The records of workdir/metrics.jsonl; unparsable lines (a last line cut short by a crash) are skipped with
  a warning (none with quiet=True)."""
  path = os.path.join(workdir, METRICS_FILE)
  if not os.path.isfile(path):
    return []
  out, bad = [], []
  with open(path, errors="replace") as f:
    for i, line in enumerate(f, 1):
      if not line.strip():
        continue
      try:
        record = json.loads(line)
      except json.JSONDecodeError:
        bad.append(i)
        continue
      if isinstance(record, dict) and isinstance(record.get("step", 0), int):
        out.append(record)
      else:
        bad.append(i)
  if bad and not quiet:
    logging.warning("%s: skipped %d unparsable line(s) (line %s; e.g. cut short by a crash)", path, len(bad),
                    ", ".join(map(str, bad[:5])))
  return out


def truncate_metrics(path: str, last_step: int) -> int:
  """Drops lines with step > last_step (and unparsable partial lines); returns how many were dropped."""
  if not os.path.exists(path):
    return 0
  kept, dropped = [], 0
  with open(path) as f:
    for line in f:
      try:
        record = json.loads(line)
      except json.JSONDecodeError:  # a line cut short by a crash
        dropped += 1
        continue
      if isinstance(record, dict) and isinstance(record.get("step", 0), int) and record.get("step", 0) <= last_step:
        kept.append(line if line.endswith("\n") else line + "\n")
      else:
        dropped += 1
  tmp = path + ".tmp"
  with open(tmp, "w") as f:
    f.writelines(kept)
  os.replace(tmp, path)
  return dropped


def _clean(value):
  """Python floats for JSON; non-finite floats become strings ('nan', 'inf') so the file stays strict JSON."""
  if isinstance(value, bool) or isinstance(value, (int, str)) or value is None:
    return value
  value = float(value)
  return value if math.isfinite(value) else str(value)


class _BackgroundTensorBoard:
  """tensorboardX's SummaryWriter driven from one daemon thread through a bounded queue: add_scalar never
  blocks; when the writer has died or is stuck, events are dropped with one warning (metrics.jsonl has them)."""

  def __init__(self, logdir: str, purge_step: Optional[int], max_pending: int = 10_000):
    self._queue: queue.Queue = queue.Queue(max_pending)
    self._error: Optional[str] = None
    self._worker: Optional[threading.Thread] = None  # tensorboardX's own writer thread
    self._warned = False
    self._thread = threading.Thread(target=self._run, args=(logdir, purge_step), daemon=True, name="tensorboard")
    self._thread.start()

  def _run(self, logdir: str, purge_step: Optional[int]) -> None:
    try:
      import tensorboardX  # pylint: disable=g-import-not-at-top  (slow import, only where metrics are written)
      writer = tensorboardX.SummaryWriter(logdir=logdir, purge_step=purge_step)
      event_writer = getattr(writer.file_writer, "event_writer", None)
      self._worker = getattr(event_writer, "_worker", None)
      pending = getattr(event_writer, "_event_queue", None)   # tensorboardX's queue: a put blocks once it is full
      while (item := self._queue.get()) is not None:
        # Never a blocking put: wait while its queue is full until the worker drains it or is found dead (it may
        # die after an is_alive() check that came before it ran).
        while pending is not None and pending.full() and not self._dead():
          time.sleep(0.01)
        if self._dead():
          return
        writer.add_scalar(*item)
      writer.close()
    except Exception as e:  # pylint: disable=broad-except  (whatever killed the writer: reported once)
      self._error = f"{type(e).__name__}: {e}"

  def _dead(self) -> bool:
    if self._error is None and self._worker is not None and not self._worker.is_alive():
      self._error = "tensorboardX's worker thread died"
    return self._error is not None or not self._thread.is_alive()

  def _drop(self, why: str) -> None:
    if not self._warned:
      self._warned = True
      logging.warning("TensorBoard writer %s: its events are dropped from now on (metrics.jsonl has them)", why)

  def add_scalar(self, tag: str, value: float, step: int) -> None:
    if self._dead():
      self._drop(f"stopped at step {step} ({self._error or 'its thread died'})")
      return
    try:
      self._queue.put_nowait((tag, value, step))
    except queue.Full:
      self._drop(f"is stuck at step {step} ({self._queue.maxsize} events pending)")

  def close(self, timeout: float = 30.0) -> None:
    try:
      self._queue.put_nowait(None)
    except queue.Full:
      pass
    self._thread.join(1.0 if self._dead() else timeout)
    if self._thread.is_alive() or self._dead() and self._error is not None:
      self._drop(f"stopped at the end ({self._error or 'stuck'})")


class MetricsWriter:
  """Writes metrics of one process (use `enabled=False` on non-primary hosts)."""

  def __init__(self, workdir: str, *, start_step: int = 0, total_steps: Optional[int] = None,
               enabled: bool = True, progress: Optional[bool] = None):
    self.enabled = enabled
    self.path = os.path.join(workdir, METRICS_FILE)
    self._file = self._tb = self._bar = None
    self.total_steps = total_steps
    self._ref: Optional[tuple[int, float]] = None  # (step, time) at the end of the first step: ETA's origin
    if not enabled:
      return
    os.makedirs(workdir, exist_ok=True)
    dropped = truncate_metrics(self.path, start_step)
    if dropped:
      logging.info("dropped %d metrics lines past the restored step %d", dropped, start_step)
    self._file = open(self.path, "a")
    self._file_error_warned = False
    self._tb = _BackgroundTensorBoard(tensorboard_dir(workdir), purge_step=start_step + 1 if start_step else None)
    if progress is None:
      progress = sys.stderr.isatty()
    if progress and total_steps:
      import tqdm  # pylint: disable=g-import-not-at-top
      self._bar = tqdm.tqdm(total=total_steps, initial=start_step, unit="step", dynamic_ncols=True)

  def write(self, step: int, metrics: Mapping[str, float]) -> None:
    """Appends {'step': step, **metrics} to metrics.jsonl, TensorBoard, and the progress output."""
    if not self.enabled:
      return
    record = {"step": int(step), **{k: _clean(v) for k, v in metrics.items()}}
    try:
      self._file.write(json.dumps(record) + "\n")
      self._file.flush()
    except OSError as e:  # e.g. a full disk: training goes on (its checkpoint save reports the disk)
      if not self._file_error_warned:
        self._file_error_warned = True
        logging.warning("cannot write %s at step %d (%s): metrics lines are being lost", self.path, step, e)
    is_eval = any(k.startswith("eval") for k in metrics)
    for key, value in metrics.items():
      if isinstance(value, (int, float)) and not isinstance(value, bool):
        self._tb.add_scalar(tensorboard_tag(key, is_eval), value, step)
    text = " ".join(f"{k}={_fmt(v)}" for k, v in metrics.items())
    line = f"{self.progress(step)}: {text}"
    if self._bar is not None:
      if not is_eval:
        self._bar.set_postfix_str(text, refresh=False)
      self._bar.write(line, file=sys.stderr)
    else:
      logging.info("%s", line)

  def note(self, step: int, fields: Mapping[str, object]) -> None:
    """Appends {'step': step, **fields} to metrics.jsonl only (an event, e.g. a changed train.num_steps on
    resume: not a metric, so not in TensorBoard or the progress output)."""
    if self.enabled:
      self._file.write(json.dumps({"step": int(step), **fields}) + "\n")
      self._file.flush()

  def progress(self, step: int, now: Optional[float] = None) -> str:
    """'step 50/400 (12%, ETA 1m05s)' ('step 50' without total_steps; 'ETA ?' before two timed steps)."""
    if not self.total_steps:
      return f"step {step}"
    out = f"step {step}/{self.total_steps} ({100 * step / self.total_steps:.0f}%"
    if self._ref is None or step <= self._ref[0]:
      return out + ", ETA ?)" if step < self.total_steps else out + ")"
    now = time.perf_counter() if now is None else now
    per_step = (now - self._ref[1]) / (step - self._ref[0])
    return out + f", ETA {_duration(per_step * max(self.total_steps - step, 0))})"

  def advance(self, step: int) -> None:
    """Step `step` has been dispatched: moves the bar; the first call starts the ETA's clock."""
    if self._ref is None:
      self._ref = (step, time.perf_counter())
    if self._bar is not None and step > self._bar.n:
      self._bar.update(step - self._bar.n)

  def close(self) -> None:
    if self._file is not None:
      try:
        self._file.close()
      except OSError:
        pass
      self._tb.close()
      self._file = None
    if self._bar is not None:
      self._bar.close()
      self._bar = None


def tensorboard_dir(workdir: str) -> str:
  """workdir/tensorboard/<the workdir's folder name>: TensorBoard names the run after the directory it is in."""
  return os.path.join(workdir, TENSORBOARD_DIR, os.path.basename(os.path.abspath(workdir)) or "run")


def tensorboard_tag(key: str, is_eval: bool) -> str:
  """'train_loss' -> 'train/loss', 'learning_rate' -> 'train/learning_rate'; in an eval line 'eval_loss' ->
  'eval/loss', 'bits_per_byte' -> 'eval/bits_per_byte', 'eval_accuracy' -> 'eval/accuracy'."""
  group = "eval" if is_eval else "train"
  return f"{group}/{key.removeprefix(group + '_')}"


def _duration(seconds: float) -> str:
  seconds = int(round(seconds))
  h, rest = divmod(seconds, 3600)
  m, s = divmod(rest, 60)
  return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s" if m else f"{s}s"


def _fmt(value) -> str:
  if isinstance(value, float):
    return f"{value:.4g}" if abs(value) < 1e4 else f"{value:.3e}"
  return str(value)
