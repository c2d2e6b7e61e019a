"""A training workdir's guards: one writer at a time, progress detection, a deliberate restart, the corpus check.

* `lock(workdir)`: an exclusive fcntl.flock on WORKDIR/.lock held for the run (the file holds the holder's PID).
  A second trainer (or sweep point) on the same workdir fails at once with WorkdirError naming that PID. The
  lock dies with its process, so a crashed run leaves no stale lock (the file stays; only the flock counts).
* `progress(workdir)`: what shows that a run already checkpointed there: checkpoint directories, an eval.json,
  WORKDIR/checkpointed.json (written after each committed checkpoint), or metrics lines past the second save
  (by then the first save had committed). The trainer refuses to start from step 0 in a workdir with progress
  but no restorable checkpoint, unless asked to (`restart(workdir)`, `python -m linear_seq.main --restart`).
  A run killed before its first checkpoint committed is not progress (nothing restorable was lost: its metrics
  lines are written again, identically); neither is config.json alone (written before step 1).
* `check_corpus(workdir, fingerprint)`: the data fingerprint (e.g. local_text's folder fingerprint, by content)
  is saved in WORKDIR/corpus.json when a run starts; resuming on a corpus whose fingerprint changed is refused.
  A corpus.json of the older size+mtime rule (no "rule" field) is recorded again by content, unchecked once.
"""
import contextlib
import errno
import fcntl
import json
import os
import shutil
import socket
from typing import Iterator, Optional

from absl import logging

from linear_seq import metrics as metrics_lib

LOCK_FILE = ".lock"
CORPUS_FILE = "corpus.json"
CHECKPOINTED_FILE = "checkpointed.json"
CORPUS_RULE = "content sha256"  # corpus.json's "rule": how its fingerprint was made (absent: size + mtime)
# What a restart removes (the run's outputs; anything else in the workdir, e.g. a sweep's log.txt, stays).
RUN_OUTPUTS = ("checkpoints", "metrics.jsonl", "tensorboard", "eval.json", "position_loss.json", "config.json",
               CORPUS_FILE, CHECKPOINTED_FILE)


class WorkdirError(RuntimeError):
  """The workdir cannot be used: locked by another run, not a folder, or progress without a checkpoint."""


def ensure_dir(workdir: str) -> str:
  """Creates the workdir (and parents); WorkdirError if it or a parent is a file."""
  if os.path.exists(workdir) and not os.path.isdir(workdir):
    raise WorkdirError(f"--workdir={workdir} is a file, not a folder; pick a folder (it is created if missing)")
  try:
    os.makedirs(workdir, exist_ok=True)
  except (NotADirectoryError, FileExistsError) as e:
    raise WorkdirError(f"cannot create --workdir={workdir}: a parent is a file ({e.strerror})") from e
  except PermissionError as e:
    raise WorkdirError(f"cannot create --workdir={workdir}: permission denied") from e
  return workdir


@contextlib.contextmanager
def lock(workdir: str) -> Iterator[None]:
  """Holds an exclusive lock on WORKDIR/.lock; WorkdirError at once if another process holds it."""
  ensure_dir(workdir)
  path = os.path.join(workdir, LOCK_FILE)
  try:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
  except IsADirectoryError:
    raise WorkdirError(f"{path} is a folder, not the workdir's lock file: remove it (rmdir) or use another "
                       "--workdir") from None
  except OSError as e:  # read-only folder or file system, no permission
    raise WorkdirError(f"cannot write in --workdir={workdir} ({e.strerror}: {path}): the run writes its "
                       "checkpoints and metrics there; use a writable --workdir") from None
  try:
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
      if e.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
        raise
      holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "unknown pid"
      raise WorkdirError(f"{workdir} is in use by another run ({holder}); wait for it to finish, stop it, "
                         "or use another --workdir") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
    yield
  finally:
    os.close(fd)  # releases the flock


def progress(workdir: str) -> list[str]:
  """What in `workdir` shows trained steps: ['metrics.jsonl up to step 60', 'checkpoint directories 2, 4', ...]
  (empty when nothing was trained there)."""
  found = []
  steps = [r.get("step", 0) for r in metrics_lib.read_metrics(workdir, quiet=True)]
  every = _saved_checkpoint_every(workdir)
  if steps and every and max(steps) > 2 * every:
    found.append(f"{metrics_lib.METRICS_FILE} with {len(steps)} lines up to step {max(steps)}")
  marker = os.path.join(workdir, CHECKPOINTED_FILE)
  if os.path.exists(marker):
    try:
      with open(marker) as f:
        found.append(f"{CHECKPOINTED_FILE} (step {json.load(f)['step']} was checkpointed)")
    except (OSError, ValueError, KeyError, TypeError):
      found.append(CHECKPOINTED_FILE)
  ckpt_dir = os.path.join(workdir, "checkpoints")
  if os.path.isdir(ckpt_dir):
    # Committed steps and quarantined ones; not orbax's '<step>.orbax-checkpoint-tmp*' (a save that never committed).
    names = sorted(n for n in os.listdir(ckpt_dir) if n.split(".")[0].isdigit() and "tmp" not in n)
    if names:
      found.append(f"checkpoint directories {', '.join(names)}")
  if os.path.exists(os.path.join(workdir, "eval.json")):
    found.append("eval.json")
  return found


def _saved_checkpoint_every(workdir: str) -> Optional[int]:
  try:
    with open(os.path.join(workdir, "config.json")) as f:
      return int(json.load(f)["train"]["checkpoint_every"])
  except (OSError, ValueError, KeyError, TypeError):
    return 1  # no readable config: any trained step counts


def mark_checkpointed(workdir: str, step: int) -> None:
  """Records (after its commit) that `step` was checkpointed: WORKDIR/checkpointed.json."""
  path = os.path.join(workdir, CHECKPOINTED_FILE)
  tmp = path + ".tmp"
  with open(tmp, "w") as f:
    json.dump({"step": int(step)}, f)
    f.write("\n")
  os.replace(tmp, path)


def no_checkpoint_error(workdir: str, found: list[str]) -> WorkdirError:
  ckpt_dir = os.path.join(workdir, "checkpoints")
  where = ("checkpoints/ is missing" if not os.path.isdir(ckpt_dir) else "checkpoints/ holds no checkpoint")
  return WorkdirError(f"{workdir} shows progress ({'; '.join(found)}) but {where}: refusing to train a new "
                      "model from step 0 there; to start over on purpose pass --restart (removes its checkpoints "
                      "and metrics) or use a new --workdir")


def restart(workdir: str) -> list[str]:
  """Removes the run's outputs (RUN_OUTPUTS) from `workdir`, with a warning; returns what was removed."""
  removed = []
  others = sorted(n for n in os.listdir(workdir) if n.endswith(".json")  # evaluate's other outputs
                  and n.startswith(("eval_", "position_loss_"))) if os.path.isdir(workdir) else []
  for name in (*RUN_OUTPUTS, *others):
    path = os.path.join(workdir, name)
    if os.path.isdir(path):
      shutil.rmtree(path)
    elif os.path.exists(path):
      os.remove(path)
    else:
      continue
    removed.append(name)
  if removed:
    logging.warning("--restart: removed %s from %s; training from step 0", ", ".join(removed), workdir)
  return removed


def check_corpus(workdir: str, fingerprint: Optional[str], description: str, *, resuming: bool) -> None:
  """Saves the corpus fingerprint on a fresh start; on resume refuses a changed one (WorkdirError). Runs
  started before corpus.json existed get it written now."""
  if fingerprint is None:
    return
  path = os.path.join(workdir, CORPUS_FILE)
  saved = None
  if resuming and os.path.exists(path):
    try:
      with open(path) as f:
        record = json.load(f)
      saved = record.get("fingerprint")
    except (OSError, ValueError, AttributeError) as e:
      raise WorkdirError(f"{path} is unreadable ({e}); restore it or start over with --restart") from None
    if saved is not None and record.get("rule") != CORPUS_RULE:
      logging.warning("%s was recorded by the older size+mtime rule: recorded again by content (not checked this "
                      "time)", path)
      saved = None
  if saved is not None and saved != fingerprint:
    raise WorkdirError(f"the corpus {description} changed since this run started (fingerprint {saved[:16]}, now "
                       f"{fingerprint[:16]}: a file was edited, added, removed or renamed); resuming would reuse "
                       "the old data iterator on other data: restore the files, or train in a new --workdir")
  if saved is None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
      json.dump({"fingerprint": fingerprint, "corpus": description, "rule": CORPUS_RULE}, f)
      f.write("\n")
    os.replace(tmp, path)


def same_folder(workdir: str, saved_path: str, new_path: str) -> bool:
  """Whether config.data.path `new_path` names the folder the run started on (recorded in corpus.json as its
  real path; else `saved_path` resolved here): a relative path or a symlink to it is the same corpus."""
  if not saved_path or not new_path:
    return False
  real = lambda p: os.path.realpath(os.path.expanduser(p))
  recorded = None
  try:
    with open(os.path.join(workdir, CORPUS_FILE)) as f:
      recorded = json.load(f).get("corpus")
  except (OSError, ValueError, AttributeError):
    pass
  return real(new_path) == (recorded or real(saved_path))
