"""TFDS's own text datasets (`tiny_shakespeare`, `lm1b`) behind the optional `tf` extra.

Preparing them needs TensorFlow (`pip install 'linear_seq[tf]'`) and a network connection; both are checked
first so a missing piece fails in milliseconds (TFDS itself retries downloads for minutes when offline).
Once prepared as array_record (we always pass file_format='array_record'), reading them needs neither.
Their examples are {'text': bytes}; `lm1b` has no validation split, so its 'test' split plays that role.
"""
import glob
import importlib.util
import os
import socket

import tensorflow_datasets as tfds

# name -> (our split -> the dataset's split, host its preparation downloads from)
DATASETS = {
    "tiny_shakespeare": ({"train": "train", "validation": "validation"}, "raw.githubusercontent.com"),
    "lm1b": ({"train": "train", "validation": "test"}, "www.statmt.org"),
}
INSTALL_HINT = "pip install 'linear_seq[tf]'  (the optional `tf` extra: TensorFlow)"
CONNECT_TIMEOUT_S = 3.0


def resolve_data_dir(data_dir: str) -> str:
  """config.data.data_dir, or TFDS's default (~/tensorflow_datasets, or $TFDS_DATA_DIR) when ''."""
  return os.path.expanduser(data_dir) if data_dir else tfds.core.constants.DATA_DIR


def prepared_dir(name: str, data_dir: str) -> str | None:
  """The folder holding `name` prepared as array_record under `data_dir` (readable without TensorFlow;
  the last one in sorted order if there are several versions/configs), or None."""
  root = os.path.join(resolve_data_dir(data_dir), name)
  infos = sorted(glob.glob(os.path.join(root, "**", "dataset_info.json"), recursive=True))
  dirs = [os.path.dirname(i) for i in infos if glob.glob(os.path.join(os.path.dirname(i), "*.array_record*"))]
  return dirs[-1] if dirs else None


def _reachable(host: str) -> bool:
  try:
    socket.create_connection((host, 443), timeout=CONNECT_TIMEOUT_S).close()
    return True
  except OSError:
    return False


def check_available(name: str, data_dir: str) -> None:
  """Returns when `name` can be read or prepared here; raises ImportError (no TensorFlow) or
  ConnectionError (offline) with what to do, without touching TFDS's download machinery."""
  if prepared_dir(name, data_dir):
    return
  where = resolve_data_dir(data_dir)
  if importlib.util.find_spec("tensorflow") is None:
    raise ImportError(
        f"dataset {name!r} is one of TFDS's own datasets and needs TensorFlow to be prepared; it is not "
        f"prepared as array_record in {where} and TensorFlow is not installed. Install the extra: "
        f"{INSTALL_HINT}; or use dataset=shakespeare or dataset=local_text, which need no TensorFlow")
  host = DATASETS[name][1]
  if not _reachable(host):
    raise ConnectionError(
        f"dataset {name!r} is not prepared in {where} and its download host {host} cannot be reached "
        f"(offline?); prepare it on a connected machine with the same data_dir, or use dataset=shakespeare "
        f"or dataset=local_text")


def builder(name: str, data_dir: str) -> tfds.core.DatasetBuilder:
  """A read-only builder on the prepared folder when there is one (no TensorFlow needed), else the
  registered TFDS builder writing array_record (after check_available). Split names via `split_name`."""
  ready = prepared_dir(name, data_dir)
  if ready:
    return tfds.builder_from_directory(ready)
  check_available(name, data_dir)
  return tfds.builder(name, data_dir=resolve_data_dir(data_dir), file_format="array_record")


def split_name(name: str, split: str) -> str:
  return DATASETS[name][0][split]
