"""The grain pipeline: determinism, exact resume, disjoint covering shards, validation coverage + padding."""
import itertools
import json

import numpy as np
import pytest

from linear_seq import data
from linear_seq.data import pipeline
from linear_seq.data import registry
from linear_seq.data import tokenizer as tokenizer_lib
from tests.helpers import default_data_config, write_files

KEYS = ("inputs", "targets", "weights", "segment_ids")


@pytest.fixture
def text_config(tmp_path):
  data_config = default_data_config()
  data_config.data_dir = str(tmp_path / "tfds")
  files = {f"doc{i}.txt": f"{i}: " + "word " * (5 + 3 * i) + "\n" for i in range(5)}
  data_config.dataset, data_config.path = "local_text", write_files(tmp_path / "corpus", files)
  return data_config


@pytest.fixture
def mqar_config():
  data_config = default_data_config()
  data_config.dataset, data_config.vocab_size, data_config.num_kv_pairs = "mqar", 64, 2
  data_config.num_train, data_config.num_eval = 12, 7
  return data_config


def _take(it, n):
  return [next(it) for _ in range(n)]


def _assert_same(batches_a, batches_b):
  assert len(batches_a) == len(batches_b)
  for a, b in zip(batches_a, batches_b):
    assert a.keys() == b.keys() and set(a) <= set(KEYS)
    for key in a:
      np.testing.assert_array_equal(a[key], b[key])


@pytest.mark.parametrize("which", ["text", "mqar"])
def test_deterministic_and_resumable(which, text_config, mqar_config):
  config = text_config if which == "text" else mqar_config
  make = lambda seed: data.make_iterator(config, "train", batch_size=4, seq_len=8, seed=seed)
  it = make(3)
  first = _take(it, 3)
  state = json.loads(json.dumps(it.get_state()))          # what a checkpoint stores
  rest = _take(it, 4)                                     # crosses an epoch boundary for both datasets
  _assert_same(first + rest, _take(make(3), 7))
  resumed = make(3)
  resumed.set_state(state)
  _assert_same(rest, _take(resumed, 4))
  other = _take(make(4), 3)
  assert any(not np.array_equal(a["inputs"], b["inputs"]) for a, b in zip(first, other))
  b = first[0]
  expected = {"inputs": ((4, 8), np.int32), "targets": ((4, 8), np.int32), "weights": ((4, 8), np.float32)}
  if which == "text":  # synthetic rows are single examples: no segment_ids
    expected["segment_ids"] = ((4, 8), np.int32)
  assert {k: (v.shape, v.dtype) for k, v in b.items()} == expected


def test_train_epochs_are_permutations(mqar_config):
  task = registry.make_examples(mqar_config, "train", seq_len=16, seed=5)
  all_rows = sorted(task(i)["inputs"].tobytes() for i in range(12))
  it = data.make_iterator(mqar_config, "train", batch_size=4, seq_len=16, seed=5)
  epochs = [[row.tobytes() for b in _take(it, 3) for row in b["inputs"]] for _ in range(2)]
  assert sorted(epochs[0]) == all_rows and sorted(epochs[1]) == all_rows
  assert epochs[0] != epochs[1]                                     # reshuffled every epoch


@pytest.mark.parametrize("split,repeat", [("train", True), ("validation", False)])
def test_shards_disjoint_and_cover_the_global_batch(split, repeat, text_config):
  kw = dict(batch_size=9, seq_len=8, seed=1, repeat=repeat)   # validation: 12 rows -> 2 batches, 6 pad rows
  single = list(itertools.islice(data.make_iterator(text_config, split, **kw), 5))
  hosts = [list(itertools.islice(data.make_iterator(text_config, split, shard_index=h, shard_count=3, **kw), 5))
           for h in range(3)]
  assert all(len(h) == len(single) for h in hosts)
  for step, batch in enumerate(single):
    for key in KEYS:
      np.testing.assert_array_equal(np.concatenate([h[step][key] for h in hosts]), batch[key])


def test_validation_covers_the_split_once_with_padding(text_config):
  tok = tokenizer_lib.ByteTokenizer()
  examples = registry.make_examples(text_config, "validation", seq_len=5, seed=0)
  stream = examples.stream
  batches = list(data.make_iterator(text_config, "validation", batch_size=4, seq_len=5, seed=0, repeat=False))
  assert len(batches) == -(-len(examples) // 4)
  w = np.concatenate([b["weights"] for b in batches]).reshape(-1)
  targets = np.concatenate([b["targets"] for b in batches]).reshape(-1)
  inputs = np.concatenate([b["inputs"] for b in batches])
  segments = np.concatenate([b["segment_ids"] for b in batches])
  bytes_only = stream[stream < 256]
  np.testing.assert_array_equal(targets[w == 1], bytes_only)       # every byte predicted exactly once, in order
  pad_rows = inputs[len(examples):]
  assert len(pad_rows) == 4 * len(batches) - len(examples) > 0
  assert np.all(pad_rows == tok.pad_id) and np.all(segments[len(examples):] == 0)
  assert np.all(np.concatenate([b["weights"] for b in batches])[len(examples):] == 0)


def test_validation_synthetic_ends_and_pads(mqar_config):
  batches = list(data.make_iterator(mqar_config, "validation", batch_size=4, seq_len=16, seed=0, repeat=False))
  assert len(batches) == 2                                          # 7 examples -> 4 + 3 and one pad row
  last = batches[1]
  assert np.all(last["weights"][3] == 0) and np.all(last["inputs"][3] == 0)
  assert np.all(last["weights"][:3].sum(axis=1) == 2)


def test_packed_text_batches_reset_segments_at_documents(text_config):
  tok = tokenizer_lib.ByteTokenizer()
  batch = next(data.make_iterator(text_config, "train", batch_size=8, seq_len=64, seed=0))
  assert batch["segment_ids"].max() >= 2                            # some row spans two documents
  for x, s in zip(batch["inputs"], batch["segment_ids"]):
    real = x != tok.pad_id
    starts = np.flatnonzero(np.diff(s[real]) != 0) + 1
    np.testing.assert_array_equal(x[starts], tok.bos_id)           # ids change exactly at a BOS
    assert np.sum(x[1:][real[1:]] == tok.bos_id) == len(starts)


@pytest.mark.parametrize("kw,match", [
    (dict(batch_size=5, shard_count=2), "divisible by shard_count=2"),
    (dict(batch_size=4, shard_index=2, shard_count=2), "shard_index must be in"),
    (dict(batch_size=4, seed=-1), "seed must be an integer >= 0"),
    (dict(batch_size=4, seed=2**32), r"seed must be < 2\*\*32, got 4294967296"),
    (dict(batch_size=4, seq_len=0), "seq_len must be a positive integer, got 0"),
])
def test_pipeline_argument_errors(kw, match, mqar_config):
  with pytest.raises(ValueError, match=match):
    data.make_iterator(mqar_config, "train", **{"seed": 0, "seq_len": 16, **kw})


def test_empty_split_is_an_error():
  with pytest.raises(ValueError, match=r"the split holds no examples \(empty documents or num_train"):
    pipeline.batches([], batch_size=2, seed=0, shuffle=False, repeat=False)


def test_unknown_split(mqar_config):
  with pytest.raises(ValueError, match="unknown split 'test'; valid: train, validation"):
    data.make_iterator(mqar_config, "test", batch_size=4, seq_len=16, seed=0)
