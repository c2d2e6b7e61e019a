"""Byte-level tokenizer: token = byte value (0..255), plus two specials.

BOS (256) starts every document in a packed text stream (it doubles as the document separator: the token
before it is a document's last byte). PAD (257) fills rows past the end of the data; it carries weight 0 and
segment id 0. One token is one byte, so bits per byte = loss / ln 2 when specials carry no weight.
"""
import numpy as np

NUM_BYTES = 256
BOS_ID = 256
PAD_ID = 257


class ByteTokenizer:
  """UTF-8 bytes as tokens; vocab_size = 256 + 2 specials (BOS, PAD)."""

  vocab_size = NUM_BYTES + 2
  bos_id = BOS_ID
  pad_id = PAD_ID

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

  def __repr__(self) -> str:
    return f"ByteTokenizer(vocab_size={self.vocab_size}, bos_id={self.bos_id}, pad_id={self.pad_id})"
