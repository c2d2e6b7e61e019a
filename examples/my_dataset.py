"""A plug-in text dataset, registered from outside the package: counting in English words.

  python -m linear_seq.main --config=configs/default.py:tiny=True --workdir=runs/counting \
      --config.imports=my_dataset --config.data.dataset=counting      (with examples/ on PYTHONPATH)

A text dataset is a function config.data -> a TFDS builder whose examples have a 'text' feature and
'train' / 'validation' splits; subclassing text_files.TextFilesBuilder and returning the documents from
`_split_documents` is the shortest way. It is prepared once as array_record under data.data_dir and goes
through the same packing, shuffling and batching as the built-in corpora (any tokenizer applies).
"""
import tensorflow_datasets as tfds

import linear_seq.data
from linear_seq.data import text_files

WORDS = "zero one two three four five six seven eight nine".split()


def count(start: int, n: int) -> bytes:
  """'four two, four three, ...': the numbers start .. start+n−1, digit by digit."""
  return (", ".join(" ".join(WORDS[int(d)] for d in str(i)) for i in range(start, start + n)) + ".\n").encode()


class Counting(text_files.TextFilesBuilder, skip_registration=True):
  """100 documents of 50 numbers each; every 10th document is validation."""

  VERSION = tfds.core.Version("1.0.0")

  def _split_documents(self) -> dict[str, list[tuple[str, bytes]]]:
    docs = [(f"doc{i:03d}", count(50 * i, 50)) for i in range(100)]
    return {"train": [d for i, d in enumerate(docs) if i % 10 != 9],
            "validation": [d for i, d in enumerate(docs) if i % 10 == 9]}


@linear_seq.data.register_dataset("counting")
def counting(config) -> tfds.core.DatasetBuilder:
  return Counting(data_dir=config.data_dir or None, file_format="array_record")
