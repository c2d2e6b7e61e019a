"""Does a trained permutation run track the permutation's sign? (the S3 runs that end at 1/3)

  python experiments/state_tracking/signs.py runs/state_tracking*/<S3 points>

For each workdir (a trained run on the permutation task): the validation split's first NUM_SEQUENCES sequences at
the training lengths and at each of eval.lengths, passed through the model; over the scored positions, the
accuracy of the predicted element (the argmax over the group's n! elements) and of its sign (even or odd
permutation: the prediction's sign equals the target's). A model that tracks the sign (S_n -> Z2, which a -1
eigenvalue can count) and guesses among the n!/2 elements of that sign scores sign accuracy 1 and element
accuracy 2/n! (1/3 on S3); one that tracks nothing scores 1/2 and 1/n!. Prints one markdown row per run and
length, with the checkpoint's step it read (the latest).
"""
import itertools
import math
import sys

import numpy as np

import linear_seq
from linear_seq import data
from linear_seq import eval_lib
from linear_seq.data import state_tracking
from linear_seq.studies import common

NUM_SEQUENCES = 200
BATCH = 100


def signs(n: int) -> np.ndarray:
  """[n!] int: +1 / -1, the sign of each permutation of range(n) in state_tracking.permutation_table's order."""
  out = []
  for p in itertools.permutations(range(n)):
    inversions = sum(p[i] > p[j] for i in range(n) for j in range(i + 1, n))
    out.append(-1 if inversions % 2 else 1)
  return np.asarray(out)


def accuracies(predictions: np.ndarray, targets: np.ndarray, weights: np.ndarray, n: int) -> tuple[float, float]:
  """(element accuracy, sign accuracy) over the positions with weight > 0."""
  scored = weights > 0
  sign = signs(n)
  p, t = predictions[scored], targets[scored]
  return float(np.mean(p == t)), float(np.mean(sign[p] == sign[t]))


def rows(workdir: str) -> list[list[str]]:
  """The table's rows for one trained workdir: run, group, seed, step read, length, element accuracy, sign
  accuracy."""
  run = linear_seq.load(workdir)
  config = run.config
  if config.data.dataset != "permutation":
    raise ValueError(f"{workdir} trains data.dataset={config.data.dataset!r}, not the permutation task")
  n = state_tracking.GROUPS[config.data.group]
  m = config.model
  name = (f"{m.mixer}" + (f" n_h={m.householder_steps}" if m.mixer == "deltaproduct" else "")
          + (f" gate={m.delta_gate}" if m.mixer == "deltanet" else "") + (" neg" if m.negative_eigenvalues else "")
          + f", {m.num_layers} layer" + ("s" if m.num_layers > 1 else ""))
  out = []
  for length in (int(config.data.seq_len),) + eval_lib.eval_lengths(config):
    batches = data.make_iterator(config.data, "validation", batch_size=BATCH, seq_len=length, seed=0, repeat=False)
    preds, targets, weights = [], [], []
    for _, batch in zip(range(-(-NUM_SEQUENCES // BATCH)), batches):
      logits = run.logits(np.asarray(batch["inputs"]))
      preds.append(np.argmax(logits[..., :math.factorial(n)], axis=-1))
      targets.append(np.asarray(batch["targets"]))
      weights.append(np.asarray(batch["weights"]))
    acc, sign_acc = accuracies(np.concatenate(preds), np.concatenate(targets), np.concatenate(weights), n)
    label = f"≤ {length}" if length == int(config.data.seq_len) else str(length)
    out.append([name, config.data.group, str(config.seed), str(run.step), label, f"{acc:.3f}", f"{sign_acc:.3f}"])
  return out


def main(workdirs: list[str]) -> None:
  common.print_probe(["run", "group", "seed", "step", "T", "accuracy", "sign accuracy"], rows, workdirs)


if __name__ == "__main__":
  main(sys.argv[1:])
