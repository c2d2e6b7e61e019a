"""A plug-in tokenizer, registered from outside the package: two 4-bit tokens per byte.

  python -m linear_seq.main --config=configs/default.py:tiny=True --workdir=runs/nibble \
      --config.imports=my_tokenizer --config.data.tokenizer=nibble      (with examples/ on PYTHONPATH)

The interface (see linear_seq/data/tokenizer.py): vocab_size, bos_id, pad_id, cache_key, encode, encode_bytes,
decode, token_bytes (bytes of text per token: 0.5 here, so bits/byte stays comparable), and build / save /
load (a trained tokenizer learns from the training documents in `build` and keeps its state in the workdir
with `save`; this one has nothing to learn or save).
"""
import numpy as np

import linear_seq.data


@linear_seq.data.register_tokenizer("nibble")
class NibbleTokenizer:
  """Each byte b -> [b >> 4, b & 15]; BOS = 16, PAD = 17."""

  vocab_size, bos_id, pad_id, cache_key = 18, 16, 17, "nibble"

  @classmethod
  def build(cls, data_config, train_documents, cache_dir) -> "NibbleTokenizer":
    del data_config, train_documents, cache_dir
    return cls()

  def save(self, directory: str) -> None:
    del directory

  @classmethod
  def load(cls, data_config, directory: str) -> "NibbleTokenizer":
    del data_config, directory
    return cls()

  def encode_bytes(self, data: bytes) -> np.ndarray:
    b = np.frombuffer(data, np.uint8).astype(np.uint16)
    return np.stack([b >> 4, b & 15], axis=-1).reshape(-1)

  def encode(self, text: str) -> list[int]:
    return self.encode_bytes(text.encode("utf-8")).tolist()

  def decode(self, ids) -> str:
    ids = np.asarray(ids, np.int64).reshape(-1)
    ids = ids[(ids >= 0) & (ids < 16)]
    ids = ids[: len(ids) // 2 * 2].reshape(-1, 2)
    return (ids[:, 0] * 16 + ids[:, 1]).astype(np.uint8).tobytes().decode("utf-8", errors="replace")

  def token_bytes(self) -> np.ndarray:
    return np.where(np.arange(self.vocab_size) < 16, 0.5, 0.0).astype(np.float32)
