"""`hf`: the tokenizer.json of a converted Hugging Face model (linear_seq.convert), kept in its workdir.

  --config.data.tokenizer=hf    (set by linear_seq.convert when the folder has a tokenizer.json)

The workdir holds the folder's tokenizer.json as WORKDIR/hf_tokenizer.json and its special ids (the model
config's bos_token_id and pad_token_id; pad falls back to eos, then bos) as WORKDIR/hf_tokenizer_ids.json.
It is loaded with Hugging Face `tokenizers` (no transformers). It is not built for a corpus: text datasets
cannot be (re)tokenized with it yet, so evaluation and training on text need another tokenizer.
"""
import json
import os
from typing import Any, Callable, Iterable, Optional

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
    self.cache_key = "hf"

  @classmethod
  def build(cls, data_config: Any, train_documents: Callable[[], Iterable[bytes]],
            cache_dir: Optional[str]) -> "HFTokenizer":
    del data_config, train_documents, cache_dir
    raise ValueError("data.tokenizer=hf (a converted model's tokenizer) cannot tokenize a text corpus yet: "
                     "evaluate or train on a synthetic task (--config.data.dataset=...) or another tokenizer")

  def save(self, directory: str) -> None:
    self._tok.save(os.path.join(directory, WORKDIR_FILE))
    with open(os.path.join(directory, IDS_FILE), "w") as f:
      json.dump({"bos_id": self.bos_id, "pad_id": self.pad_id}, f)

  @classmethod
  def load(cls, data_config: Any, directory: str) -> "HFTokenizer":
    del data_config
    import tokenizers  # pylint: disable=g-import-not-at-top
    path = os.path.join(directory, WORKDIR_FILE)
    if not os.path.exists(path):
      raise FileNotFoundError(f"no {WORKDIR_FILE} in {directory!r} (linear_seq.convert copies it there)")
    with open(os.path.join(directory, IDS_FILE)) as f:
      ids = json.load(f)
    return cls(tokenizers.Tokenizer.from_file(path), ids["bos_id"], ids["pad_id"])

  def token_bytes(self) -> np.ndarray:
    """UTF-8 bytes per token (of its decoded text; 0 for specials)."""
    out = np.zeros([self.vocab_size], np.float32)
    for i in range(self.vocab_size):
      out[i] = len(self._tok.decode([i], skip_special_tokens=True).encode("utf-8"))
    return out

  def __repr__(self) -> str:
    return f"HFTokenizer(vocab_size={self.vocab_size}, bos_id={self.bos_id}, pad_id={self.pad_id})"
