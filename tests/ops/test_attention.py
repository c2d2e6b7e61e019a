"""softmax_attention against a float64 reference (values and gradients), causality, errors.

The reference is the textbook formula in float64 (jax x64, so its gradients are float64 too):
softmax over the allowed keys of scale·q·k + bias, then the weighted sum of v.
Tolerances (relative RMS, float32 op vs float64): values VAL_TOL = 1e-5, gradients GRAD_TOL = 1e-5.
The default path (jax.nn.dot_product_attention, K = V) against the explicit float32 form
(implementation='explicit'): same dtype, values ≤ 1e-6 and gradients ≤ 2e-6 relative RMS.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from linear_seq import ops
from tests.helpers import rel_rms

VAL_TOL = 1e-5
GRAD_TOL = 1e-5
B, H, K, V = 2, 2, 12, 10


def ref_attention(q, k, v, allowed, scale, bias=0.0):
  """allowed: bool [B, H, Tq, Tk] (numpy); every row has at least one allowed key."""
  logits = scale * jnp.einsum("bqhk,bshk->bhqs", q, k) + bias
  logits = jnp.where(allowed, logits, -jnp.inf)
  return jnp.einsum("bhqs,bshv->bqhv", jax.nn.softmax(logits, axis=-1), v)


def allowed_mask(Tq, Tk, causal, q_seg=None, kv_seg=None):
  m = np.ones((B, H, Tq, Tk), bool)
  if causal:
    m &= (np.arange(Tq)[:, None] + Tk - Tq) >= np.arange(Tk)[None, :]
  if q_seg is not None:
    m &= (q_seg[:, :, None] == kv_seg[:, None, :])[:, None]
  return m


def rand(seed, *shape):
  return np.random.default_rng(seed).standard_normal(shape)


SEG = np.array([[0] * 5 + [1] * 4 + [2] * 4, [0] * 9 + [1] * 4])  # [B, 13] packed documents

# (causal, Tq, Tk, scale, segment_ids kind, with bias)
CASES = [
    (True, 13, 13, None, None, False),
    (False, 13, 13, 0.3, None, True),
    (True, 4, 13, 1.7, None, False),
    (True, 13, 13, None, "single", False),
    (False, 4, 13, None, "pair", True),
]


@pytest.mark.parametrize("causal,Tq,Tk,scale,seg,with_bias", CASES)
def test_matches_reference(causal, Tq, Tk, scale, seg, with_bias):
  q, k, v = rand(0, B, Tq, H, K), rand(1, B, Tk, H, K), rand(2, B, Tk, H, V)
  bias = rand(3, 1, H, Tq, Tk) if with_bias else None
  q_seg = None if seg is None else SEG[:, Tk - Tq:]
  segment_ids = {None: None, "single": SEG, "pair": (q_seg, SEG)}[seg]
  allowed = allowed_mask(Tq, Tk, causal, q_seg, None if seg is None else SEG)
  s = K ** -0.5 if scale is None else scale
  cot = rand(4, B, Tq, H, V)

  def op(q, k, v, bias):
    return ops.softmax_attention(q, k, v, causal=causal, scale=scale, segment_ids=segment_ids,
                                 bias=bias)

  def ref(q, k, v, bias):
    return ref_attention(q, k, v, allowed, s, 0.0 if bias is None else bias)

  def vjp(f, xs, dtype):
    xs = [None if x is None else jnp.asarray(x, dtype) for x in xs]
    n = 4 if with_bias else 3
    o, pull = jax.vjp(lambda *d: f(*d, *xs[n:]), *xs[:n])
    return o, pull(jnp.asarray(cot, dtype))

  o32, g32 = jax.jit(lambda *xs: vjp(op, xs, jnp.float32))(q, k, v, bias)
  with jax.enable_x64(True):
    o64, g64 = jax.tree.map(np.asarray, vjp(ref, [q, k, v, bias], jnp.float64))
  assert o32.shape == (B, Tq, H, V)
  assert rel_rms(o32, o64) <= VAL_TOL
  for name, a, b in zip("qkvb", g32, g64):
    assert rel_rms(a, b) <= GRAD_TOL, name


KV = 12  # K = V: the shapes jax.nn.dot_product_attention takes
# (causal, Tq, Tk, segment_ids kind, user mask, bias, dtype): causal self-attention (is_causal), non-causal,
# a KV cache (Tq < Tk, end-aligned causal mask), packed segments (one array, a pair), masks with empty rows, bf16.
KERNEL_CASES = [
    (True, 13, 13, None, False, False, "float32"),
    (False, 13, 13, None, False, True, "float32"),
    (True, 4, 13, None, False, False, "float32"),
    (True, 13, 13, "single", False, True, "float32"),
    (True, 4, 13, "single", False, False, "float32"),
    (False, 4, 13, "pair", False, False, "float32"),
    (False, 13, 13, None, True, False, "float32"),
    (True, 13, 13, "single", False, False, "bfloat16"),
    (True, 4, 13, "pair", True, True, "bfloat16"),
]


@pytest.mark.parametrize("causal,Tq,Tk,seg,with_mask,with_bias,dtype", KERNEL_CASES)
def test_kernel_path_matches_explicit_form(causal, Tq, Tk, seg, with_mask, with_bias, dtype, monkeypatch):
  calls = []
  kernel = jax.nn.dot_product_attention
  monkeypatch.setattr(jax.nn, "dot_product_attention", lambda *a, **kw: calls.append(kw) or kernel(*a, **kw))
  q, k, v = rand(0, B, Tq, H, KV), rand(1, B, Tk, H, KV), rand(2, B, Tk, H, KV)
  q_seg = SEG[:, Tk - Tq:].copy()
  q_seg[0, 0] = 7  # in the pair form, a query whose segment has no key (its row is empty: o = 0)
  segment_ids = {None: None, "single": SEG, "pair": (q_seg, SEG)}[seg]
  mask = None
  if with_mask:
    mask = np.random.default_rng(5).random((B, 1, Tq, Tk)) < 0.7
    mask[1, 0, 2] = False  # an empty row
  bias = jnp.asarray(rand(3, 1, H, Tq, Tk), jnp.float32) if with_bias else None
  cot = jnp.asarray(rand(4, B, Tq, H, KV), dtype)

  def run(implementation):
    def f(q, k, v):
      return ops.softmax_attention(q, k, v, causal=causal, segment_ids=segment_ids, mask=mask, bias=bias,
                                   implementation=implementation)
    o, pull = jax.vjp(f, *(jnp.asarray(x, dtype) for x in (q, k, v)))
    return o, pull(cot)

  o, grads = jax.jit(lambda: run(None))()
  assert len(calls) == 1 and calls[0]["is_causal"] == (causal and Tq == Tk)
  o_ref, grads_ref = jax.jit(lambda: run("explicit"))()
  assert len(calls) == 1, "implementation='explicit' must not call the kernel"
  assert o.dtype == o_ref.dtype == jnp.dtype(dtype)
  if seg == "pair" or with_mask:
    assert np.any(np.all(np.asarray(o_ref, np.float32) == 0, axis=-1))  # the empty rows are there ...
  f32 = lambda x: np.asarray(x, np.float32)
  if dtype == "float32":
    assert rel_rms(o, o_ref) <= 1e-6
    for name, a, b in zip("qkv", grads, grads_ref):
      assert rel_rms(a, b) <= 2e-6, name
  else:  # both compute in float32 and round once to bfloat16: equal up to a rare last-bit flip
    assert np.mean(f32(o) != f32(o_ref)) <= 0.01 and rel_rms(f32(o), f32(o_ref)) <= 1e-3
  assert np.array_equal(f32(o) == 0, f32(o_ref) == 0)  # ... and are 0 on the kernel path too


def test_kernel_not_used_when_k_differs_from_v(monkeypatch):
  monkeypatch.setattr(jax.nn, "dot_product_attention", lambda *a, **kw: pytest.fail("kernel called"))
  q, k, v = rand(0, B, 5, H, K), rand(1, B, 5, H, K), rand(2, B, 5, H, V)
  assert ops.softmax_attention(q, k, v).shape == (B, 5, H, V)
  with pytest.raises(ValueError, match="implementation='cudnn' needs K = V"):
    ops.softmax_attention(q, k, v, implementation="cudnn")
  with pytest.raises(ValueError, match="unknown implementation 'flash'; valid: None, cudnn, explicit, chunked"):
    ops.softmax_attention(q, k, v, implementation="flash")


def test_gradient_causality_and_masked_rows():
  T, t0 = 7, 3
  q, k, v = (jnp.asarray(rand(i, 1, T, 1, 4), jnp.float32) for i in range(3))
  cot = jnp.asarray(rand(5, 1, T, 1, 4), jnp.float32).at[:, t0 + 1:].set(0.0)
  _, pull = jax.vjp(lambda q, k, v: ops.softmax_attention(q, k, v), q, k, v)
  for g in pull(cot):  # cotangent on o_{≤t0} only: no gradient reaches positions > t0
    assert np.all(np.asarray(g)[:, t0 + 1:] == 0) and np.any(np.asarray(g)[:, :t0 + 1] != 0)
  # A query with no allowed key returns 0, with finite gradients.
  mask = np.ones((1, 1, T, T), bool)
  mask[..., 2, :] = False
  f = lambda q: ops.softmax_attention(q, k, v, causal=False, mask=mask)
  o = f(q)
  assert np.all(np.asarray(o)[:, 2] == 0) and np.all(np.isfinite(np.asarray(o)))
  assert np.all(np.isfinite(np.asarray(jax.grad(lambda q: jnp.sum(f(q) ** 2))(q))))


def test_bfloat16_in_bfloat16_out():
  q, k, v = (jnp.asarray(rand(i, B, 9, H, K), jnp.bfloat16) for i in range(3))
  o = ops.softmax_attention(q, k, v)
  assert o.dtype == jnp.bfloat16
  o32 = ops.softmax_attention(*(x.astype(jnp.float32) for x in (q, k, v)))
  assert rel_rms(o, o32) <= 1e-2


@pytest.mark.parametrize("change,kwargs,match", [
    ("q3", {}, r"q has shape \[2, 5, 2\], expected \[B, Tq, H, K\]"),
    ("k_heads", {}, r"k has shape \[2, 5, 3, 12\], expected \[2, \?, 2, 12\] \(q \[B,Tq,H,K\]"),
    ("v_len", {}, r"v has shape \[2, 4, 2, 10\], expected \[2, 5, 2, \?\]"),
    ("q_long", {}, r"causal attention needs Tq <= Tk"),
    (None, dict(segment_ids=np.zeros((B, 4), int)), r"segment_ids has shape \[2, 4\], expected \[2, 5\]"),
    (None, dict(segment_ids=(np.zeros((B, 5)),)), r"segment_ids must be one \[B,Tk\] array or a pair .* got 1 items"),
    (None, dict(segment_ids=[np.zeros((B, 5))] * 3),
     r"or a pair \(q_segment_ids \[B,Tq\], kv_segment_ids \[B,Tk\]\); got 3 items"),
    (None, dict(segment_ids=(np.zeros((B, 4)), np.zeros((B, 5)))), r"q_segment_ids has shape"),
    (None, dict(segment_ids=(np.zeros((B, 5)), np.zeros((B, 6)))), r"kv_segment_ids has shape"),
    (None, dict(mask=np.ones((3, 5), bool)), r"mask has shape \[3, 5\], expected broadcastable"),
    (None, dict(bias=np.ones((B, 3, 5, 5))), r"bias has shape \[2, 3, 5, 5\], expected broadcastable"),
])
def test_errors(change, kwargs, match):
  q, k, v = rand(0, B, 5, H, K), rand(1, B, 5, H, K), rand(2, B, 5, H, V)
  if change == "q3":
    q = q[..., 0]
  elif change == "k_heads":
    k = rand(1, B, 5, 3, K)
  elif change == "v_len":
    v = v[:, :4]
  elif change == "q_long":
    q = rand(0, B, 6, H, K)
  with pytest.raises(ValueError, match=match):
    ops.softmax_attention(q, k, v, **kwargs)
