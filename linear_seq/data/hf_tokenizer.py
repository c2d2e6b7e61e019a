"""`hf`: the tokenizer.json of a converted Hugging Face model (linear_seq.convert), kept in its workdir.

  --config.data.tokenizer=hf    (set by linear_seq.convert when the folder has a tokenizer.json)

The workdir holds the folder's tokenizer.json as WORKDIR/hf_tokenizer.json and its special ids (the model
config's bos_token_id and pad_token_id; pad falls back to eos, then bos) as WORKDIR/hf_tokenizer_ids.json.
It is loaded with Hugging Face `tokenizers` (no transformers).

Text corpora are tokenized with the hf_tokenizer.json of config.data.tokenizer_dir; '' there means the run's
workdir, or train.init_from's while the workdir has none yet (resolve_dir: train and evaluate fill it in memory,
config.json keeps ''). The ids of a vocabulary past 2**16 entries (Llama 3's 128k) are uint32, else uint16.

Bits per byte count the bytes of the text, not of the tokens: a tokenizer.json may normalize the text (a
SentencePiece `▁` prefix), map unknown characters to <unk> (a special: 0 bytes in a per-id table) or spell a
character as several byte-fallback tokens, so no per-id byte count sums to the text's length.
encode_with_bytes gives every token the UTF-8 bytes of the text from the end of the previous token's span (its
character offsets) to the end of its own, the rest of the document to its last token: the counts of a document
sum to its UTF-8 length exactly (text.py carries them beside the ids as target_bytes).
"""
import hashlib
import json
import os
from typing import Any, Callable, Iterable, Optional, Sequence

import ml_collections
import numpy as np

from linear_seq.data import bpe
from linear_seq.data import tokenizer as tokenizer_lib

WORKDIR_FILE = "hf_tokenizer.json"
IDS_FILE = "hf_tokenizer_ids.json"


@tokenizer_lib.register_tokenizer("hf")
class HFTokenizer(bpe.TokenizersText):
  """A `tokenizers.Tokenizer` from a converted model's tokenizer.json, with its bos and pad ids."""

  def __init__(self, tok, bos_id: int, pad_id: int):
    self._tok = tok
    self.vocab_size = tok.get_vocab_size()
    self.bos_id, self.pad_id = int(bos_id), int(pad_id)
    # (token streams are cached per vocabulary: the tokenizer's whole JSON and the bos id it is joined with)
    self.cache_key = "hf_" + hashlib.sha256(f"{tok.to_str()}|{self.bos_id}".encode()).hexdigest()[:16]
    self._dtype = np.uint16 if self.vocab_size <= 2**16 else np.uint32

  @classmethod
  def build(cls, data_config: Any, train_documents: Callable[[], Iterable[bytes]],
            cache_dir: Optional[str]) -> "HFTokenizer":
    """The tokenizer saved in data_config.tokenizer_dir (nothing is learned from the corpus)."""
    del train_documents, cache_dir
    directory = data_config.get("tokenizer_dir", "")
    if not directory:
      raise ValueError("data.tokenizer=hf (a converted model's tokenizer.json) tokenizes text with the "
                       f"{WORKDIR_FILE} of a converted workdir: none in this workdir (or train.init_from's); set "
                       "data.tokenizer_dir=THAT_WORKDIR")
    try:
      return cls.load(data_config, directory)
    except (OSError, ValueError, KeyError) as e:
      raise ValueError(f"data.tokenizer_dir={directory!r}: {e}") from None

  def save(self, directory: str) -> None:
    self._tok.save(os.path.join(directory, WORKDIR_FILE))
    with open(os.path.join(directory, IDS_FILE), "w") as f:
      json.dump({"bos_id": self.bos_id, "pad_id": self.pad_id}, f)

  @classmethod
  def load(cls, data_config: Any, directory: str) -> "HFTokenizer":
    del data_config
    tok = bpe.read_tokenizer(directory, WORKDIR_FILE, "linear_seq.convert copies it there")
    with open(os.path.join(directory, IDS_FILE)) as f:
      ids = json.load(f)
    return cls(tok, ids["bos_id"], ids["pad_id"])

  def encode_bytes(self, data: bytes) -> np.ndarray:
    return self.encode_with_bytes(data)[0]

  def encode_with_bytes(self, data: bytes) -> tuple[np.ndarray, np.ndarray]:
    """(ids uint16 | uint32 [n], UTF-8 bytes of text per token float32 [n]) of one document (decoded as UTF-8,
    invalid bytes as U+FFFD); the counts sum to the decoded text's UTF-8 length (the module docstring)."""
    text = data.decode("utf-8", errors="replace")
    enc = self._tok.encode(text, add_special_tokens=False)
    ids = np.asarray(enc.ids, self._dtype)
    counts = np.zeros([len(ids)], np.float32)
    done = 0   # characters of `text` already given to a token
    for i, (_, end) in enumerate(enc.offsets):
      if end > done:
        counts[i] = len(text[done:end].encode("utf-8"))
        done = end
    if len(ids) and done < len(text):
      counts[-1] += len(text[done:].encode("utf-8"))
    return ids, counts

  def token_bytes(self) -> np.ndarray:
    """UTF-8 bytes per token (of its decoded text; 0 for specials): an approximation that the text streams do
    not use (they carry encode_with_bytes's exact counts)."""
    out = np.zeros([self.vocab_size], np.float32)
    for i in range(self.vocab_size):
      out[i] = len(self._tok.decode([i], skip_special_tokens=True).encode("utf-8"))
    return out

  def __repr__(self) -> str:
    return f"HFTokenizer(vocab_size={self.vocab_size}, bos_id={self.bos_id}, pad_id={self.pad_id})"


def resolve_dir(data_config: Any, dirs: Sequence[Optional[str]]) -> Optional[str]:
  """The folder data.tokenizer=hf reads for a text corpus: data_config.tokenizer_dir if set, else the first of
  `dirs` (the workdir, then train.init_from's) holding hf_tokenizer.json; None if none does (or not needed:
  another tokenizer)."""
  if data_config.get("tokenizer", "byte") != "hf":
    return None
  if data_config.get("tokenizer_dir", ""):
    return data_config.tokenizer_dir
  return next((d for d in dirs if d and os.path.isfile(os.path.join(d, WORKDIR_FILE))), None)


def with_resolved_dir(config: Any, dirs: Sequence[Optional[str]]) -> Any:
  """A copy of the whole `config` (ConfigDict) with data.tokenizer_dir = resolve_dir(config.data, dirs) when
  that fills it in (also in a config.json that predates the field); else `config` itself."""
  found = resolve_dir(config.data, dirs)
  if found is None or found == config.data.get("tokenizer_dir", ""):
    return config
  out = ml_collections.ConfigDict(config.to_dict())
  out.data.tokenizer_dir = found
  return out.lock()
