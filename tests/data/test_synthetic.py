"""Synthetic tasks: determinism from (seed, split, index), correct answers, weights only on answers."""
import numpy as np
import pytest

from linear_seq.data import synthetic


def _task(name, split="train", seed=0, seq_len=64, vocab_size=100, **kw):
  return synthetic.SyntheticTask(name, vocab_size=vocab_size, seq_len=seq_len, seed=seed, split=split,
                                 num_examples=10, **kw)


@pytest.mark.parametrize("name", synthetic.TASKS)
def test_deterministic_and_independent(name):
  a, b = _task(name)(3), _task(name)(3)
  for key in a:
    np.testing.assert_array_equal(a[key], b[key])
  assert not np.array_equal(a["inputs"], _task(name)(4)["inputs"])
  assert not np.array_equal(a["inputs"], _task(name, split="validation")(3)["inputs"])
  assert not np.array_equal(a["inputs"], _task(name, seed=1)(3)["inputs"])
  assert a["inputs"].shape == a["targets"].shape == a["weights"].shape == (64,)
  assert a["inputs"].dtype == np.int32 and a["weights"].dtype == np.float32
  assert "segment_ids" not in a  # one example per row: no document boundaries
  assert 0 <= a["inputs"].min() and a["inputs"].max() < 100 and a["targets"].max() < 100


def test_mqar_answers_are_the_paired_values():
  k, v = 6, 100
  task = _task("mqar", num_kv_pairs=k, vocab_size=v)
  for i in range(10):
    ex = task(i)
    x, y, w = ex["inputs"], ex["targets"], ex["weights"]
    keys, values = x[0:2 * k:2], x[1:2 * k:2]
    assert len(set(keys)) == k and np.all((1 <= keys) & (keys < v // 2))
    assert len(set(values)) == k and np.all((v // 2 <= values) & (values < v))
    answer = np.flatnonzero(w)
    assert len(answer) == k and np.all(w[answer] == 1) and answer.min() >= 2 * k
    assert sorted(x[answer]) == sorted(keys)                     # each key queried once
    pair = dict(zip(keys, values))
    assert all(y[t] == pair[x[t]] for t in answer)


def test_selective_copy_copies_the_scattered_tokens_in_order():
  n, t, v = 5, 32, 20
  task = _task("selective_copy", num_tokens_to_copy=n, seq_len=t, vocab_size=v)
  for i in range(10):
    ex = task(i)
    x, y, w = ex["inputs"], ex["targets"], ex["weights"]
    context = x[:t - n]
    scattered = context[context != 0]
    assert len(scattered) == n and x[t - n] == v - 1
    np.testing.assert_array_equal(np.flatnonzero(w), np.arange(t - n, t))
    np.testing.assert_array_equal(y[w == 1], scattered)


def test_induction_recalls_the_token_after_the_trigger():
  t, v = 40, 30
  task = _task("induction", seq_len=t, vocab_size=v)
  for i in range(10):
    ex = task(i)
    x, y, w = ex["inputs"], ex["targets"], ex["weights"]
    first, last = np.flatnonzero(x == v - 1)                    # the trigger appears exactly twice
    assert last == t - 1 and np.flatnonzero(w).tolist() == [t - 1]
    assert y[t - 1] == x[first + 1]


@pytest.mark.parametrize("name,kw,match", [
    ("mqar", dict(num_kv_pairs=20, seq_len=64), "seq_len must be >= 4 \\* num_kv_pairs = 80"),
    ("mqar", dict(num_kv_pairs=8, vocab_size=16), "vocab_size=16 is too small"),
    ("selective_copy", dict(num_tokens_to_copy=40, seq_len=64), "seq_len must be >= 2 \\* num_tokens_to_copy"),
    ("induction", dict(vocab_size=2), "vocab_size must be >= 3"),
    ("copy", {}, "unknown synthetic task 'copy'; valid: mqar, selective_copy, induction"),
])
def test_bad_arguments(name, kw, match):
  with pytest.raises(ValueError, match=match):
    _task(name, **kw)
