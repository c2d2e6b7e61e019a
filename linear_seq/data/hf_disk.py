"""`hf_disk`: a Hugging Face dataset saved on disk, as a text corpus (no network, no hub).

  --config.data.dataset=hf_disk --config.data.path=DIR [--config.data.text_column=text]

DIR is either a `datasets` `save_to_disk` folder (a DatasetDict or a single Dataset; read with
`datasets.load_from_disk`, which needs the optional `hf` extra) or a folder of parquet files (read with
pyarrow; a file whose path names a split, e.g. `train-00000-of-00001.parquet` or `validation/x.parquet`,
belongs to it). Splits: 'train' and 'validation' (or 'test' when there is no validation split); without split
names every 10th row (i % 10 == 9) is validation. One row = one document (the text column: str or bytes;
empty and null rows are skipped). Prepared through the same TFDS array_record path as local_text, keyed by a
fingerprint of the folder (every file's relative path, size and mtime, and the column) in the builder config
name: `<data_dir>/hf_disk/h<16 hex digits>/1.0.0/`.
"""
import hashlib
import os
import re
from typing import Any, Iterable

import tensorflow_datasets as tfds

from linear_seq.data import text_files

HF_INSTALL_HINT = "pip install 'linear_seq[hf]'  (the optional `hf` extra: Hugging Face datasets)"
_SPLIT_WORDS = (("validation", ("validation", "valid", "val", "dev")), ("train", ("train",)), ("test", ("test",)))


def is_save_to_disk(folder: str) -> bool:
  return any(os.path.exists(os.path.join(folder, f)) for f in ("dataset_dict.json", "state.json"))


def parquet_files(folder: str) -> list[tuple[str, str]]:
  return text_files.list_text_files(folder, ".parquet")


def check_folder(path: str) -> str:
  """The absolute folder; ValueError if it is not a save_to_disk folder nor holds parquet files."""
  if not path:
    raise ValueError("dataset hf_disk needs a datasets save_to_disk folder or a folder of parquet files: "
                     "set --config.data.path=DIR")
  folder = os.path.abspath(os.path.expanduser(path))
  if not os.path.isdir(folder):
    raise ValueError(f"hf_disk: config.data.path={path!r} is not a folder")
  if not is_save_to_disk(folder) and not parquet_files(folder):
    raise ValueError(f"hf_disk: {folder} is neither a datasets save_to_disk folder (dataset_dict.json or "
                     "state.json) nor a folder of .parquet files")
  return folder


def fingerprint(folder: str, text_column: str) -> str:
  h = hashlib.sha256(f"{os.path.abspath(folder)}\0{text_column}".encode())
  for root, dirs, names in os.walk(folder):
    dirs.sort()
    for name in sorted(names):
      path = os.path.join(root, name)
      st = os.stat(path)
      h.update(f"\0{os.path.relpath(path, folder)}\0{st.st_size}\0{st.st_mtime_ns}".encode())
  return h.hexdigest()


def split_of(relative_path: str) -> str:
  """'train' | 'validation' | 'test' | '' from the words of a parquet file's relative path."""
  words = set(re.split(r"[^a-z]+", relative_path.lower()))
  for split, names in _SPLIT_WORDS:
    if words & set(names):
      return split
  return ""


def _texts(rows: Iterable[Any]) -> list[bytes]:
  out = []
  for value in rows:
    if value is None:
      continue
    data = value if isinstance(value, bytes) else str(value).encode("utf-8")
    if data:
      out.append(data)
  return out


def _column(columns: list[str], text_column: str, where: str) -> None:
  if text_column not in columns:
    raise ValueError(f"hf_disk: {where} has no column {text_column!r} (set --config.data.text_column); "
                     f"columns: {', '.join(columns)}")


def read_splits(folder: str, text_column: str) -> dict[str, list[bytes]]:
  """{split name or '': [document bytes, ...]} of the folder."""
  if is_save_to_disk(folder):
    try:
      import datasets  # pylint: disable=g-import-not-at-top
    except ImportError as e:
      raise ImportError(f"hf_disk: reading a save_to_disk folder needs `datasets`: {HF_INSTALL_HINT}") from e
    loaded = datasets.load_from_disk(folder)
    parts = dict(loaded) if isinstance(loaded, datasets.DatasetDict) else {"": loaded}
    out = {}
    for name, ds in parts.items():
      _column(list(ds.column_names), text_column, f"{folder} split {name or '(single)'}")
      out[name] = _texts(ds[text_column])
    return out
  import pyarrow.parquet as pq  # pylint: disable=g-import-not-at-top
  out: dict[str, list[bytes]] = {}
  for rel, path in parquet_files(folder):
    table = pq.read_table(path)
    _column(table.column_names, text_column, path)
    out.setdefault(split_of(rel), []).extend(_texts(table.column(text_column).to_pylist()))
  return out


def to_train_validation(splits: dict[str, list[bytes]]) -> dict[str, list[bytes]]:
  """Named splits -> train + validation (test when there is no validation); otherwise every 10th document of
  all of them (in order) is validation."""
  if splits.get("train") and (splits.get("validation") or splits.get("test")):
    return {"train": splits["train"], "validation": splits.get("validation") or splits["test"]}
  docs = [d for name in sorted(splits) for d in splits[name]]
  every = text_files.VALIDATION_EVERY
  if len(docs) < 2:
    raise ValueError(f"hf_disk: the dataset has {len(docs)} non-empty rows; it needs at least 2 (train and "
                     "validation get at least 1 each)")
  if len(docs) < every:
    return {"train": docs[:-1], "validation": docs[-1:]}
  return {"train": [d for i, d in enumerate(docs) if i % every != every - 1],
          "validation": [d for i, d in enumerate(docs) if i % every == every - 1]}


class HFDisk(text_files.TextFilesBuilder, skip_registration=True):
  """A Hugging Face dataset saved on disk (save_to_disk or parquet), one example per row."""

  def __init__(self, *, path: str, text_column: str = "text", **kwargs):
    self._folder, self._column = check_folder(path), text_column
    config = tfds.core.BuilderConfig(name="h" + fingerprint(self._folder, text_column)[:16],
                                     description=f"{self._folder} [{text_column}]")
    super().__init__(config=config, **kwargs)

  def _split_documents(self) -> dict[str, list[tuple[str, bytes]]]:
    splits = to_train_validation(read_splits(self._folder, self._column))
    return {split: [(f"{split}/{i}", d) for i, d in enumerate(docs)] for split, docs in splits.items()}
