"""Text corpora as packed rows: documents joined into one token stream, cut into rows of seq_len + 1.

Stream: [BOS, doc_0 tokens..., BOS, doc_1 tokens..., ...] in the data source's (deterministic) order (tokens =
bytes with the byte tokenizer).
Row i = stream[i*T : i*T + T + 1] (padded with PAD past the end); inputs = row[:-1], targets = row[1:].
Consecutive rows overlap by one token, so the targets of rows 0..N-1 are non-overlapping windows that
predict every byte of the split exactly once (N = ceil((len(stream) - 1) / T)).
  weights[t]     = 1 where targets[t] is text, 0 where it is BOS or PAD (byte tokenizer: loss / ln 2 = bits/byte);
  target_bytes[t] = bytes of text targets[t] stands for, times weights[t] (1 or 0 with the byte tokenizer): total
                   nats / ln 2 / sum(target_bytes) is bits per byte whatever the tokenizer; from the
                   tokenizer's per-id token_bytes(), or, for one with encode_with_bytes (hf: a converted
                   model's tokenizer.json), from per-token counts of the document's own bytes kept beside the
                   stream (each document's sum to its UTF-8 length);
  segment_ids[t] = 1 + number of BOS among inputs[1..t] (a row spanning two documents reads 1,..,1,2,..,2;
                   the model resets its state where the id changes), 0 on PAD.
"""
import contextlib
import fcntl
import io
import logging
import os
import threading
from typing import Iterator

import numpy as np
import tensorflow_datasets as tfds
from tensorflow_datasets.core.utils import tqdm_utils

from linear_seq.data import text_files
from linear_seq.data import tokenizer as tokenizer_lib

_STREAMS: dict[tuple[str, str, str], np.ndarray] = {}
_BYTES: dict[tuple[str, str, str], np.ndarray] = {}  # per-token byte counts (tokenizers with encode_with_bytes)
_LOCK = threading.Lock()


def prepare(builder: tfds.core.DatasetBuilder) -> None:
  """download_and_prepare once (a no-op when the data dir already holds the prepared data). On a local
  data_dir an exclusive lock (<data dir>.lock) makes concurrent processes prepare it only once."""
  if builder.is_prepared():
    return
  target = str(builder.data_dir).rstrip("/")
  if "://" not in target and os.path.isdir(target) and os.listdir(target):
    # TFDS prepares into a temporary folder and renames it when done: a folder without dataset_info.json was
    # damaged afterwards (preparing over it fails with an obscure message).
    raise ValueError(f"the prepared data in {target} is damaged (no dataset_info.json): delete that folder to "
                     "prepare the data again")
  if "://" in target:  # Remote file systems: no lock.
    _download_and_prepare(builder)
    return
  os.makedirs(os.path.dirname(target), exist_ok=True)
  with open(target + ".lock", "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    if builder.is_prepared():  # Another process prepared it while we waited: load its info.
      builder.info.read_from_directory(builder.data_dir)
    else:
      _download_and_prepare(builder)


def _download_and_prepare(builder: tfds.core.DatasetBuilder) -> None:
  """builder.download_and_prepare() without progress bars; for a local corpus (text_files builders) TFDS's
  prints ('Downloading and preparing dataset Unknown size ...') go to the log as 'TFDS: ...', where the entry points drop them
  unless --verbose (metrics.quiet_library_logs)."""
  logging.info("preparing %s in %s", builder.name, builder.data_dir)
  active = getattr(tqdm_utils, "_active", True)
  tfds.display_progress_bar(False)
  printed = io.StringIO()
  local = isinstance(builder, text_files.TextFilesBuilder)
  try:
    with contextlib.redirect_stdout(printed) if local else contextlib.nullcontext():
      builder.download_and_prepare()
  finally:
    tfds.display_progress_bar(active)
    for line in printed.getvalue().splitlines():
      if line.strip():
        logging.info("TFDS: %s", line.strip())


def load_stream(builder: tfds.core.DatasetBuilder, split: str, tok: tokenizer_lib.ByteTokenizer) -> np.ndarray:
  """The split's token stream, uint16 [L] (uint32 for a vocabulary past 2**16); cached per (prepared data dir,
  split, tokenizer) in this process."""
  return _load(builder, split, tok)[0]


def load_byte_counts(builder: tfds.core.DatasetBuilder, split: str, tok) -> np.ndarray | None:
  """Bytes of text per token of load_stream's stream, float32 [L] (0 at BOS), for a tokenizer with
  encode_with_bytes; None for the others (their token_bytes() table holds the counts)."""
  return _load(builder, split, tok)[1]


def _load(builder, split: str, tok) -> tuple[np.ndarray, np.ndarray | None]:
  key = (str(builder.data_dir), split, getattr(tok, "cache_key", type(tok).__name__))
  with _LOCK:
    if key not in _STREAMS:
      counted = hasattr(tok, "encode_with_bytes")
      dtype = np.uint16 if tok.vocab_size <= 2**16 else np.uint32
      bos, zero = np.array([tok.bos_id], dtype), np.zeros([1], np.float32)
      parts, counts = [], []
      for document in read_documents(builder, split):
        if counted:
          ids, n = tok.encode_with_bytes(document)
          parts += [bos, ids]
          counts += [zero, n]
        else:
          parts += [bos, tok.encode_bytes(document)]
      _STREAMS[key] = np.concatenate(parts) if parts else np.zeros([0], dtype)
      if counted:
        _BYTES[key] = np.concatenate(counts) if counts else np.zeros([0], np.float32)
    return _STREAMS[key], _BYTES.get(key)


def read_documents(builder: tfds.core.DatasetBuilder, split: str) -> Iterator[bytes]:
  """The 'text' of every example of a prepared split, in order; ValueError naming the prepared folder when it
  cannot be read (e.g. a truncated array_record file)."""
  try:
    source = builder.as_data_source(split=split)
    for i in range(len(source)):
      yield source[i]["text"]
  except Exception as e:  # pylint: disable=broad-except  (array_record and TFDS raise RuntimeError, OSError, ...)
    lines = [l.strip() for l in str(e).strip().splitlines() if l.strip()]
    raise ValueError(f"the prepared data in {builder.data_dir} is damaged ({type(e).__name__}: "
                     f"{lines[-1] if lines else ''}): delete that folder to prepare the data again") from e


class PackedRows:
  """Random access to the rows of a token stream (see the module docstring); examples are dicts of
  'inputs', 'targets' int32 [T], 'weights' float32 [T], 'segment_ids' int32 [T], 'target_bytes' float32 [T]."""

  def __init__(self, stream: np.ndarray, seq_len: int, tok: tokenizer_lib.ByteTokenizer,
               byte_counts: np.ndarray | None = None):
    """byte_counts: bytes of text per stream position (load_byte_counts), else tok.token_bytes() per id."""
    self.stream, self.seq_len, self.tok, self.byte_counts = stream, seq_len, tok, byte_counts
    self.token_bytes = np.asarray(tok.token_bytes(), np.float32) if byte_counts is None else None
    self.num_rows = max(0, -(-(len(stream) - 1) // seq_len))

  def __len__(self) -> int:
    return self.num_rows

  def __call__(self, index: int) -> dict[str, np.ndarray]:
    t = self.seq_len
    row = np.full([t + 1], self.tok.pad_id, np.int32)
    chunk = self.stream[index * t: index * t + t + 1]
    row[:len(chunk)] = chunk
    inputs, targets = row[:-1], row[1:]
    is_bos = inputs == self.tok.bos_id
    segment_ids = 1 + np.cumsum(is_bos, dtype=np.int32) - is_bos[0]
    segment_ids[inputs == self.tok.pad_id] = 0
    weights = ((targets != self.tok.bos_id) & (targets != self.tok.pad_id)).astype(np.float32)
    return {
        "inputs": inputs,
        "targets": targets,
        "weights": weights,
        "segment_ids": segment_ids.astype(np.int32),
        "target_bytes": self._target_bytes(index, targets) * weights,
    }

  def _target_bytes(self, index: int, targets: np.ndarray) -> np.ndarray:
    if self.byte_counts is None:
      return self.token_bytes[targets]
    t = self.seq_len
    out = np.zeros([t], np.float32)
    counts = self.byte_counts[index * t + 1: index * t + t + 1]   # (the targets' stream positions)
    out[:len(counts)] = counts
    return out

  def pad(self) -> dict[str, np.ndarray]:
    t = self.seq_len
    return {
        "inputs": np.full([t], self.tok.pad_id, np.int32),
        "targets": np.full([t], self.tok.pad_id, np.int32),
        "weights": np.zeros([t], np.float32),
        "segment_ids": np.zeros([t], np.int32),
        "target_bytes": np.zeros([t], np.float32),
    }
