"""chunked_attention (online softmax over key blocks, flash-style VJP) against the explicit float32 form.

Reference: `ops.softmax_attention(..., implementation='explicit')` (itself held to a float64 formula in
test_attention.py). Float32: values and gradients (dq, dk, dv under a fixed random cotangent) within
TOL = 1e-5 relative RMS. Blocks are small (8 or 16) so that T = 37 is several blocks and not a multiple of
either. bfloat16 inputs: the chunked form rounds p and dS to bfloat16 before its matmuls (flash attention's
choice) while the explicit form stays float32 from bf16 inputs: values ≤ BF16_VAL_TOL, gradients ≤
BF16_GRAD_TOL relative RMS, both outputs in bfloat16. Memory: the compiled forward + backward holds nothing
of size T × T (temp bytes grow linearly from T to 4T; the explicit form's grow ~16×).
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from linear_seq import ops
from linear_seq.ops import attention_chunked
from tests.helpers import rel_rms

TOL = 1e-5
BF16_VAL_TOL, BF16_GRAD_TOL = 1e-2, 2e-2
B, H, K, V = 2, 4, 8, 6


def rand(seed, *shape, dtype=jnp.float32):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), dtype)


def segments(seed, T):
  """[B, T] sorted ids: packed documents of random lengths (row 1 starts a document mid-block)."""
  return np.sort(np.random.default_rng(seed).integers(0, 4, (B, T)), axis=1).astype(np.int32)


# (causal, Tq, Tk, segment ids: None | 'packed' | 'pair' (a query with no key of its segment), Hk, bq, bk, dtype)
CASES = [
    (True, 37, 37, None, H, 8, 16, "float32"),           # causal self-attention, bq != bk, ragged tails
    (True, 37, 37, "packed", H, 16, 8, "float32"),       # packed documents
    (True, 11, 37, None, H, 8, 8, "float32"),            # Tq < Tk: queries end-aligned (a KV cache)
    (False, 11, 37, "pair", 2, 8, 16, "float32"),        # non-causal, empty rows, grouped-query (Hk = H / 2)
    (True, 37, 37, "packed", H, 8, 16, "bfloat16"),
]


@pytest.mark.parametrize("causal,Tq,Tk,seg,Hk,bq,bk,dtype", CASES)
def test_matches_explicit_form(causal, Tq, Tk, seg, Hk, bq, bk, dtype):
  q, k, v = rand(0, B, Tq, H, K, dtype=dtype), rand(1, B, Tk, Hk, K, dtype=dtype), rand(2, B, Tk, Hk, V, dtype=dtype)
  cot = rand(3, B, Tq, H, V, dtype=dtype)
  kv_seg = None if seg is None else segments(4, Tk)
  q_seg = None if seg is None else kv_seg[:, Tk - Tq:].copy()
  if seg == "pair":
    q_seg[0, 0] = 9  # no key has segment 9: that row's output is 0

  def chunked(q, k, v):
    return attention_chunked.chunked_attention(q, k, v, causal=causal, q_segment_ids=q_seg,
                                               kv_segment_ids=kv_seg, block_q=bq, block_k=bk)

  def explicit(q, k, v):  # grouped-query: each k/v head serves H / Hk query heads
    rep = lambda x: jnp.repeat(x, H // Hk, axis=2)
    return ops.softmax_attention(q, rep(k), rep(v), causal=causal, implementation="explicit",
                                 segment_ids=None if seg is None else (q_seg, kv_seg))

  def run(f):
    o, pull = jax.vjp(f, q, k, v)
    return o, pull(cot)

  (o, grads), (o_ref, grads_ref) = jax.jit(lambda: (run(chunked), run(explicit)))()
  assert o.dtype == grads[0].dtype == grads[1].dtype == jnp.dtype(dtype) and o.shape == (B, Tq, H, V)
  val_tol, grad_tol = (TOL, TOL) if dtype == "float32" else (BF16_VAL_TOL, BF16_GRAD_TOL)
  assert rel_rms(np.float32(o), np.float32(o_ref)) <= val_tol
  for name, a, b in zip("qkv", grads, grads_ref):
    assert rel_rms(np.float32(a), np.float32(b)) <= grad_tol, name
  if seg == "pair":
    assert np.all(np.asarray(o)[0, 0] == 0) and np.all(np.isfinite(np.float32(grads[0])))


def test_op_routes_to_chunked_form():
  """softmax_attention(implementation='chunked'): one [B,Tk] segment array (queries take its end), no mask."""
  Tq, Tk = 5, 9
  q, k, v = rand(0, B, Tq, H, K), rand(1, B, Tk, H, K), rand(2, B, Tk, H, V)
  seg = segments(1, Tk)
  o, o_ref = jax.jit(lambda: [ops.softmax_attention(q, k, v, segment_ids=seg, scale=0.7, implementation=impl)
                              for impl in ("chunked", "explicit")])()
  assert rel_rms(o, o_ref) <= TOL
  with pytest.raises(ValueError, match="implementation='chunked' takes causal and segment_ids, not a mask"):
    ops.softmax_attention(q, k, v, mask=np.ones((Tq, Tk), bool), implementation="chunked")
  with pytest.raises(ValueError, match="segment_ids has shape"):
    ops.softmax_attention(q, k, v, segment_ids=seg[:, :4], implementation="chunked")
  with pytest.raises(ValueError, match="pass both q_segment_ids and kv_segment_ids"):
    ops.chunked_attention(q, k, v, q_segment_ids=seg[:, 4:])


def test_block_pairs_skip_only_blocks_above_the_diagonal():
  pairs = attention_chunked.block_pairs(37, 37, 8, 8, causal=True)  # 5 x 5 blocks
  assert [tuple(p) for p in pairs] == [(i, j) for i in range(5) for j in range(i + 1)]
  assert len(attention_chunked.block_pairs(37, 37, 8, 8, causal=False)) == 25
  # End-aligned: queries 0..10 sit at key positions 26..36; query block 0 (positions 26..33) needs key blocks 0..4
  # of 8 (keys 0..39), so nothing is skipped; with key blocks of 4 it skips block 9 (keys 36..39) only for it.
  assert len(attention_chunked.block_pairs(11, 37, 8, 8, causal=True)) == 10
  pairs = attention_chunked.block_pairs(11, 37, 8, 4, causal=True)
  assert {j for i, j in pairs if i == 0} == set(range(9)) and {j for i, j in pairs if i == 1} == set(range(10))


def test_gradient_causality():
  T, t0 = 21, 9
  q, k, v = rand(0, 1, T, 2, K), rand(1, 1, T, 2, K), rand(2, 1, T, 2, K)
  cot = rand(3, 1, T, 2, K).at[:, t0 + 1:].set(0.0)
  f = lambda q, k, v: attention_chunked.chunked_attention(q, k, v, block_q=4, block_k=8)
  for g in jax.jit(lambda: jax.vjp(f, q, k, v)[1](cot))():
    assert np.all(np.asarray(g)[:, t0 + 1:] == 0) and np.all(np.any(np.asarray(g)[:, :t0 + 1] != 0, axis=(2, 3)))


def _temp_bytes(f, T):
  x = jax.ShapeDtypeStruct((1, T, 1, 16), jnp.float32)
  loss = lambda q, k, v: jnp.sum(f(q, k, v) ** 2)
  return jax.jit(jax.grad(loss, argnums=(0, 1, 2))).lower(x, x, x).compile().memory_analysis().temp_size_in_bytes


def test_forward_backward_memory_is_linear_in_t():
  """Compiled fwd + bwd at T and 4T: chunked temp memory grows ~4× (no [T, T] buffer), explicit's ~16×."""
  chunked = lambda q, k, v: attention_chunked.chunked_attention(q, k, v, block_q=64, block_k=64)
  explicit = lambda q, k, v: ops.softmax_attention(q, k, v, implementation="explicit")
  T = 512
  c1, c4 = _temp_bytes(chunked, T), _temp_bytes(chunked, 4 * T)
  e1, e4 = _temp_bytes(explicit, T), _temp_bytes(explicit, 4 * T)
  assert c4 / c1 < 5 and c4 < (4 * T) ** 2 * 4 / 8, (c1, c4)  # far below one float32 [4T, 4T] buffer
  assert e4 / e1 > 12, (e1, e4)  # the measure sees a quadratic buffer when there is one
