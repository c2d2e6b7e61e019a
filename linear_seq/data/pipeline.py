"""The one grain pipeline for every dataset: global order -> this host's rows -> examples -> batches.

An `Examples` source is random access: `examples(i)` for i in [0, len(examples)) gives a dict of [T] arrays
(text: packed rows, text.py; synthetic: generated examples, synthetic.py) and `examples.pad()` an all-padding
one. With B the global batch size, S = shard_count, b = B // S and N = len(examples):

  order[j]   (j >= 0) = example at position j of the global stream: with shuffle, epoch e = j // N is a
             permutation of [0, N) seeded by (seed + e) (grain's MapDataset.shuffle + index_shuffle, so each
             epoch is ordered differently); without, j % N. Without repeat the stream has ceil(N / B) * B
             positions, those >= N being padding (weights 0, segment_ids 0).
  global batch k = order[k*B : (k+1)*B]; host h's batch k = rows h*b .. (h+1)*b - 1 of it.

So the hosts' batches are disjoint and together form exactly the single-host batch, every host gets the same
number of batches, and a batch depends only on its step k. Built from grain.MapDataset.range(...).map(...)
.batch(b).to_iter_dataset(), whose iterator state is {'next_index': k} (JSON-serializable): set_state
resumes exactly where get_state was taken.
"""
import sys
from typing import Any, Protocol

import grain
import numpy as np

# Background reading: a couple of threads and a few batches ahead (CPU training shares the cores).
READ_OPTIONS = grain.ReadOptions(num_threads=2, prefetch_buffer_size=4)


class Examples(Protocol):

  def __len__(self) -> int: ...

  def __call__(self, index: int) -> dict[str, np.ndarray]: ...

  def pad(self) -> dict[str, np.ndarray]: ...


def _check_int(name: str, value: Any, low: int) -> None:
  if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
    raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")


def stream_order(num: int, *, seed: int, shuffle: bool) -> grain.MapDataset:
  """order[j] for every position j >= 0 of the global stream (the module docstring): the example index there."""
  order = grain.MapDataset.range(num)
  return order.shuffle(seed=int(seed)) if shuffle else order


def batches(examples: Examples, *, batch_size: int, seed: int, shuffle: bool, repeat: bool,
            shard_index: int = 0, shard_count: int = 1) -> grain.DatasetIterator:
  """Iterator of this host's batches (dicts of [batch_size // shard_count, T] arrays); see the module
  docstring for the order. Ends (StopIteration) after ceil(N / batch_size) batches unless `repeat`."""
  _check_int("batch_size", batch_size, 1)
  _check_int("shard_count", shard_count, 1)
  _check_int("shard_index", shard_index, 0)
  if shard_index >= shard_count:
    raise ValueError(f"shard_index must be in [0, shard_count={shard_count}), got {shard_index}")
  if batch_size % shard_count:
    raise ValueError(f"batch_size={batch_size} must be divisible by shard_count={shard_count} "
                     "(each host gets batch_size // shard_count rows)")
  _check_int("seed", seed, 0)
  if seed >= 2**32:
    raise ValueError(f"seed must be < 2**32, got {seed}")
  num = len(examples)
  if num == 0:
    raise ValueError("the split holds no examples (empty documents or num_train / num_eval = 0)")

  order = stream_order(num, seed=seed, shuffle=shuffle)
  per_host = batch_size // shard_count
  num_rows = sys.maxsize if repeat else -(-num // batch_size) * batch_size
  local_rows = num_rows if repeat else num_rows // shard_count

  def example(local: int) -> dict[str, np.ndarray]:
    k, r = divmod(local, per_host)
    j = k * batch_size + shard_index * per_host + r
    return examples(order[j]) if repeat or j < num else examples.pad()

  ds = grain.MapDataset.range(local_rows).map(example).batch(per_host, drop_remainder=True)
  return ds.to_iter_dataset(READ_OPTIONS).__iter__()
