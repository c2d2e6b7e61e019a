"""TFDS builder base for corpora made of plain text files: one file = one document (one example).

Examples are {'text': the file's raw bytes (tfds.features.Text, returned as bytes), 'name': its relative path}.
Written as array_record and read with `builder.as_data_source()`, so TensorFlow is never needed.

Split rule (shared by `shakespeare` and `local_text`), on the files sorted by relative path:
  * several files: the file at every 10th position (i % 10 == 9) is validation, the rest train; with fewer
    than 10 files the last file is validation (so there is always one);
  * a single file: the first 95% of its bytes are train, the last 5% (at least 1 byte) validation.
"""
import math
import os
from collections.abc import Iterator, Sequence

import tensorflow_datasets as tfds

VALIDATION_EVERY = 10
SINGLE_FILE_VALIDATION_FRACTION = 0.05


def split_names(names: Sequence[str]) -> dict[str, list[str]]:
  """Sorted file names -> {'train': [...], 'validation': [...]} by the every-10th rule (>= 2 names)."""
  names = sorted(names)
  if len(names) < 2:
    raise ValueError(f"split_names needs at least 2 names, got {len(names)}")
  if len(names) < VALIDATION_EVERY:
    val = {names[-1]}
  else:
    val = {n for i, n in enumerate(names) if i % VALIDATION_EVERY == VALIDATION_EVERY - 1}
  return {"train": [n for n in names if n not in val], "validation": [n for n in names if n in val]}


def split_documents(files: Sequence[tuple[str, str]]) -> dict[str, list[tuple[str, bytes]]]:
  """(relative name, path) pairs -> {split: [(name, bytes), ...]} following the module's split rule."""
  if not files:
    raise ValueError("no text files to split")
  paths = dict(files)
  if len(paths) == 1:
    (name, path), = paths.items()
    with open(path, "rb") as f:
      data = f.read()
    if len(data) < 2:
      raise ValueError(f"{path} holds {len(data)} bytes; a single-file corpus needs at least 2 "
                       "(train and validation get at least 1 each)")
    num_val = max(1, math.floor(len(data) * SINGLE_FILE_VALIDATION_FRACTION))
    return {"train": [(name, data[:-num_val])], "validation": [(name + "@validation", data[-num_val:])]}
  out = {}
  for split, names in split_names(list(paths)).items():
    docs = []
    for name in names:
      with open(paths[name], "rb") as f:
        docs.append((name, f.read()))
    out[split] = docs
  return out


class TextFilesBuilder(tfds.core.GeneratorBasedBuilder, skip_registration=True):
  """Base builder: subclasses list their files in `_files()`; splits follow `split_documents`."""

  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {"1.0.0": "One example per text file: raw bytes + relative name."}

  def _files(self) -> list[tuple[str, str]]:
    """(relative name, absolute path) of every document of the corpus."""
    raise NotImplementedError(f"{type(self).__name__} must define _files() or _split_documents()")

  def _info(self) -> tfds.core.DatasetInfo:
    return tfds.core.DatasetInfo(
        builder=self,
        description=self.__doc__,
        features=tfds.features.FeaturesDict({"text": tfds.features.Text(), "name": tfds.features.Text()}),
    )

  def _split_documents(self) -> dict[str, list[tuple[str, bytes]]]:
    """{split: [(unique name, text bytes), ...]}; by default `split_documents(self._files())`. Subclasses with
    documents that are not files override this instead of `_files`."""
    return split_documents(self._files())

  def _split_generators(self, dl_manager):
    del dl_manager  # Local files only: nothing is downloaded.
    return {split: self._generate_examples(docs) for split, docs in self._split_documents().items()}

  def _generate_examples(self, docs: list[tuple[str, bytes]]) -> Iterator[tuple[str, dict]]:
    for name, data in docs:
      yield name, {"text": data, "name": name}


def list_text_files(folder: str, pattern_suffix: str = ".txt") -> list[tuple[str, str]]:
  """Every file under `folder` (recursively) whose name ends with `pattern_suffix`, as sorted
  (relative path, absolute path) pairs."""
  out = []
  for root, dirs, names in os.walk(folder):
    dirs.sort()
    for name in names:
      if name.endswith(pattern_suffix):
        path = os.path.join(root, name)
        out.append((os.path.relpath(path, folder), path))
  return sorted(out)
