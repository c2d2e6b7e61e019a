"""Content checksums of a checkpoint step: <step>/manifest.json = {file: [size, sha256]} over every other file.

Written once the step is committed (checkpoint.py), verified before the step is read, so that a flipped bit,
a truncated or missing file is a DamagedError naming the file instead of silently wrong parameters. Files the
manifest does not list (a Finder .DS_Store, an NFS .nfs* placeholder, a backup tool's marker) are ignored: orbax
reads only the files it wrote, which the manifest lists.
"""
import hashlib
import json
import logging as pylogging
import os

MANIFEST_FILE = "manifest.json"
_VERSION = 1
_CHUNK = 1 << 20


class DamagedError(ValueError):
  """A step's files do not match its manifest (the message names the file)."""


def _files(step_dir: str) -> list[str]:
  out = []
  for root, dirs, names in os.walk(step_dir):
    dirs.sort()
    for name in names:
      rel = os.path.relpath(os.path.join(root, name), step_dir)
      if not rel.startswith(MANIFEST_FILE):  # (also its .tmp)
        out.append(rel)
  return sorted(out)


def _digest(path: str) -> str:
  h = hashlib.sha256()
  with open(path, "rb") as f:
    while chunk := f.read(_CHUNK):
      h.update(chunk)
  return h.hexdigest()


def write_manifest(step_dir: str) -> str:
  """Checksums every file of a committed step into step_dir/manifest.json (atomically); returns its path."""
  files = {rel: [os.path.getsize(os.path.join(step_dir, rel)), _digest(os.path.join(step_dir, rel))]
           for rel in _files(step_dir)}
  path = os.path.join(step_dir, MANIFEST_FILE)
  tmp = path + ".tmp"
  with open(tmp, "w") as f:
    json.dump({"version": _VERSION, "algorithm": "sha256", "files": files}, f, indent=0, sort_keys=True)
    f.flush()
    os.fsync(f.fileno())
  os.replace(tmp, path)
  return path


def verify_manifest(step_dir: str) -> bool:
  """True if step_dir matches its manifest, False if it has none; DamagedError naming the first bad file."""
  path = os.path.join(step_dir, MANIFEST_FILE)
  if not os.path.exists(path):
    return False
  try:
    with open(path) as f:
      files = json.load(f)["files"]
    expected = {rel: (int(size), str(digest)) for rel, (size, digest) in files.items()}
  except (OSError, ValueError, KeyError, TypeError) as e:
    raise DamagedError(f"{path} is unreadable ({type(e).__name__}: {e})") from None
  for rel, (size, digest) in sorted(expected.items()):
    file = os.path.join(step_dir, rel)
    if not os.path.exists(file):
      raise DamagedError(f"{file} is missing")
    actual = os.path.getsize(file)
    if actual != size:
      raise DamagedError(f"{file} has {actual} bytes, its manifest says {size}")
    if _digest(file) != digest:
      raise DamagedError(f"{file} does not match its sha256 checksum (contents changed)")
  return True


class _DropUnretrievedTasks(pylogging.Filter):
  """Drops asyncio's 'Task exception was never retrieved' records: when one array of a checkpoint is
  unreadable, orbax's parallel reads of all the others fail in the background and log one traceback each."""

  def filter(self, record: pylogging.LogRecord) -> bool:
    return not str(record.msg).startswith("Task exception was never retrieved")


def quiet_orbax_read_errors() -> None:
  logger = pylogging.getLogger("asyncio")
  if not any(isinstance(f, _DropUnretrievedTasks) for f in logger.filters):
    logger.addFilter(_DropUnretrievedTasks())
