"""`local_text`: any folder of .txt files (searched recursively), one file per example.

  --config.data.dataset=local_text --config.data.path=DIR

The prepared data is keyed by a fingerprint of the folder: sha256 over its absolute path and, for every
.txt file, its relative path, size and mtime (ns). The fingerprint is the builder config name
(`<data_dir>/local_text/h<16 hex digits>/1.0.0/`), so two folders never share a cache and editing,
adding, removing or touching a file prepares the data afresh (old folders stay until deleted).
Splits: see text_files.py (every 10th file by sorted relative path, or the last 5% of a single file).
"""
import hashlib
import os

import tensorflow_datasets as tfds

from linear_seq.data import text_files


def check_folder(path: str) -> str:
  """The absolute folder path; ValueError if `path` is empty, not a folder, or holds no .txt file."""
  if not path:
    raise ValueError("dataset local_text needs a folder of .txt files: set --config.data.path=DIR")
  folder = os.path.abspath(os.path.expanduser(path))
  if not os.path.isdir(folder):
    raise ValueError(f"local_text: config.data.path={path!r} is not a folder (expected a folder of .txt files)")
  if not text_files.list_text_files(folder):
    raise ValueError(f"local_text: the folder {folder} holds no .txt files")
  return folder


def fingerprint(folder: str) -> str:
  """Hex sha256 of the folder's absolute path and each .txt file's relative path, size and mtime."""
  h = hashlib.sha256(os.path.abspath(folder).encode())
  for rel, path in text_files.list_text_files(folder):
    st = os.stat(path)
    h.update(f"\0{rel}\0{st.st_size}\0{st.st_mtime_ns}".encode())
  return h.hexdigest()


class LocalText(text_files.TextFilesBuilder, skip_registration=True):
  """A local folder of .txt files, one example per file."""

  def __init__(self, *, path: str, **kwargs):
    self._folder = check_folder(path)
    config = tfds.core.BuilderConfig(name="h" + fingerprint(self._folder)[:16], description=self._folder)
    super().__init__(config=config, **kwargs)

  def _files(self) -> list[tuple[str, str]]:
    return text_files.list_text_files(self._folder)
