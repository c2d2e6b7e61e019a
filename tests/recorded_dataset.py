"""A test plug-in dataset: Shakespeare's packed rows, recording every example index each process reads.

--config.imports=tests/recorded_dataset.py --config.data.dataset=recorded_shakespeare --config.data.vocab_size=258,
with $RECORD_DIR set: example i of split s read by process pid appends "i" to $RECORD_DIR/<s>-<pid>.txt (used by
tests/test_multiprocess.py to check that the processes read disjoint parts of the data). With $HOLD_AFTER=n too,
a train example at a global stream position >= n (data/pipeline.py's order) never returns: the kill test's
stalled peer trains the steps whose examples it has, then waits for data forever, while the other process
waits in the next step's collectives. Held by position, not by how many examples were read before: the
reader threads compute several batches at once, in no fixed order.
"""
import os
import time

import ml_collections

from linear_seq.data import pipeline
from linear_seq.data import registry


class Recorded:
  """Examples that append each index they are asked for to a per-process file, then return the inner one."""

  def __init__(self, inner, split: str, seed: int):
    self.inner, self.split = inner, split
    hold = os.environ.get("HOLD_AFTER")
    self.returned = None   # with $HOLD_AFTER: the example indices at stream positions < n, the others held
    if hold and split == "train":
      order = pipeline.stream_order(len(inner), seed=seed, shuffle=True)
      self.returned = {int(order[j]) for j in range(int(hold))}

  def __len__(self) -> int:
    return len(self.inner)

  def __call__(self, index: int):
    directory = os.environ.get("RECORD_DIR")
    if directory:
      with open(os.path.join(directory, f"{self.split}-{os.getpid()}.txt"), "a") as f:
        f.write(f"{int(index)}\n")
    while self.returned is not None and int(index) not in self.returned:   # forever (the test kills it)
      time.sleep(1)
    return self.inner(index)

  def pad(self):
    return self.inner.pad()


@registry.register_dataset("recorded_shakespeare", kind="synthetic")
def recorded_shakespeare(config, split: str, seq_len: int, seed: int) -> Recorded:
  inner = ml_collections.ConfigDict(config.to_dict())
  inner.dataset = "shakespeare"
  return Recorded(registry.make_examples(inner, split, seq_len=seq_len, seed=seed), split, seed)
