"""Synthetic recall tasks, each example generated from np.random.default_rng([seed, split_id, index]).

split_id is 0 for train (indices [0, num_train)) and 1 for validation (indices [0, num_eval)), so the two
splits are independent streams and an example never depends on the order it is read in. Every example has
the fixed length T = seq_len (no packing, so batches carry no 'segment_ids'); 'weights' are 1 on the answer positions only.

  mqar           Zoology's multi-query associative recall (HazyResearch/zoology, data/multiquery_ar.py):
                 K key-value pairs (keys from [1, V/2), values from [V/2, V), distinct within an example)
                 fill positions 0..2K-1; then each key is queried once at position 2K + 2*gap, the gaps
                 drawn without replacement with p(gap = g) ∝ (g + 1)^(a - 1) (a = 0.01, short gaps likely);
                 the target at a query position is the key's value. Every other position holds a random
                 token from [0, V) (Zoology's random_non_queries).
  selective_copy K data tokens from [1, V-1) scattered (in order) over the first T-K positions among blanks
                 (token 0), then a separator (V-1), then the K tokens again; loss on predicting the copies.
  induction      random tokens from [0, V-1); a trigger (V-1) at a random position p <= T-3 is followed by
                 the answer token; the last input is the trigger again and its target is that answer.
"""
import numpy as np

SPLIT_IDS = {"train": 0, "validation": 1}
MQAR_POWER_A = 0.01
TASKS = ("mqar", "selective_copy", "induction")


def mqar(rng: np.random.Generator, *, vocab_size: int, seq_len: int, num_kv_pairs: int,
         gap_p: np.ndarray) -> dict[str, np.ndarray]:
  """One MQAR example; gap_p [space] = the power-law gap distribution (space = (T - 2K) // 2)."""
  v, t, k = vocab_size, seq_len, num_kv_pairs
  half = v // 2
  keys = rng.choice(half - 1, k, replace=False) + 1
  values = rng.choice(v - half, k, replace=False) + half
  gaps = rng.choice(len(gap_p), k, replace=False, p=gap_p)
  x = np.zeros([t], np.int64)
  x[0:2 * k:2], x[1:2 * k:2] = keys, values
  query_pos = 2 * k + 2 * gaps
  x[query_pos] = keys
  filler = x == 0
  x[filler] = rng.integers(0, v, size=t)[filler]
  targets = np.zeros([t], np.int64)
  targets[:-1] = x[1:]
  targets[query_pos] = values
  weights = np.zeros([t], np.float32)
  weights[query_pos] = 1.0
  return {"inputs": x, "targets": targets, "weights": weights}


def selective_copy(rng: np.random.Generator, *, vocab_size: int, seq_len: int,
                   num_tokens: int) -> dict[str, np.ndarray]:
  """One selective-copying example (blank = 0, separator = V-1, data tokens in [1, V-1))."""
  v, t, k = vocab_size, seq_len, num_tokens
  context = t - k
  tokens = rng.integers(1, v - 1, size=k)
  x = np.zeros([t + 1], np.int64)
  x[np.sort(rng.choice(context, k, replace=False))] = tokens
  x[context] = v - 1
  x[context + 1:] = tokens
  weights = np.zeros([t], np.float32)
  weights[context:] = 1.0
  return {"inputs": x[:-1], "targets": x[1:], "weights": weights}


def induction(rng: np.random.Generator, *, vocab_size: int, seq_len: int) -> dict[str, np.ndarray]:
  """One induction-head example (trigger = V-1, other tokens in [0, V-1))."""
  v, t = vocab_size, seq_len
  x = rng.integers(0, v - 1, size=t + 1)
  p = rng.integers(0, t - 2)
  x[p] = x[t - 1] = v - 1
  x[t] = x[p + 1]
  weights = np.zeros([t], np.float32)
  weights[t - 1] = 1.0
  return {"inputs": x[:-1], "targets": x[1:], "weights": weights}


def _check(ok: bool, message: str) -> None:
  if not ok:
    raise ValueError(message)


class SyntheticTask:
  """Random access to a synthetic split: task(index) -> dict of 'inputs', 'targets' int32 [T],
  'weights' float32 [T]. No 'segment_ids': every row is one example (one document), so the model runs
  without document resets (S4 keeps its FFT form)."""

  def __init__(self, name: str, *, vocab_size: int, seq_len: int, seed: int, split: str, num_examples: int,
               num_kv_pairs: int = 4, num_tokens_to_copy: int = 16):
    _check(name in TASKS, f"unknown synthetic task {name!r}; valid: {', '.join(TASKS)}")
    _check(split in SPLIT_IDS, f"unknown split {split!r}; valid: {', '.join(SPLIT_IDS)}")
    _check(num_examples > 0, f"{name}: the {split} split needs a positive number of examples "
           f"(config.data.num_train / num_eval), got {num_examples}")
    _check(seed >= 0, f"seed must be an integer >= 0, got {seed}")
    self.name, self.seq_len, self.seed, self.num_examples = name, seq_len, seed, num_examples
    self._split_id = SPLIT_IDS[split]
    v, t = vocab_size, seq_len
    if name == "mqar":
      k = num_kv_pairs
      _check(k >= 1, f"mqar: num_kv_pairs must be >= 1, got {k}")
      _check(4 * k <= t, f"mqar: seq_len must be >= 4 * num_kv_pairs = {4 * k} (the pairs, then a query "
             f"slot per pair among as many gaps), got {t}")
      _check(k <= v // 2 - 1 and k <= v - v // 2,
             f"mqar: vocab_size={v} is too small for {k} distinct keys in [1, V/2) (need V >= {2 * k + 2})")
      space = (t - 2 * k) // 2
      p = MQAR_POWER_A * np.arange(1, space + 1, dtype=np.float64) ** (MQAR_POWER_A - 1)
      self._make = lambda rng: mqar(rng, vocab_size=v, seq_len=t, num_kv_pairs=k, gap_p=p / p.sum())
    elif name == "selective_copy":
      k = num_tokens_to_copy
      _check(k >= 1, f"selective_copy: num_tokens_to_copy must be >= 1, got {k}")
      _check(t >= 2 * k, f"selective_copy: seq_len must be >= 2 * num_tokens_to_copy = {2 * k}, got {t}")
      _check(v >= 3, f"selective_copy: vocab_size must be >= 3 (blank, separator, data), got {v}")
      self._make = lambda rng: selective_copy(rng, vocab_size=v, seq_len=t, num_tokens=k)
    else:
      _check(t >= 3, f"induction: seq_len must be >= 3, got {t}")
      _check(v >= 3, f"induction: vocab_size must be >= 3 (trigger + 2 tokens), got {v}")
      self._make = lambda rng: induction(rng, vocab_size=v, seq_len=t)

  def __len__(self) -> int:
    return self.num_examples

  def __call__(self, index: int) -> dict[str, np.ndarray]:
    ex = self._make(np.random.default_rng([self.seed, self._split_id, int(index)]))
    return {
        "inputs": ex["inputs"].astype(np.int32),
        "targets": ex["targets"].astype(np.int32),
        "weights": ex["weights"],
    }

  def pad(self) -> dict[str, np.ndarray]:
    zeros = np.zeros([self.seq_len], np.int32)
    return {"inputs": zeros, "targets": zeros, "weights": zeros.astype(np.float32)}
