"""`bpe`: a byte-level BPE tokenizer (Hugging Face `tokenizers`) trained on the training split.

  --config.data.tokenizer=bpe --config.data.vocab_size=4096

GPT-2-style byte-level BPE: every byte is in the initial alphabet, so any text encodes (no unknown token);
specials <bos> = 0 and <pad> = 1. It is trained once per corpus and settings and cached beside the prepared
data as `<prepared data dir>/tokenizers/bpe_v<vocab>_<settings hash>.json` (the prepared dir is already
specific to the corpus: local_text's is keyed by the folder's fingerprint); a training workdir keeps its copy
as WORKDIR/tokenizer.json. Documents are decoded as UTF-8 (invalid bytes become U+FFFD, 3 bytes) before
tokenizing; `token_bytes()` counts the UTF-8 bytes each token stands for, so bits/byte stays comparable
with the byte tokenizer.
"""
import hashlib
import json
import os
from typing import Any, Callable, Iterable, Optional

import numpy as np

from linear_seq.data import tokenizer as tokenizer_lib

VERSION = 1  # Bump when the training recipe changes (it is part of the cache key).
SPECIALS = ("<bos>", "<pad>")
WORKDIR_FILE = "tokenizer.json"
MAX_VOCAB = 2**16  # Token streams are uint16.


def _import_tokenizers():
  try:
    import tokenizers  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise ImportError("the bpe tokenizer needs Hugging Face `tokenizers`: pip install tokenizers") from e
  return tokenizers


def read_tokenizer(directory: str, name: str, written_by: str):
  """The `tokenizers.Tokenizer` saved as `name` in `directory` (FileNotFoundError saying who writes it)."""
  path = os.path.join(directory, name)
  if not os.path.exists(path):
    raise FileNotFoundError(f"no {name} in {directory!r} ({written_by})")
  return _import_tokenizers().Tokenizer.from_file(path)


def check_vocab_size(vocab_size: int) -> int:
  min_vocab = tokenizer_lib.NUM_BYTES + len(SPECIALS)
  if not isinstance(vocab_size, int) or not min_vocab <= vocab_size <= MAX_VOCAB:
    raise ValueError(f"the bpe tokenizer needs data.vocab_size in [{min_vocab}, {MAX_VOCAB}], got {vocab_size!r}")
  return vocab_size


def train_bpe(documents: Iterable[bytes], vocab_size: int):
  """A `tokenizers.Tokenizer`: byte-level BPE with vocab_size entries (specials first) learned on documents."""
  tk = _import_tokenizers()
  tok = tk.Tokenizer(tk.models.BPE())
  tok.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
  tok.decoder = tk.decoders.ByteLevel()
  trainer = tk.trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIALS), show_progress=False,
                                   initial_alphabet=tk.pre_tokenizers.ByteLevel.alphabet())
  tok.train_from_iterator((d.decode("utf-8", errors="replace") for d in documents), trainer=trainer)
  return tok


class TokenizersText:
  """Text <-> ids through a Hugging Face `tokenizers.Tokenizer` in `self._tok` (shared by the bpe and hf
  tokenizers): no special tokens added on encoding, specials (and ids past the vocabulary) dropped on decoding."""
  _tok: Any
  vocab_size: int

  def encode(self, text: str) -> list[int]:
    """str -> token ids (no BOS; prepend `bos_id` to start a document)."""
    return self._tok.encode(text, add_special_tokens=False).ids

  def encode_bytes(self, data: bytes) -> np.ndarray:
    return np.asarray(self.encode(data.decode("utf-8", errors="replace")), np.uint16)

  def decode(self, ids) -> str:
    """Token ids -> str; specials are dropped (ids past the tokenizer's vocabulary, e.g. padding, too)."""
    ids = [int(i) for i in np.asarray(ids, np.int64).reshape(-1) if 0 <= i < self.vocab_size]
    return self._tok.decode(ids, skip_special_tokens=True)


@tokenizer_lib.register_tokenizer("bpe")
class BPETokenizer(TokenizersText):
  """Byte-level BPE over a trained `tokenizers.Tokenizer`."""

  def __init__(self, tok):
    self._tok = tok
    self.vocab_size = tok.get_vocab_size()
    self.bos_id, self.pad_id = (tok.token_to_id(s) for s in SPECIALS)
    self.cache_key = "bpe_" + hashlib.sha256(tok.to_str().encode()).hexdigest()[:16]
    self._token_bytes = None

  @classmethod
  def build(cls, data_config: Any, train_documents: Callable[[], Iterable[bytes]],
            cache_dir: Optional[str]) -> "BPETokenizer":
    vocab_size = check_vocab_size(int(data_config.vocab_size))
    settings = json.dumps({"version": VERSION, "vocab_size": vocab_size, "specials": SPECIALS})
    path = None
    if cache_dir:
      name = f"bpe_v{vocab_size}_{hashlib.sha256(settings.encode()).hexdigest()[:12]}.json"
      path = os.path.join(cache_dir, "tokenizers", name)
      if os.path.exists(path):
        return cls(_import_tokenizers().Tokenizer.from_file(path))
    tok = train_bpe(train_documents(), vocab_size)
    if path:
      os.makedirs(os.path.dirname(path), exist_ok=True)
      tmp = f"{path}.tmp{os.getpid()}"
      tok.save(tmp)
      os.replace(tmp, path)
    return cls(tok)

  def save(self, directory: str) -> None:
    self._tok.save(os.path.join(directory, WORKDIR_FILE))

  @classmethod
  def load(cls, data_config: Any, directory: str) -> "BPETokenizer":
    del data_config
    return cls(read_tokenizer(directory, WORKDIR_FILE, "the bpe tokenizer is saved there by training"))

  def token_bytes(self) -> np.ndarray:
    """UTF-8 bytes per token: byte-level BPE writes each byte as one character of its alphabet."""
    if self._token_bytes is None:
      out = np.zeros([self.vocab_size], np.float32)
      for token, i in self._tok.get_vocab().items():
        out[i] = 0 if token in SPECIALS else len(token)
      self._token_bytes = out
    return self._token_bytes

  def __repr__(self) -> str:
    return f"BPETokenizer(vocab_size={self.vocab_size}, bos_id={self.bos_id}, pad_id={self.pad_id})"
