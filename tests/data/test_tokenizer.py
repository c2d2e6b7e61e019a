import numpy as np

from linear_seq.data import tokenizer as tokenizer_lib


def test_round_trip_and_vocab():
  tok = tokenizer_lib.ByteTokenizer()
  for s in ["", "To be, or not to be", "naïve — 日本語 ✓\n\t"]:
    ids = tok.encode(s)
    assert ids == list(s.encode("utf-8"))
    assert all(0 <= i < 256 for i in ids)
    assert tok.decode(ids) == s
  assert tok.vocab_size == 258 and {tok.bos_id, tok.pad_id} == {256, 257}


def test_decode_drops_specials_and_replaces_bad_utf8():
  tok = tokenizer_lib.ByteTokenizer()
  assert tok.decode([tok.bos_id, *tok.encode("ab"), tok.pad_id, tok.pad_id]) == "ab"
  assert tok.decode(np.array([0xff, ord("x")])) == "\ufffdx"
  np.testing.assert_array_equal(tok.encode_bytes(b"\x00\xffA"), [0, 255, 65])
