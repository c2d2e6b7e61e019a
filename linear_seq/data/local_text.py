"""`local_text`: any folder of .txt files (searched recursively), one file per example.

  --config.data.dataset=local_text --config.data.path=DIR

The prepared data is keyed by a fingerprint of the folder: sha256 over its real path (symlinks resolved, so
every spelling of one folder gives one fingerprint) and, for every .txt file, its relative path and the sha256
of its bytes (by content: an edit that keeps a file's size and mtime, e.g. `rsync -a` or `cp -p`, is seen; the
folder is read once per run, ~1 s per GB). The fingerprint is the builder config name
(`<data_dir>/local_text/h<16 hex digits>/1.0.0/`), so two folders never share a cache and editing, adding,
removing or renaming a file prepares the data afresh (old folders stay until deleted; touching a file does not).
Splits: see text_files.py (every 10th file by sorted relative path, or the last 5% of a single file).
"""
import hashlib
import os

from absl import logging
import tensorflow_datasets as tfds

from linear_seq.data import text_files


def check_folder(path: str) -> str:
  """The absolute folder path; ValueError if `path` is empty, not a folder, or holds no .txt file."""
  if not path:
    raise ValueError("dataset local_text needs a folder of .txt files: set --config.data.path=DIR")
  folder = os.path.abspath(os.path.expanduser(path))
  if not os.path.isdir(folder):
    raise ValueError(f"local_text: config.data.path={path!r} is not a folder (expected a folder of .txt files)")
  files = text_files.list_text_files(folder)
  if not files:
    raise ValueError(f"local_text: the folder {folder} holds no .txt files")
  sizes = [os.path.getsize(p) for _, p in files]
  if sum(sizes) == 0:
    raise ValueError(f"local_text: the {len(files)} .txt file(s) under {folder} are all empty")
  if len(files) == 1 and sizes[0] < 2:
    raise ValueError(f"local_text: {files[0][1]} holds {sizes[0]} byte; a single-file corpus needs at least 2")
  _warn_if_binary(folder, files)
  return folder


# Bytes that do not occur in text: C0 controls other than \t \n \v \f \r, and DEL.
_CONTROL = bytes(b for b in range(32) if b not in b"\t\n\x0b\x0c\r") + b"\x7f"
_WARNED: set[str] = set()
BINARY_FRACTION = 0.3  # warn when more than this fraction of a sample is not text


def non_text_fraction(data: bytes) -> float:
  """Fraction of `data` that is control bytes or invalid UTF-8."""
  if not data:
    return 0.0
  controls = len(data) - len(data.translate(None, _CONTROL))
  invalid = data.decode("utf-8", errors="replace").count("\ufffd") - data.decode("utf-8", "ignore").count("\ufffd")
  return min(1.0, (controls + invalid) / len(data))


def _warn_if_binary(folder: str, files: list[tuple[str, str]], sample: int = 4096, max_files: int = 32) -> None:
  """Warns (once per folder and process) when a sample of the files (the first `sample` bytes of up to
  `max_files` files spread over the sorted list) is mostly non-text bytes."""
  if folder in _WARNED:
    return
  _WARNED.add(folder)
  picked = files[::max(1, len(files) // max_files)][:max_files]
  data = b""
  for _, path in picked:
    with open(path, "rb") as f:
      data += f.read(sample)
  fraction = non_text_fraction(data)
  if fraction > BINARY_FRACTION:
    logging.warning("local_text: %.0f%% of the sampled bytes of %s are not text (control bytes or invalid UTF-8): "
                    "is it a text corpus?", 100 * fraction, folder)


def fingerprint(folder: str) -> str:
  """Hex sha256 of the folder's real path and each .txt file's relative path and content sha256."""
  h = hashlib.sha256(os.path.realpath(folder).encode())
  for rel, path in text_files.list_text_files(folder):
    content = hashlib.sha256()
    with open(path, "rb") as f:
      while chunk := f.read(1 << 20):
        content.update(chunk)
    h.update(f"\0{rel}\0{content.hexdigest()}".encode())
  return h.hexdigest()


class LocalText(text_files.TextFilesBuilder, skip_registration=True):
  """A local folder of .txt files, one example per file."""

  def __init__(self, *, path: str, **kwargs):
    self._folder = check_folder(path)
    config = tfds.core.BuilderConfig(name="h" + fingerprint(self._folder)[:16], description=self._folder)
    super().__init__(config=config, **kwargs)

  def _files(self) -> list[tuple[str, str]]:
    return text_files.list_text_files(self._folder)
