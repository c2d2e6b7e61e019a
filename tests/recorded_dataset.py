"""A test plug-in dataset: Shakespeare's packed rows, recording every example index each process reads.

--config.imports=tests/recorded_dataset.py --config.data.dataset=recorded_shakespeare --config.data.vocab_size=258,
with $RECORD_DIR set: example i of split s read by process pid appends "i" to $RECORD_DIR/<s>-<pid>.txt (used by
tests/test_multiprocess.py to check that the processes read disjoint parts of the data). With $HOLD_AFTER=n too,
every train example read after the process's n-th never returns (the kill test's stalled peer: it trains the
steps whose examples it has, then waits for data forever, while the other process waits in the next step's
collectives).
"""
import os
import time

import ml_collections

from linear_seq.data import registry


class Recorded:
  """Examples that append each index they are asked for to a per-process file, then return the inner one."""

  def __init__(self, inner, split: str):
    self.inner, self.split = inner, split

  def __len__(self) -> int:
    return len(self.inner)

  def __call__(self, index: int):
    directory = os.environ.get("RECORD_DIR")
    if directory:
      with open(os.path.join(directory, f"{self.split}-{os.getpid()}.txt"), "a") as f:
        f.write(f"{int(index)}\n")
      hold = os.environ.get("HOLD_AFTER")
      if hold and self.split == "train":
        with open(os.path.join(directory, f"{self.split}-{os.getpid()}.txt")) as f:
          while sum(1 for _ in f) > int(hold):   # forever (the test kills this process)
            time.sleep(1)
            f.seek(0)
    return self.inner(index)

  def pad(self):
    return self.inner.pad()


@registry.register_dataset("recorded_shakespeare", kind="synthetic")
def recorded_shakespeare(config, split: str, seq_len: int, seed: int) -> Recorded:
  inner = ml_collections.ConfigDict(config.to_dict())
  inner.dataset = "shakespeare"
  return Recorded(registry.make_examples(inner, split, seq_len=seq_len, seed=seed), split)
