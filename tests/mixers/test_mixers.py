"""Every mixer: shapes, finiteness, state, gradient causality, prefill + steps == one pass, packed documents.

One jitted forward per mixer configuration (compiles dominate the runtime on CPU), reused across checks.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from linear_seq import mixers
from linear_seq import ops
from tests.helpers import rel_rms

D, H, B, T = 16, 2, 2, 11
T1 = 6     # prefill length; the packed row is documents of T − T1 = 5 and T1 = 6 tokens
CHUNK = 4  # T is not a multiple of it: the chunk form's ragged tail is exercised

# (id, mixer name, constructor options). Pairwise coverage of the options, not the full product.
CASES = [
    ("softmax-rope", "softmax", dict(pos_encoding="rope")),
    ("softmax-learned-qkvconv-gqa", "softmax", dict(pos_encoding="learned", max_len=32, qkv_conv_width=3,
                                                    num_kv_heads=1, head_dim=6)),
    ("softmax-chunked", "softmax", dict(attention_impl="chunked")),
    ("softmax-chunked-gqa", "softmax", dict(attention_impl="chunked", num_kv_heads=1)),
    ("linear-elu1-qkvconv", "linear", dict(feature_map="elu1", chunk_size=CHUNK, qkv_conv_width=4)),
    ("linear-favor-decay", "linear", dict(feature_map="favor", num_features=12, decay=(0.9, 0.99),
                                          chunk_size=CHUNK)),
    ("linear-identity-norm", "linear", dict(feature_map="identity", normalize="norm", mode="parallel")),
    ("retention-qkvconv-nogate", "retention", dict(chunk_size=CHUNK, qkv_conv_width=3, output_gate=False)),
    ("retention-rope", "retention", dict(pos_encoding="rope", gamma=(0.95,), mode="parallel")),
    ("gla-vector", "gla", dict(gate_rank=4, chunk_size=CHUNK)),
    ("gla-vector-negeig", "gla", dict(gate_rank=4, chunk_size=CHUNK, negative_eigenvalues=True)),
    ("gla-scalar-qkvconv-nogate", "gla", dict(gate_rank=4, vector_gate=False, mode="assoc", qkv_conv_width=2,
                                                   output_gate=False)),
    ("s4-lin-zoh", "s4", dict(state_size=4)),
    ("s4-inv-bilinear-scan", "s4", dict(state_size=4, init="inv", discretization="bilinear",
                                        mode="scan")),
    ("deltanet", "deltanet", dict(chunk_size=CHUNK)),
    ("deltanet-scalar-2sigmoid-nogate-grouped", "deltanet", dict(gate="scalar", beta="2sigmoid", chunk_size=CHUNK,
                                                                 output_gate=False, qk_heads=1, head_dim=6,
                                                                 value_head_dim=4)),
    ("deltanet-channel", "deltanet", dict(gate="channel", gate_rank=4, chunk_size=CHUNK)),
    ("deltanet-channel-2sigmoid-parallel-kda", "deltanet", dict(gate="channel", beta="2sigmoid", gate_rank=4,
                                                                mode="parallel", value_head_dim=5,
                                                                gate_act="sigmoid", gate_out_rank=3)),
    ("deltaproduct3-2sigmoid", "deltaproduct", dict(householder_steps=3, beta="2sigmoid", chunk_size=CHUNK)),
    ("mamba2", "mamba2", dict(head_dim=8, state_size=4, chunk_size=CHUNK)),
    ("mamba2-negeig", "mamba2", dict(head_dim=8, state_size=4, chunk_size=CHUNK, negative_eigenvalues=True)),
    ("mamba2-assoc-groups", "mamba2", dict(expand=1, head_dim=4, state_size=3, mode="assoc", groups=2,
                                           norm_groups=2, dt_limit=(1e-3, 5e-2))),
]


def make(name, opts, seed=0):
  cls = mixers.get(name)
  if name in ("s4", "mamba2"):
    return cls(D, **opts, rngs=nnx.Rngs(seed))
  return cls(D, H, **opts, rngs=nnx.Rngs(seed))


@pytest.fixture(scope="module", params=CASES, ids=[c[0] for c in CASES])
def setup(request):
  _, name, opts = request.param
  m = make(name, opts)
  graphdef, params = nnx.split(m)

  @jax.jit
  def fwd(params, x, state=None, segment_ids=None):
    return nnx.merge(graphdef, params)(x, state=state, segment_ids=segment_ids)

  x = jax.random.normal(jax.random.key(1), (B, T, D), jnp.float32)
  return name, m, (lambda *a, **k: fwd(params, *a, **k)), fwd, params, x


def test_shapes_state_and_finite(setup):
  name, m, fwd, _, _, x = setup
  y, state = fwd(x)
  assert y.shape == (B, T, D) and y.dtype == jnp.float32
  assert np.all(np.isfinite(np.asarray(y))) and np.std(np.asarray(y)) > 1e-3
  init = m.init_state(B, T)
  assert jax.tree.structure(state) == jax.tree.structure(init)
  for s, s0 in zip(jax.tree.leaves(state), jax.tree.leaves(init)):
    assert s.shape == s0.shape and s.dtype == s0.dtype
    assert np.all(np.isfinite(np.abs(np.asarray(s))))
  # state_size = floats per sequence in the state's float leaves (complex = 2 floats).
  floats = sum(s.size * (2 if jnp.iscomplexobj(s) else 1) for s in jax.tree.leaves(init)
               if jnp.issubdtype(s.dtype, jnp.inexact))
  assert floats == B * m.state_size(T)


def test_gradient_causality(setup):
  """d y_t0 / d x_s = 0 for s > t0 (up to FFT rounding for s4's convolution), nonzero for s ≤ t0."""
  name, _, _, fwd_p, params, x = setup
  t0 = 4
  cot = jnp.zeros((B, T, D)).at[:, t0].set(1.0)
  g = jax.grad(lambda x: jnp.sum(fwd_p(params, x)[0] * cot))(x)
  g = np.abs(np.asarray(g)).max(axis=(0, 2))  # [T]
  tol = 1e-6 * g.max() if name == "s4" else 0.0
  assert np.all(g[t0 + 1:] <= tol), f"y_{t0} depends on future inputs: {g}"
  assert np.all(g[:t0 + 1] > 0), g


def test_prefill_then_steps_equals_one_pass(setup):
  name, m, fwd, _, _, x = setup
  y_full, s_full = fwd(x)
  y_pre, state = fwd(x[:, :T1], m.init_state(B, T))
  ys = [y_pre]
  for t in range(T1, T):
    y_t, state = fwd(x[:, t:t + 1], state)
    ys.append(y_t)
  assert rel_rms(jnp.concatenate(ys, axis=1), y_full) < 1e-5
  if name != "softmax":  # the same recurrent state after the last token
    for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(s_full)):
      assert rel_rms(a, b) < 1e-5


def test_packed_documents_are_independent(setup):
  """A row of two documents: each one's outputs equal running it alone (state reset / segment mask)."""
  _, m, fwd, _, _, x = setup
  t_a = T - T1
  seg = jnp.asarray([[3] * t_a + [4] * T1, [1] * t_a + [2] * T1], jnp.int32)
  y_packed, _ = fwd(x, segment_ids=seg)
  y_full, _ = fwd(x)
  y_second, _ = fwd(x[:, t_a:], m.init_state(B, T))  # the second document alone, fresh state
  assert rel_rms(y_packed[:, :t_a], y_full[:, :t_a]) < 1e-5  # (causality: the first one alone)
  assert rel_rms(y_packed[:, t_a:], y_second) < 1e-5
  y_one_doc, _ = fwd(x, segment_ids=jnp.ones((B, T), jnp.int32))  # no boundary: as without ids
  assert rel_rms(y_one_doc, y_full) < 1e-5


def test_packed_prefill_then_decode_continues_last_document(setup):
  """Prefill a packed row, then one decode step: it sees only the last document (reset / cache mask)."""
  _, m, fwd, _, _, x = setup
  seg = jnp.asarray([[1] * 3 + [2] * (T - 3)] * B, jnp.int32)
  y_packed, _ = fwd(x, segment_ids=seg)
  _, state = fwd(x[:, :T1], m.init_state(B, T), seg[:, :T1])
  y_step, _ = fwd(x[:, T1:T1 + 1], state)
  assert rel_rms(y_step, y_packed[:, T1:T1 + 1]) < 1e-5


@pytest.mark.parametrize("name,kwargs", [("gla", dict(gate_rank=4, chunk_size=CHUNK)),
                                         ("mamba2", dict(head_dim=8, state_size=4, chunk_size=CHUNK))])
def test_negative_eigenvalues_reach_the_op_as_signed_decays(name, kwargs, monkeypatch):
  """model.negative_eigenvalues: the op gets α' = 2α − 1 as (log |α'|, sign α'), with negative signs where
  α < 1/2; without it, no decay_sign at all."""
  seen = []
  real = ops.signed_log_decay
  monkeypatch.setattr(ops, "signed_log_decay", lambda a: seen.append(a) or real(a))
  x = jax.random.normal(jax.random.key(0), (2, 9, 16)) * 3.0
  plain = mixers.get(name)(16, **({} if name == "mamba2" else {"num_heads": 2}), **kwargs, rngs=nnx.Rngs(0))
  signed = mixers.get(name)(16, **({} if name == "mamba2" else {"num_heads": 2}), **kwargs,
                            negative_eigenvalues=True, rngs=nnx.Rngs(0))
  y0, _ = plain(x)
  assert not seen
  y1, _ = signed(x)
  (alpha,) = seen
  assert float(alpha.min()) >= -1 and float(alpha.max()) <= 1 and float(alpha.min()) < 0
  assert float(jnp.max(jnp.abs(y1 - y0))) > 1e-4   # the signs change the outputs
