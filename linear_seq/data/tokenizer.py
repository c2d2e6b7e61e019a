"""Tokenizers: the byte tokenizer (the default), the interface every tokenizer follows, and their registry.

Byte tokenizer: token = byte value (0..255), plus two specials. BOS (256) starts every document in a packed
text stream (it doubles as the document separator: the token before it is a document's last byte). PAD (257)
fills rows past the end of the data; it carries weight 0 and segment id 0. One token is one byte.

Every tokenizer (ByteTokenizer, bpe.BPETokenizer, a user's `@register_tokenizer('name')` class) has
  vocab_size, bos_id, pad_id; encode(str) -> list[int]; encode_bytes(bytes) -> uint16 array; decode(ids) -> str;
  token_bytes() -> float32 [vocab_size]: the bytes of text each token stands for (0 for specials), which turns
    nats/token into bits/byte, so runs with different tokenizers compare;
  cache_key: a str naming its vocabulary (token streams are cached per data dir, split and cache_key);
  classmethod build(data_config, train_documents, cache_dir) -> tokenizer: make it for a corpus
    (train_documents() iterates the training split's documents as bytes; cache_dir is beside the prepared data);
  save(directory) / classmethod load(data_config, directory): its state in a training workdir, so a run
    restores without the data.
"""
from typing import Any, Callable, Iterable, Optional

import numpy as np

from linear_seq import checks

NUM_BYTES = 256
BOS_ID = 256
PAD_ID = 257

# Tokenizer name (config.data.tokenizer) -> class; `register_tokenizer` adds to it.
TOKENIZERS: dict[str, type] = {}


def register_tokenizer(name: str) -> Callable[[type], type]:
  """Class decorator: `@register_tokenizer('mine')` makes `--config.data.tokenizer=mine` use the class."""
  return checks.registrar(TOKENIZERS, name)


def get_tokenizer(name: str) -> type:
  """The tokenizer class registered under `name`; ValueError listing the valid names otherwise."""
  return checks.lookup("tokenizer", TOKENIZERS, name)


@register_tokenizer("byte")
class ByteTokenizer:
  """UTF-8 bytes as tokens; vocab_size = 256 + 2 specials (BOS, PAD)."""

  vocab_size = NUM_BYTES + 2
  bos_id = BOS_ID
  pad_id = PAD_ID
  cache_key = "byte"

  @classmethod
  def build(cls, data_config: Any, train_documents: Callable[[], Iterable[bytes]],
            cache_dir: Optional[str]) -> "ByteTokenizer":
    del data_config, train_documents, cache_dir  # Nothing to learn.
    return cls()

  def save(self, directory: str) -> None:
    del directory  # Nothing to save: the config names it.

  @classmethod
  def load(cls, data_config: Any, directory: str) -> "ByteTokenizer":
    del data_config, directory
    return cls()

  def encode(self, text: str) -> list[int]:
    """str -> its UTF-8 bytes as ints (no BOS; prepend `bos_id` to start a document)."""
    return list(text.encode("utf-8"))

  def encode_bytes(self, data: bytes) -> np.ndarray:
    """Raw bytes -> uint16 token array [len(data)] (no decoding, so any byte sequence is valid)."""
    return np.frombuffer(data, dtype=np.uint8).astype(np.uint16)

  def decode(self, ids) -> str:
    """Token ids -> str; specials are dropped, invalid UTF-8 becomes U+FFFD."""
    ids = np.asarray(ids, dtype=np.int64).reshape(-1)
    data = ids[(ids >= 0) & (ids < NUM_BYTES)].astype(np.uint8).tobytes()
    return data.decode("utf-8", errors="replace")

  def token_bytes(self) -> np.ndarray:
    return (np.arange(self.vocab_size) < NUM_BYTES).astype(np.float32)

  def __repr__(self) -> str:
    return f"ByteTokenizer(vocab_size={self.vocab_size}, bos_id={self.bos_id}, pad_id={self.pad_id})"
