"""The bpe tokenizer: round trips, bytes per token, cache beside the data keyed by settings, bits/byte."""
import math
import os

import jax.numpy as jnp
import numpy as np
import pytest

from linear_seq import data
from linear_seq import steps
from linear_seq.data import bpe
from linear_seq.data import registry
from linear_seq.data import text
from tests.helpers import write_files

CORPUS = {f"doc{i:02d}.txt": (f"Scene {i}. " + "To be, or not to be, that is the question: whether 'tis nobler "
                              "in the mind to suffer the slings and arrows of outrageous fortune. " * (1 + i % 4)
                              + "naïve café — 日本語\n") for i in range(12)}
SAMPLES = ["", "To be, or not to be", "naïve café — 日本語 ✓\n\t  x", "zqxj unseen  wörds", "\x00\x7f"]


@pytest.fixture
def bpe_config(tmp_path, data_config):
  data_config.dataset, data_config.path = "local_text", write_files(tmp_path / "corpus", CORPUS)
  data_config.tokenizer, data_config.vocab_size = "bpe", 300
  return data_config


def test_round_trip_and_bytes_per_token():
  tok = bpe.BPETokenizer(bpe.train_bpe([d.encode() for d in CORPUS.values()], 300))
  assert tok.vocab_size == 300 and (tok.bos_id, tok.pad_id) == (0, 1)
  sizes = tok.token_bytes()
  assert sizes[tok.bos_id] == sizes[tok.pad_id] == 0 and sizes.max() > 2  # merges learned
  for s in SAMPLES:
    ids = tok.encode(s)
    assert tok.decode(ids) == s
    assert sizes[ids].sum() == len(s.encode("utf-8"))  # the bytes the tokens stand for
    np.testing.assert_array_equal(tok.encode_bytes(s.encode()), ids)
  common = "To be, or not to be, that is the question"
  assert len(tok.encode(common)) < len(common.encode()) / 2   # BPE compresses text it was trained on
  assert tok.decode([tok.bos_id, *tok.encode("ab"), tok.pad_id]) == "ab"


def test_vocab_size_errors(bpe_config):
  for bad in (100, 2**16 + 1):
    bpe_config.vocab_size = bad
    with pytest.raises(ValueError, match=r"bpe tokenizer needs data.vocab_size in \[258, 65536\]"):
      data.dataset_info(bpe_config)


def test_unknown_tokenizer_lists_valid_names(bpe_config):
  bpe_config.tokenizer = "bpee"
  with pytest.raises(ValueError, match="unknown tokenizer 'bpee'; valid: byte, bpe"):
    data.dataset_info(bpe_config)


def test_cached_beside_the_data_keyed_by_settings(bpe_config, monkeypatch, tmp_path):
  info = data.dataset_info(bpe_config)
  builder = registry._text_builder(bpe_config)
  cached = os.listdir(os.path.join(builder.data_dir, "tokenizers"))
  assert info.vocab_size == 300 and len(cached) == 1 and cached[0].startswith("bpe_v300_")
  trained = []
  real = bpe.train_bpe
  monkeypatch.setattr(bpe, "train_bpe", lambda *a: trained.append(a) or real(*a))
  again = data.dataset_info(bpe_config).tokenizer
  assert not trained and again.cache_key == info.tokenizer.cache_key       # read from the cache
  bpe_config.vocab_size = 280
  assert data.dataset_info(bpe_config).vocab_size == 280 and len(trained) == 1
  assert len(os.listdir(os.path.join(builder.data_dir, "tokenizers"))) == 2
  # The workdir copy restores the same tokenizer without the data.
  info.tokenizer.save(str(tmp_path))
  bpe_config.vocab_size = 300
  restored = data.restored_info(bpe_config, str(tmp_path))
  assert restored.tokenizer.cache_key == info.tokenizer.cache_key and restored.vocab_size == 300
  with pytest.raises(FileNotFoundError, match="no tokenizer.json"):
    data.restored_info(bpe_config, str(tmp_path / "elsewhere"))


def test_bits_per_byte_counts_bytes_not_tokens(bpe_config):
  """The validation stream's target_bytes add up to the validation documents' bytes, and a uniform model
  scores log2(V) bits per token = log2(V) * tokens / bytes bits per byte."""
  tok = data.dataset_info(bpe_config).tokenizer
  builder = registry._text_builder(bpe_config)
  val_bytes = sum(len(builder.as_data_source(split="validation")[i]["text"])
                  for i in range(len(builder.as_data_source(split="validation"))))
  it = data.make_iterator(bpe_config, "validation", batch_size=4, seq_len=16, seed=0, repeat=False)
  nll = weight = byte_weight = 0.0
  for batch in it:
    V = tok.vocab_size
    terms = steps.loss_terms(jnp.zeros(batch["inputs"].shape + (V,)), {k: jnp.asarray(v) for k, v in batch.items()})
    nll, weight, byte_weight = nll + float(terms["nll"]), weight + float(terms["weight"]), \
        byte_weight + float(terms["byte_weight"])
  assert byte_weight == val_bytes and weight < val_bytes / 1.5
  bits_per_byte = nll / math.log(2) / byte_weight
  assert bits_per_byte == pytest.approx(math.log2(300) * weight / val_bytes, rel=1e-5)
  stream = text.load_stream(builder, "validation", tok)
  assert weight == np.sum(stream != tok.bos_id)   # every text token is predicted exactly once
