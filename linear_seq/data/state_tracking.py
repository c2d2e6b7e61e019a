"""State-tracking tasks: the running state of a finite automaton is the target, at every position that has one.

Each example is generated from np.random.default_rng([seed, split_id, index]) (split_id 0 train, 1 validation,
as in synthetic.py), so it never depends on the order it is read in. A row holds T = seq_len tokens. With
T <= train_len (= config.data.seq_len, the training length L_train) the example's length L is drawn uniformly
from [min(min_len, T), T] (Grazzi et al. 2025 train on lengths 3-40) and the positions from L on are padding
(token 0, weight 0); with T > train_len (an evaluation length, e.g. 2x, 4x, 8x L_train) every example is
exactly T long, so an accuracy at T measures length generalization. Inputs and targets share one vocabulary
(the LM's); a model is causal, so the target at t depends on inputs 0..t only. The targets:

  parity      inputs bits {0, 1}; target at every position t: x_0 + ... + x_t mod 2 (the running parity).
              Needs vocab_size >= 2.
  mod_count   inputs {0, 1} (1 is the counted token); target at every t: #{s <= t: x_s = 1} mod m
              (m = modulus). Needs vocab_size >= m.
  mod_arith   Deletang et al. (2023) / Grazzi et al.'s modular arithmetic without brackets: numbers in [0, m)
              at even positions, operators + - * (tokens m, m+1, m+2) at odd ones, e.g. 1 + 2 * 3 - 4 (mod 5).
              Target at every number position: the value mod m of the expression read so far, with * binding
              before + and - (the final number's target is Grazzi et al.'s label); operator positions have
              weight 0 (their value is that of the expression before them, a repeat). A finite automaton
              tracks it (the sum of finished terms, the open term's product and sign), so it is regular.
              Needs vocab_size >= m + 3.
  permutation word problems over a symmetric group (Merrill et al. 2024): each input is a group element
              (token i = the i-th permutation of range(n) in lexicographic order, 0 = identity); target at
              every t: the running product p_t = x_t ∘ p_{t-1} (p_t[i] = x_t[p_{t-1}[i]], p_{-1} = identity).
              S3 is solvable (a diagonal/cascade of simple automata suffices), S5 is not (NC1-complete).
              Needs vocab_size >= n! (6 for S3, 120 for S5).
"""
import itertools
import math

import numpy as np

TASKS = ("parity", "mod_count", "mod_arith", "permutation")
GROUPS = {"S3": 3, "S5": 5}   # group name -> n of S_n
SPLIT_IDS = {"train": 0, "validation": 1}
PLUS, MINUS, TIMES = 0, 1, 2  # operator offsets above the modulus in mod_arith


def permutation_table(n: int) -> np.ndarray:
  """[n!, n!] int64: table[a, b] = index of a ∘ b (apply b, then a) over the permutations of range(n) in
  lexicographic order (index 0 is the identity)."""
  perms = list(itertools.permutations(range(n)))
  index = {p: i for i, p in enumerate(perms)}
  return np.array([[index[tuple(a[j] for j in b)] for b in perms] for a in perms], np.int64)


def parity(rng: np.random.Generator, length: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """(inputs, targets, weights) [length]: random bits and their running parity, weights 1."""
  x = rng.integers(0, 2, size=length)
  return x, np.cumsum(x) % 2, np.ones([length], np.float32)


def mod_count(rng: np.random.Generator, length: int, modulus: int):
  """(inputs, targets, weights) [length]: random bits and the running count of 1s mod `modulus`."""
  x = rng.integers(0, 2, size=length)
  return x, np.cumsum(x) % modulus, np.ones([length], np.float32)


def mod_arith(rng: np.random.Generator, length: int, modulus: int):
  """(inputs, targets, weights) [length]: number (op number)... ; targets at the number positions (see the
  module docstring), computed by the automaton (total of finished terms, open term incl. its sign)."""
  m = modulus
  x = np.empty([length], np.int64)
  x[0::2] = rng.integers(0, m, size=(length + 1) // 2)
  x[1::2] = m + rng.integers(0, 3, size=length // 2)
  targets = np.zeros([length], np.int64)
  weights = np.zeros([length], np.float32)
  total, term, op = 0, 0, m + PLUS
  for t in range(0, length, 2):
    n = int(x[t])
    if op == m + TIMES:
      term = term * n % m
    else:
      total = (total + term) % m
      term = n if op == m + PLUS else (-n) % m
    targets[t], weights[t] = (total + term) % m, 1.0
    if t + 1 < length:
      op = int(x[t + 1])
  return x, targets, weights


def permutation(rng: np.random.Generator, length: int, table: np.ndarray):
  """(inputs, targets, weights) [length]: uniform group elements and their running product, weights 1."""
  x = rng.integers(0, len(table), size=length)
  targets = np.empty([length], np.int64)
  p = 0
  for t in range(length):
    p = table[x[t], p]
    targets[t] = p
  return x, targets, np.ones([length], np.float32)


def vocab_needed(name: str, *, modulus: int = 2, group: str = "S3") -> int:
  """The smallest vocab_size that holds the task's input and target tokens."""
  return {"parity": 2, "mod_count": modulus, "mod_arith": modulus + 3,
          "permutation": math.factorial(GROUPS.get(group, 0))}[name]


def _check(ok: bool, message: str) -> None:
  if not ok:
    raise ValueError(message)


class StateTrackingTask:
  """Random access to a split of a state-tracking task: task(index) -> 'inputs', 'targets' int32 [T],
  'weights' float32 [T] (no 'segment_ids': one example per row). See the module docstring for the lengths."""

  def __init__(self, name: str, *, vocab_size: int, seq_len: int, train_len: int, min_len: int, seed: int,
               split: str, num_examples: int, modulus: int = 5, group: str = "S3"):
    _check(name in TASKS, f"unknown state-tracking task {name!r}; valid: {', '.join(TASKS)}")
    _check(split in SPLIT_IDS, f"unknown split {split!r}; valid: {', '.join(SPLIT_IDS)}")
    _check(num_examples > 0, f"{name}: the {split} split needs a positive number of examples "
           f"(config.data.num_train / num_eval), got {num_examples}")
    _check(seed >= 0, f"seed must be an integer >= 0, got {seed}")
    _check(seq_len > 0 and train_len > 0 and min_len > 0,
           f"{name}: lengths must be positive (data.seq_len = L_train, eval lengths, data.min_len), got "
           f"seq_len={seq_len}, train_len={train_len}, min_len={min_len}")
    _check(min_len <= train_len, f"{name}: data.min_len={min_len} must be <= data.seq_len={train_len} (the "
           f"training lengths are drawn from [min_len, seq_len])")
    if name in ("mod_count", "mod_arith"):
      _check(modulus >= 2, f"{name}: data.modulus must be an integer >= 2, got {modulus}")
    if name == "permutation":
      _check(group in GROUPS, f"permutation: unknown data.group {group!r}; valid: {', '.join(GROUPS)}")
    need = vocab_needed(name, modulus=modulus, group=group)
    _check(vocab_size >= need, f"{name}: data.vocab_size={vocab_size} is too small: the task's tokens need "
           f">= {need}" + (f" (modulus {modulus} + 3 operators)" if name == "mod_arith" else ""))
    self.name, self.seq_len, self.seed, self.num_examples = name, seq_len, seed, num_examples
    self._split_id = SPLIT_IDS[split]
    self._lengths = (min(min_len, seq_len), seq_len) if seq_len <= train_len else (seq_len, seq_len)
    if name == "parity":
      self._make = parity
    elif name == "mod_count":
      self._make = lambda rng, n: mod_count(rng, n, modulus)
    elif name == "mod_arith":
      self._make = lambda rng, n: mod_arith(rng, n, modulus)
    else:
      table = permutation_table(GROUPS[group])
      self._make = lambda rng, n: permutation(rng, n, table)

  def __len__(self) -> int:
    return self.num_examples

  def __call__(self, index: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng([self.seed, self._split_id, int(index)])
    length = int(rng.integers(self._lengths[0], self._lengths[1] + 1))
    x, targets, weights = self._make(rng, length)
    out = self.pad()
    out["inputs"][:length], out["targets"][:length], out["weights"][:length] = x, targets, weights
    return out

  def pad(self) -> dict[str, np.ndarray]:
    zeros = np.zeros([self.seq_len], np.int32)
    return {"inputs": zeros, "targets": zeros.copy(), "weights": zeros.astype(np.float32)}
