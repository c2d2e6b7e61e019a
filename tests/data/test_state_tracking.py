"""State-tracking tasks: determinism, lengths, targets against hand-written solvers under the trainer's accuracy,
and every input error."""
import itertools

import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from linear_seq import data
from linear_seq import steps
from linear_seq.data import state_tracking

# (task, modulus, group, vocab_size)
TASKS = [("parity", 2, "S3", 2), ("mod_count", 3, "S3", 3), ("mod_arith", 5, "S3", 8),
         ("permutation", 2, "S3", 6), ("permutation", 2, "S5", 120)]
IDS = ["parity", "mod_count3", "mod_arith5", "S3", "S5"]


def config(task, modulus=2, group="S3", vocab_size=8, seq_len=12, min_len=3) -> ml_collections.ConfigDict:
  return ml_collections.ConfigDict(dict(dataset=task, vocab_size=vocab_size, seq_len=seq_len, min_len=min_len,
                                        modulus=modulus, group=group, num_train=100, num_eval=20))


def examples(cfg, split="validation", seq_len=None, n=64):
  ex = data.make_examples(cfg, split, seq_len=seq_len or cfg.seq_len, seed=3)
  rows = [ex(i) for i in range(n)]
  return {k: np.stack([r[k] for r in rows]) for k in rows[0]}


def solve(task, x, length, modulus, group):
  """The running state of each prefix x[:t+1], t < length, written independently of the generator: counts for
  parity / mod_count, Python's own evaluation of the expression text for mod_arith, numpy composition of the
  permutations for the word problems. Returns targets [len(x)] (0 past the example)."""
  out = np.zeros(len(x), np.int64)
  if task in ("parity", "mod_count"):
    for t in range(length):
      out[t] = int(np.sum(x[:t + 1] == 1)) % modulus
  elif task == "mod_arith":
    sym = {modulus: "+", modulus + 1: "-", modulus + 2: "*"}
    for t in range(0, length, 2):
      text = "".join(sym.get(int(c), str(int(c))) for c in x[:t + 1])
      out[t] = eval(text) % modulus   # noqa: S307 (digits and + - * only)
  else:
    perms = list(itertools.permutations(range(state_tracking.GROUPS[group])))
    index = {p: i for i, p in enumerate(perms)}
    p = np.arange(len(perms[0]))
    for t in range(length):
      p = np.array(perms[x[t]])[p]      # p_t[i] = x_t[p_{t-1}[i]]
      out[t] = index[tuple(p)]
  return out


def accuracy(logits, batch) -> float:
  """The trainer's weighted argmax accuracy (steps.loss_terms)."""
  sums = steps.loss_terms(jnp.asarray(logits), {k: jnp.asarray(v) for k, v in batch.items()})
  return float(sums["correct"] / sums["weight"])


@pytest.mark.parametrize("task,modulus,group,vocab", TASKS, ids=IDS)
def test_hand_written_solver_scores_one_and_a_constant_does_not(task, modulus, group, vocab):
  cfg = config(task, modulus, group, vocab)
  batch = examples(cfg, n=32 if group == "S5" else 64)
  lengths = [int(np.flatnonzero(np.asarray(w) > 0).max()) + 1 for w in batch["weights"]]
  solved = np.stack([solve(task, x, n, modulus, group) for x, n in zip(batch["inputs"], lengths)])
  assert accuracy(np.eye(vocab)[solved] * 10.0, batch) == 1.0
  w = batch["weights"] > 0
  most_common = np.bincount(batch["targets"][w]).argmax()
  constant = np.broadcast_to(np.eye(vocab)[most_common], batch["targets"].shape + (vocab,))
  assert accuracy(constant, batch) < 0.75
  if task == "mod_arith":   # targets at the number positions only
    assert np.all(w[:, 1::2] == 0) and np.all(w[np.arange(len(w)), 0])


def test_lengths_padding_and_determinism():
  cfg = config("parity", seq_len=12, min_len=3)
  val = examples(cfg, n=200)
  n_BT = val["weights"].sum(axis=1)
  assert n_BT.min() == 3 and n_BT.max() == 12   # uniform over [min_len, L_train]: both ends occur in 200 draws
  assert all(np.all(w[:int(n)] == 1) and np.all(w[int(n):] == 0) for w, n in zip(val["weights"], n_BT))
  assert np.all(val["inputs"][val["weights"] == 0] == 0)
  long = examples(cfg, seq_len=48, n=8)          # an evaluation length above L_train: exactly that long
  assert long["inputs"].shape == (8, 48) and np.all(long["weights"] == 1)
  again = examples(cfg, n=200)
  assert all(np.array_equal(val[k], again[k]) for k in val)
  train = examples(cfg, split="train", n=200)
  assert not np.array_equal(train["inputs"], val["inputs"])
  short = examples(cfg, seq_len=2, n=4)          # below min_len: lengths within [2, 2]
  assert np.all(short["weights"] == 1)


def test_permutation_table_is_the_group():
  table = state_tracking.permutation_table(3)
  assert table.shape == (6, 6) and np.all(table[0] == np.arange(6)) and np.all(table[:, 0] == np.arange(6))
  assert all(sorted(row) == list(range(6)) for row in table)                       # a Latin square
  assert not np.array_equal(table, table.T)                                        # S3 is not abelian
  a, b, c = 1, 3, 5
  assert table[table[a, b], c] == table[a, table[b, c]]                            # associative


def test_s5_table_and_running_products():
  """S5 (the study's hardest cell): a group whose sign is a homomorphism, and each target the running product."""
  table = state_tracking.permutation_table(5)
  perms = list(itertools.permutations(range(5)))
  assert table.shape == (120, 120) and np.all(table[0] == np.arange(120)) and np.all(table[:, 0] == np.arange(120))
  assert all(len(set(row)) == 120 for row in table) and all(len(set(col)) == 120 for col in table.T)
  a, b, c = np.random.default_rng(0).integers(0, 120, size=(3, 2000))
  assert np.array_equal(table[table[a, b], c], table[a, table[b, c]])
  sign = np.array([(-1) ** sum(p[i] > p[j] for i in range(5) for j in range(i + 1, 5)) for p in perms])
  assert np.array_equal(sign[table[a, b]], sign[a] * sign[b]) and (sign == -1).sum() == 60
  x, y, w = state_tracking.permutation(np.random.default_rng(1), 40, table)
  compose = lambda p, q: tuple(p[q[i]] for i in range(5))   # apply q, then p
  running = perms[x[0]]
  assert perms[y[0]] == running and np.all(w == 1)
  for t in range(1, 40):
    running = compose(perms[x[t]], running)
    assert perms[y[t]] == running


BAD = [
    (dict(task="mod_count", modulus=1), "mod_count: data.modulus must be an integer >= 2, got 1"),
    (dict(task="mod_arith", modulus=0), "mod_arith: data.modulus must be an integer >= 2, got 0"),
    (dict(task="permutation", group="A5"), "permutation: unknown data.group 'A5'; valid: S3, S5"),
    (dict(task="parity", min_len=0), r"parity: lengths must be positive .* got seq_len=12, train_len=12, min_len=0"),
    (dict(task="parity", min_len=13), "parity: data.min_len=13 must be <= data.seq_len=12"),
    (dict(task="parity", vocab_size=1), "parity: data.vocab_size=1 is too small: the task's tokens need >= 2"),
    (dict(task="mod_arith", modulus=7, vocab_size=8),
     r"mod_arith: data.vocab_size=8 is too small: the task's tokens need >= 10 \(modulus 7 \+ 3 operators\)"),
    (dict(task="permutation", group="S5", vocab_size=100),
     "permutation: data.vocab_size=100 is too small: the task's tokens need >= 120"),
]


@pytest.mark.parametrize("kwargs,message", BAD, ids=[m for _, m in BAD])
def test_errors(kwargs, message):
  cfg = config(**kwargs)
  with pytest.raises(ValueError, match=f"^{message}"):
    data.dataset_info(cfg)   # checked before anything compiles (validation.check_config calls this)
