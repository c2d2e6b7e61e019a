"""Checkpoints of a training run (the only module that touches orbax).

Layout: workdir/checkpoints/<step>/{state, data, manifest.json}: `state` is the train-state pytree (params,
optimizer state, non-trainable variables such as random projections, step) saved with StandardSave; `data` is
the data iterator's state (it.get_state(), a JSON dict) saved with JsonSave. Restoring takes an abstract target
whose leaves carry the shardings of the *current* mesh, so a checkpoint restores onto any device count.

Integrity: manifest.json records the size and sha256 of every other file of the step (integrity.py). It is
part of the commit: written into orbax's temporary folder after its files and before the rename that commits
the step (`_ManifestedTemporaryPath`), so every step this code committed has one; restoring verifies them
before orbax reads anything, so a flipped bit, a truncated or missing file is reported naming the step and the
file (files it does not list, e.g. .DS_Store, are ignored). The step stored in the state must be the folder's
(a renamed `checkpoints/12` -> `16` is damaged, not step 16). A step without a manifest (saved before
manifests were part of the commit) restores unverified with a warning.

A failed save (e.g. a full disk, raised in orbax's background commit) is one CheckpointError naming the step,
its path and, for ENOSPC, the free space; `check()` (polled by the trainer every step) raises it as soon as the
commit has failed, `save()` and `wait()` at the latest. The failed step's tmp folder is never committed, so the
previous checkpoint stays the latest.
"""
import asyncio
import errno
import logging as pylogging
import os
import shutil
import time
from typing import Any, Optional

from absl import logging
import jax
import orbax.checkpoint as ocp

from linear_seq import integrity
from linear_seq import workdir as workdir_lib

CHECKPOINT_DIR = "checkpoints"


class CheckpointError(RuntimeError):
  """A checkpoint is missing, corrupt or unreadable."""


def checkpoint_dir(workdir: str) -> str:
  return os.path.join(os.path.abspath(workdir), CHECKPOINT_DIR)


def abstract_like(tree, shardings) -> Any:
  """ShapeDtypeStructs with the given shardings: the restore target for `tree` (arrays or abstract values)."""
  return jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), tree, shardings)


class _DropOrbaxSaveTracebacks(pylogging.Filter):
  """Drops orbax's ERROR records (with tracebacks, tens to hundreds of lines) of a failed background save: the
  Checkpointer raises that failure as one CheckpointError line naming the step and path."""

  def filter(self, record: pylogging.LogRecord) -> bool:
    return not (record.levelno >= pylogging.ERROR and f"{os.sep}orbax{os.sep}" in record.pathname)


def _quiet_orbax_save_errors() -> None:
  logger = pylogging.getLogger("absl")
  if not any(isinstance(f, _DropOrbaxSaveTracebacks) for f in logger.filters):
    logger.addFilter(_DropOrbaxSaveTracebacks())


class _ManifestedTemporaryPath(ocp.path.atomicity.AtomicRenameTemporaryPath):
  """orbax's atomic-rename commit of a step folder with the manifest written just before the rename (and
  WORKDIR/checkpointed.json just after it). The body is AtomicRenameTemporaryPath.finalize's (orbax 0.12.8,
  pinned in constraints.txt) with those two writes added."""

  async def finalize(self):
    final = self.get_final()
    if not final.name.isdigit() or self._snapshot is not None:  # (not a step folder: orbax's own finalize)
      return await super().finalize()
    if self._checkpoint_metadata_store:
      await asyncio.to_thread(self._checkpoint_metadata_store.wait_until_finished)
      await asyncio.to_thread(
          self._checkpoint_metadata_store.update,
          file_path=ocp.path.atomicity.checkpoint_metadata.step_metadata_file_path(self._tmp_path),
          commit_timestamp_nsecs=time.time_ns())
      await asyncio.to_thread(self._checkpoint_metadata_store.wait_until_finished)
    commit = self.get() / ocp.path.atomicity.COMMIT_SUCCESS_FILE
    await asyncio.to_thread(commit.write_text, f"Checkpoint commit was successful to {final}")
    await asyncio.to_thread(integrity.write_manifest, os.fspath(self.get()))
    await asyncio.to_thread(os.rename, os.fspath(self._tmp_path), os.fspath(final))
    await asyncio.to_thread(workdir_lib.mark_checkpointed, os.path.dirname(os.path.dirname(os.fspath(final))),
                            int(final.name))


class Checkpointer:
  """Saves every `save_every` steps (the trainer also saves at the end), keeps the newest `keep`."""

  def __init__(self, workdir: str, *, keep: int = 3, read_only: bool = False, use_async: bool = True):
    self.directory = checkpoint_dir(workdir)
    if read_only and not os.path.isdir(self.directory):
      raise CheckpointError(f"no checkpoints in {workdir!r}: {self.directory} does not exist "
                            "(train first: python -m linear_seq.main --config=... --workdir=...)")
    options = ocp.CheckpointManagerOptions(
        max_to_keep=keep if keep > 0 and not read_only else None, save_interval_steps=0 if read_only else 1,
        create=not read_only, read_only=read_only, enable_async_checkpointing=use_async and not read_only,
        temporary_path_class=_ManifestedTemporaryPath)
    self._manager = ocp.CheckpointManager(self.directory, item_names=("state", "data"), options=options)
    self._pending: Optional[int] = None  # the step of a save not yet known to have committed
    if not read_only:
      _quiet_orbax_save_errors()
    self._failed = False

  def all_steps(self) -> list[int]:
    return sorted(self._manager.all_steps())

  def latest_step(self) -> Optional[int]:
    steps = self.all_steps()
    return steps[-1] if steps else None

  def save(self, step: int, state, data_state: Optional[dict]) -> None:
    """Saves (asynchronously: arrays are copied to host before this returns, so `state` may be donated after).
    A failed save (this one's synchronous part, or the previous one's commit) raises CheckpointError naming
    its step and path (and the free space when the disk is full)."""
    try:
      self._manager.save(step, args=ocp.args.Composite(
          state=ocp.args.StandardSave(state), data=ocp.args.JsonSave(data_state or {})), force=True)
    except Exception as e:  # pylint: disable=broad-except  (orbax, tensorstore and OS errors)
      raise self._save_failed(self._pending if self._pending is not None else step, e) from e
    self._pending = step

  def check(self) -> None:
    """Raises CheckpointError at once if the background commit of the last save has failed (non-blocking: the
    trainer calls this every step, so a full disk stops the run at the save that failed, not one save later)."""
    if self._pending is not None and not self._manager.is_saving_in_progress():
      self.wait()

  def _save_failed(self, step: int, e: Exception) -> CheckpointError:
    self._failed = True
    path = os.path.join(self.directory, str(step))
    try:
      self._manager.reload()
      kept = [s for s in self.all_steps() if s != step]
    except Exception:  # pylint: disable=broad-except
      kept = []
    reason = _first_line(e)
    if _is_disk_full(e):
      try:
        free = shutil.disk_usage(self.directory).free
        reason = f"no space left on device ({_size(free)} free there)"
      except OSError:
        reason = "no space left on device"
    kept_text = (f"the previous checkpoint (step {kept[-1]}) is kept" if kept else "no earlier checkpoint exists")
    return CheckpointError(f"saving the checkpoint of step {step} to {path} failed: {reason}; {kept_text}; "
                           "training stopped")

  def restore(self, target, step: Optional[int] = None, *, quarantine: bool = False, fallback: bool = True):
    """Restores (step, state, data_state). `target`: abstract state (ShapeDtypeStructs with shardings).

    Each step is verified against its manifest first (a damaged step is not read at all).
    step=None takes the latest checkpoint; when it is damaged or unreadable, older ones are tried with a warning
    (not with fallback=False: evaluate refuses a damaged latest). With quarantine=True, once an older one
    restores, the unreadable newer directories are renamed to '<step>.corrupt' so training can write those steps
    again; when none restores nothing is moved, so a rerun cannot silently start from scratch. A checkpoint that
    vanishes while it is read (rotated away by a trainer running there, keep=K) is not damage: step=None
    retries on the newest one; an explicit step raises CheckpointError saying it was removed. An explicit step
    that is missing, damaged or unreadable raises CheckpointError. Messages say "damaged" only of files that
    fail the manifest.
    """
    self.wait()
    steps = self.all_steps()
    if not steps:
      raise CheckpointError(f"no checkpoints in {self.directory}")
    if step is not None and step not in steps:
      raise CheckpointError(f"no checkpoint for step {step} in {self.directory}; available steps: "
                            f"{', '.join(map(str, steps))}")
    candidates = [step] if step is not None else steps[::-1] if fallback else steps[-1:]
    first = candidates[0]
    errors, unreadable, tried = [], [], set()
    integrity.quiet_orbax_read_errors()
    while candidates:
      s = candidates.pop(0)
      tried.add(s)
      path = os.path.join(self.directory, str(s))
      verified = False
      try:
        verified = integrity.verify_manifest(path) if os.path.isdir(path) else False
        if not verified and os.path.isdir(path):
          logging.warning("checkpoint %s has no integrity manifest (saved before manifests were part of the "
                          "commit): restoring it unverified", path)
        out = self._manager.restore(s, args=ocp.args.Composite(
            state=ocp.args.StandardRestore(target), data=ocp.args.JsonRestore()))
        _check_step(out["state"], s, path)
      except Exception as e:  # orbax raises many types (ValueError, FileNotFoundError, tensorstore errors)
        if not os.path.isdir(path):  # removed meanwhile: rotated away by a running trainer, or deleted
          self._manager.reload()
          now = self.all_steps()
          if step is not None:
            raise CheckpointError(f"checkpoint {path} was removed while it was read (a trainer running in this "
                                  "workdir keeps only its newest checkpoints); available now: "
                                  f"{', '.join(map(str, now)) or 'none'}") from e
          newer = [t for t in now if t not in tried]
          candidates = newer[::-1] if fallback else newer[-1:]
          logging.warning("checkpoint %s was removed while it was read (a running trainer's rotation?): %s", path,
                          f"reading the newest, step {candidates[0]}" if candidates else "no other checkpoint")
          continue
        if isinstance(e, integrity.DamagedError):
          message = f"checkpoint of step {s} is damaged: {e}"
        else:
          checked = ("its files match its manifest" if verified else "it has no manifest to check its files")
          message = f"checkpoint {path} is unreadable ({checked}): {type(e).__name__}: {_first_line(e)}"
        errors.append(message)
        if step is not None or not fallback:
          raise CheckpointError(message) from e
        unreadable.append(path)  # (reported below once an older one restores, or in the error: one line a step)
        continue
      for message in errors:
        logging.warning("%s; falling back to an older checkpoint", message)
      if quarantine and unreadable and jax.process_index() == 0:
        for path in unreadable:
          moved, n = path + ".corrupt", 1
          while os.path.exists(moved):
            moved, n = f"{path}.corrupt{n}", n + 1
          shutil.move(path, moved)
          logging.warning("moved %s to %s", path, moved)
        self._manager.reload()
      if s < first and unreadable:
        logging.warning("restored the older checkpoint of step %d instead of step %d", s, first)
      return s, out["state"], dict(out["data"] or {})
    if not errors:
      raise CheckpointError(f"no checkpoints in {self.directory} (the last ones were removed while being read)")
    raise CheckpointError(f"no readable checkpoint in {self.directory} (tried {len(errors)}; nothing was moved):"
                          "\n  " + "\n  ".join(errors))

  def reload(self) -> None:
    self._manager.reload()

  def wait(self) -> None:
    """Waits for pending saves (committed with their manifests); CheckpointError if one failed."""
    try:
      self._manager.wait_until_finished()
    except Exception as e:  # pylint: disable=broad-except
      if self._failed:  # (already reported)
        return
      raise self._save_failed(self._pending if self._pending is not None else -1, e) from e
    self._pending = None

  def close(self) -> None:
    self.wait()
    try:
      self._manager.close()
    except Exception:  # pylint: disable=broad-except
      if not self._failed:
        raise


def _check_step(state, step: int, path: str) -> None:
  """DamagedError when the step stored in the state is not the folder's (a renamed or copied folder)."""
  if not isinstance(state, dict) or "step" not in state:
    return
  stored = int(jax.device_get(state["step"]))
  if stored != step:
    raise integrity.DamagedError(f"{path} holds the state of step {stored}, not {step} (the folder was renamed "
                                 "or copied)")


def _is_disk_full(e: BaseException) -> bool:
  seen = set()
  while e is not None and id(e) not in seen:
    seen.add(id(e))
    if (isinstance(e, OSError) and e.errno == errno.ENOSPC) or "No space left on device" in str(e):
      return True
    e = e.__cause__ or e.__context__
  return False


def _size(n: int) -> str:
  for unit in ("bytes", "KiB", "MiB", "GiB"):
    if n < 1024 or unit == "GiB":
      return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
    n /= 1024
  return str(n)


def _first_line(e: Exception) -> str:
  text = str(e).strip().splitlines()
  line = text[0] if text else ""
  line = line.split(" See full TensorStore details")[0]  # (followed by an unreadable pybind repr)
  cause = e.__cause__ or e.__context__
  if cause is not None and cause is not e and len(line) < 200:
    line += f" ({type(cause).__name__}: {_first_line(cause)[:150]})"
  return line[:300]
