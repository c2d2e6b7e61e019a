"""linear_attention, retention and gated_linear_attention against a float64 Python-loop reference.

The reference (below) runs eq. 6-11 literally, one step at a time, in float64 (jax x64 for its
gradients): S_t = α_t S_{t−1} + w_t φ(k_t)ᵀ v_t, z_t likewise on v = 1, with its own float64
feature maps (no stabilization). Compared: outputs, final states and gradients (random cotangents
on o and on every state leaf) wrt q, k, v, log_decay and the initial state.

Tolerances (relative RMS, float32 op vs float64 reference): values VAL_TOL = 1e-5,
gradients GRAD_TOL = 1e-4 (gradients of the normalized form divide by φ(q)·z). Cases cover
feature map × normalize × decay shape × mode × initial state pairwise, not as a product.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from linear_seq import ops
from tests.helpers import rel_rms

VAL_TOL = 1e-5
GRAD_TOL = 1e-4
B, H, K, V = 2, 2, 6, 5


# ----------------------------------------------------------------------------------------------
# float64 reference (jnp under x64 so that jax.vjp gives float64 gradients)

def ref_features(name, x, W=None):
  if name == "identity":
    return x
  if name == "relu":
    return jnp.maximum(x, 0.0)
  if name == "elu1":
    return jnp.where(x > 0, x + 1.0, jnp.exp(jnp.minimum(x, 0.0)))
  if name == "exp":
    return jnp.exp(x)
  if name == "sincos":
    return jnp.concatenate([jnp.sin(x), jnp.cos(x)], -1)
  if name == "taylor":
    outer = jnp.einsum("...i,...j->...ij", x, x).reshape(*x.shape[:-1], -1)
    return jnp.concatenate([jnp.ones_like(x[..., :1]), x, outer / np.sqrt(2.0)], -1)
  if name == "favor":
    return jnp.exp(x @ W - 0.5 * jnp.sum(x * x, -1, keepdims=True)) / np.sqrt(W.shape[1])
  raise KeyError(name)


def ref_linear_attention(q, k, v, log_decay, S0, z0, *, fmap, W=None, normalize=True, eps=1e-6,
                         scale=None, weight_keys=True):
  """Eq. 6-11 step by step (lax.scan over t). log_decay None|[H]|[B,T,H]|[B,T,H,K']; returns (o, S) or (o, (S, z))."""
  fq, fk = ref_features(fmap, q, W), ref_features(fmap, k, W)
  Bq, T, Hq, Kf = fq.shape
  if log_decay is None:
    alpha, w = jnp.ones_like(fk), jnp.ones_like(fk)
  else:
    ld = log_decay[:, None] if log_decay.ndim == 1 else (
        log_decay[..., None] if log_decay.ndim == 3 else log_decay)
    alpha = jnp.broadcast_to(jnp.exp(ld), fk.shape)
    w = 1.0 - alpha if weight_keys else jnp.ones_like(fk)
  S = jnp.zeros((Bq, Hq, Kf, v.shape[-1]), v.dtype) if S0 is None else S0
  z = jnp.zeros((Bq, Hq, Kf), v.dtype) if z0 is None else z0
  scale = Kf ** -0.5 if scale is None else scale

  def step(carry, xs):  # one time step t
    S, z = carry
    a, kw, fq_t, v_t = xs
    S = a[..., None] * S + kw[..., None] * v_t[:, :, None, :]
    z = a * z + kw
    num = jnp.einsum("bhk,bhkv->bhv", fq_t, S)
    if normalize:
      return (S, z), num / (jnp.einsum("bhk,bhk->bh", fq_t, z)[..., None] + eps)
    return (S, z), scale * num

  time_major = lambda x: jnp.moveaxis(x, 1, 0)
  (S, z), o = jax.lax.scan(step, (S, z), tuple(map(time_major, (alpha, w * fk, fq, v))))
  o = jnp.moveaxis(o, 0, 1)
  return (o, (S, z)) if normalize else (o, S)


def compare(op, ref, args, diff_argnums, key=0, val_tol=VAL_TOL, grad_tol=GRAD_TOL):
  """Values and vjp gradients of op(*args) (float32) vs ref(*args) (float64), each side one jitted program (the
  cotangents' shapes come from eval_shape: op run eagerly would compile each of its primitives on its own)."""
  args32 = [None if a is None else jnp.asarray(a, jnp.float32) for a in args]
  out = jax.eval_shape(op, *args32)
  cot = jax.tree.map(lambda x: np.asarray(
      jax.random.normal(jax.random.PRNGKey(key), x.shape), np.float64), out)

  def grads(f, xs, dtype):
    def g(*d):
      full = list(xs)
      for i, x in zip(diff_argnums, d):
        full[i] = x
      return f(*full)
    o, pull = jax.vjp(g, *[xs[i] for i in diff_argnums])
    return o, pull(jax.tree.map(lambda c: jnp.asarray(c, dtype), cot))

  o32, g32 = jax.jit(lambda *xs: grads(op, xs, jnp.float32))(*args32)
  with jax.enable_x64(True):
    args64 = [None if a is None else jnp.asarray(a, jnp.float64) for a in args]
    o64, g64 = jax.jit(lambda *xs: grads(ref, xs, jnp.float64))(*args64)
    o64, g64 = jax.tree.map(np.asarray, (o64, g64))
  for i, (a, b) in enumerate(zip(jax.tree.leaves(o32), jax.tree.leaves(o64))):
    assert rel_rms(a, b) <= val_tol, f"value leaf {i}: rel_rms {rel_rms(a, b):.3g}"
  for i, a, b in zip(diff_argnums, g32, g64):
    assert rel_rms(a, b) <= grad_tol, f"grad wrt arg {i}: rel_rms {rel_rms(a, b):.3g}"
  return o32


def rand(seed, *shape, scale=1.0):
  return scale * np.random.default_rng(seed).standard_normal(shape)


def make_decay(kind, T, Kf, seed=9, strength=0.3):
  if kind is None:
    return None
  shape = {"H": (H,), "BTH": (B, T, H), "BTHK": (B, T, H, Kf)}[kind]
  return -strength * np.abs(rand(seed, *shape)) - 0.01


# ----------------------------------------------------------------------------------------------
# linear_attention vs the reference: (map, normalize, decay, mode, chunk, initial state, T)

CASES = [
    ("elu1", True, None, "chunk", 8, False, 20),
    ("relu", False, None, "assoc", 64, True, 7),
    ("exp", True, "H", "parallel", 64, True, 13),
    ("favor", True, "BTH", "chunk", 16, False, 37),
    ("taylor", True, "BTHK", "recurrent", 64, True, 9),
    ("sincos", False, "BTHK", "chunk", 8, True, 20),
    ("identity", False, "H", "recurrent", 64, False, 1),
    ("elu1", False, "BTH", "parallel", 64, False, 11),
]


@pytest.mark.parametrize("fmap,normalize,decay,mode,chunk,init,T", CASES)
def test_linear_attention_matches_reference(fmap, normalize, decay, mode, chunk, init, T):
  Kin = 3 if fmap == "taylor" else K
  W = np.asarray(ops.random_projection(jax.random.PRNGKey(3), Kin, 12)) if fmap == "favor" else None
  xs = 0.5 if fmap in ("exp", "favor") else 1.0
  q, k, v = rand(0, B, T, H, Kin, scale=xs), rand(1, B, T, H, Kin, scale=xs), rand(2, B, T, H, V)
  Kf = int(ops.feature_map(fmap)(q[:1, :1, :1], projection=W).shape[-1])
  ld = make_decay(decay, T, Kf)
  S0 = np.abs(rand(4, B, H, Kf, V)) if init else None  # |S0|, z0 > 0: a state some keys could make
  z0 = np.abs(rand(5, B, H, Kf)) + 0.5 if (init and normalize) else None

  def op(q, k, v, ld, S0, z0, W):
    st = None if S0 is None else ((S0, z0) if normalize else S0)
    return ops.linear_attention(q, k, v, feature_map=fmap, projection=W, normalize=normalize,
                                log_decay=ld, initial_state=st, mode=mode, chunk_size=chunk)

  def ref(q, k, v, ld, S0, z0, W):
    return ref_linear_attention(q, k, v, ld, S0, z0, fmap=fmap, W=W, normalize=normalize)

  args = [q, k, v, ld, S0, z0, W]
  diff = [i for i in range(6) if args[i] is not None]
  compare(op, ref, args, diff)


def test_prefill_then_continue_normalized_state():
  """(S, z) from T1 tokens continues to the same outputs and state as one pass.

  The exp map with large inputs exercises the key stabilizer: its state is handed over in frame 0.
  """
  T1, T2 = 9, 6
  ld = make_decay("BTH", T1 + T2, K)
  q, k, v = rand(0, B, T1 + T2, H, K) + 30.0, rand(1, B, T1 + T2, H, K) + 30.0, rand(2, B, T1 + T2, H, V)
  f = lambda q, k, v, ld, st: ops.linear_attention(q, k, v, feature_map="exp", log_decay=ld,
                                                   initial_state=st, mode="recurrent")
  o_full, (S_full, z_full) = f(q, k, v, ld, None)
  o1, st1 = f(q[:, :T1], k[:, :T1], v[:, :T1], ld[:, :T1], None)
  o2, (S2, z2) = f(q[:, T1:], k[:, T1:], v[:, T1:], ld[:, T1:], st1)
  assert rel_rms(jnp.concatenate([o1, o2], 1), o_full) <= VAL_TOL
  assert rel_rms(S2, S_full) <= VAL_TOL and rel_rms(z2, z_full) <= VAL_TOL
  with jax.enable_x64(True):
    o_ref, (S_ref, z_ref) = ref_linear_attention(*(jnp.asarray(x) for x in (q, k, v, ld)), None,
                                                 None, fmap="exp")
  assert rel_rms(o_full, o_ref) <= VAL_TOL
  assert rel_rms(S_full, S_ref) <= VAL_TOL and rel_rms(z_full, z_ref) <= VAL_TOL


def test_exp_stabilization_is_exact_and_survives_extreme_inputs():
  T = 12
  q, k, v = rand(0, B, T, H, K), rand(1, B, T, H, K), rand(2, B, T, H, V)
  run = lambda fm, q, k: ops.linear_attention(q, k, v, feature_map=fm, mode="parallel")[0]
  # Moderate inputs: stabilized == the plain exp map (a callable, which is not stabilized).
  assert rel_rms(run("exp", q, k), run(jnp.exp, q, k)) <= VAL_TOL
  # Extreme inputs: the plain map overflows (inf/inf) or underflows (0/eps); the stabilized map
  # matches the float64 reference without eps (the shifted denominator is O(1), eps negligible).
  for shift in (100.0, -150.0):
    with jax.enable_x64(True):
      o_ref, _ = ref_linear_attention(*(jnp.asarray(x) for x in (q + shift, k + shift, v)),
                                      None, None, None, fmap="exp", eps=0.0)
    assert rel_rms(run("exp", q + shift, k + shift), o_ref) <= VAL_TOL, shift
    assert rel_rms(run(jnp.exp, q + shift, k + shift), o_ref) > 0.5, shift


def test_reset_restarts_documents_and_the_key_stabilizer():
  """reset=[B,T] (or −inf in log_decay) clears the state; the second document then equals a
  separate pass, even after a first document whose keys are 100 larger (stabilizer restarts)."""
  T, cut = 12, 7
  q, k, v = rand(0, B, T, H, K), rand(1, B, T, H, K), rand(2, B, T, H, V)
  k[:, :cut] += 100.0
  reset = np.zeros((B, T), bool)
  reset[:, cut] = True
  ld = make_decay("H", T, K)
  ld_reset = np.broadcast_to(ld, (B, T, H)).copy()
  ld_reset[:, cut] = -np.inf
  f = lambda q, k, v, **kw: ops.linear_attention(q, k, v, feature_map="exp", mode="chunk",
                                                 chunk_size=4, **kw)
  # reset= keeps the first key's weight 1 − α; a −inf log_decay gives it weight 1 (eq. 10-11).
  for kw, ld_doc2 in ((dict(log_decay=ld, reset=reset), ld), (dict(log_decay=ld_reset),
                                                                ld_reset[:, cut:])):
    o_doc2, (S_doc2, _) = f(q[:, cut:], k[:, cut:], v[:, cut:], log_decay=ld_doc2)
    o, (S, _) = f(q, k, v, **kw)
    assert rel_rms(o[:, cut:], o_doc2) <= VAL_TOL and rel_rms(S, S_doc2) <= VAL_TOL, kw.keys()
  with pytest.raises(ValueError, match=r"reset has shape \[2, 11\], expected \[2, 12\]"):
    f(q, k, v, reset=reset[:, 1:])


def test_constant_decay_normalized_equals_decay_without_one_minus_a():
  """Eq. 10-11 with constant a and normalization: the (1 − a) factor cancels."""
  T = 10
  q, k, v = rand(0, B, T, H, K), rand(1, B, T, H, K), rand(2, B, T, H, V)
  ld = np.log(np.array([0.5, 0.9]))
  o, _ = ops.linear_attention(q, k, v, log_decay=ld, eps=0.0, mode="recurrent")
  with jax.enable_x64(True):
    o_ref, _ = ref_linear_attention(*(jnp.asarray(x) for x in (q, k, v, ld)), None, None,
                                    fmap="elu1", eps=0.0, weight_keys=False)
  assert rel_rms(o, o_ref) <= VAL_TOL


def test_reset_and_causality():
  """−inf in log_decay is a reset; d o_t / d (q, k, v)_s = 0 for s > t."""
  T, t0 = 8, 4
  q, k, v = (jnp.asarray(rand(i, 1, T, 1, 4), jnp.float32) for i in range(3))
  ld = np.full((1, T, 1), -0.1)
  ld[:, 5] = -np.inf
  f = jax.jit(lambda q, k, v, ld: ops.linear_attention(q, k, v, feature_map="exp", log_decay=ld,
                                                       mode="chunk", chunk_size=4)[0])
  o, o_tail = f(q, k, v, ld), f(q[:, 5:], k[:, 5:], v[:, 5:], ld[:, 5:])
  assert rel_rms(o[:, 5:], o_tail) <= VAL_TOL
  # A random cotangent on o_{≤t0} only: gradients at s > t0 must be exactly zero.
  cot = jnp.asarray(rand(7, 1, T, 1, 4), jnp.float32).at[:, t0 + 1:].set(0.0)
  _, pull = jax.vjp(lambda q, k, v: f(q, k, v, ld), q, k, v)
  for g in pull(cot):
    assert np.all(np.asarray(g)[:, t0 + 1:] == 0) and np.any(np.asarray(g)[:, :t0 + 1] != 0)


def test_bfloat16_in_bfloat16_out():
  T = 16
  q, k, v = (jnp.asarray(rand(i, B, T, H, K), jnp.bfloat16) for i in range(3))
  o, (S, z) = ops.linear_attention(q, k, v, feature_map="exp", mode="chunk", chunk_size=8)
  assert o.dtype == jnp.bfloat16 and S.dtype == jnp.float32 and z.dtype == jnp.float32
  o32, _ = ops.linear_attention(*(x.astype(jnp.float32) for x in (q, k, v)), feature_map="exp",
                                mode="chunk", chunk_size=8)
  assert rel_rms(o, o32) <= 2e-2


# ----------------------------------------------------------------------------------------------
# retention and GLA

def test_retention_matches_reference():
  T = 21
  q, k, v = rand(0, B, T, H, K), rand(1, B, T, H, K), rand(2, B, T, H, V)
  gamma = np.array([0.8, 0.97])
  S0 = rand(3, B, H, K, V)

  def op(q, k, v, S0):
    return ops.retention(q, k, v, jnp.asarray(gamma), initial_state=S0, mode="chunk", chunk_size=8)

  def ref(q, k, v, S0):
    return ref_linear_attention(q, k, v, jnp.log(jnp.asarray(gamma)), S0, None, fmap="identity",
                                normalize=False, weight_keys=False)

  compare(op, ref, [q, k, v, S0], [0, 1, 2, 3])


@pytest.mark.parametrize("vector,mode", [(True, "chunk"), (False, "recurrent")])
def test_gla_matches_reference(vector, mode):
  T = 19
  q, k, v = rand(0, B, T, H, K), rand(1, B, T, H, K), rand(2, B, T, H, V)
  lf = make_decay("BTHK" if vector else "BTH", T, K, strength=2.0)
  lf[:, 4] = -20.0  # a strong gate

  def op(q, k, v, lf):
    return ops.gated_linear_attention(q, k, v, lf, mode=mode, chunk_size=8)

  def ref(q, k, v, lf):
    return ref_linear_attention(q, k, v, lf, None, None, fmap="identity", normalize=False,
                                weight_keys=False)

  compare(op, ref, [q, k, v, lf], [0, 1, 2, 3])


# ----------------------------------------------------------------------------------------------
# errors

def _qkv(T=5):
  return rand(0, B, T, H, K), rand(1, B, T, H, K), rand(2, B, T, H, V)


@pytest.mark.parametrize("kwargs,match", [
    (dict(feature_map="identity"), "normalize=False"),
    (dict(feature_map="sincos"), "elu1"),
    (dict(feature_map="nope"), "valid: identity"),
    (dict(feature_map=3), "name or a callable"),
    (dict(feature_map="favor"), "needs projection"),
    (dict(projection=np.zeros((K, 4))), "deterministic"),
    (dict(feature_map="favor", projection=np.zeros((K + 1, 4))), r"projection has shape \[7, 4\]"),
    (dict(log_decay=np.zeros((B, 5))), r"expected \[H\], \[B,T,H\] or \[B,T,H,K'\]"),
    (dict(log_decay=np.full((H,), 0.1)), "must be <= 0"),
    (dict(initial_state=np.zeros((B, H, K, V))), "pair"),
    (dict(initial_state=(np.zeros((B, H, K, V + 1)), np.zeros((B, H, K)))), "initial_state S"),
    (dict(initial_state=(np.zeros((B, H, K, V)), np.zeros((B, H, 1)))), "initial_state z"),
    (dict(normalize=False, initial_state=np.zeros((B, H, 2 * K, V)), feature_map="relu"),
     r"initial_state has shape"),
    (dict(feature_map=lambda x: x[..., 0]), "feature map gave"),
])
def test_linear_attention_errors(kwargs, match):
  with pytest.raises(ValueError, match=match):
    ops.linear_attention(*_qkv(), mode="recurrent", **kwargs)


def test_shape_errors():
  q, k, v = _qkv()
  with pytest.raises(ValueError, match=r"q has shape \[2, 5, 2\], expected \[B, T, H, K\]"):
    ops.linear_attention(q[..., 0], k, v)
  with pytest.raises(ValueError, match=r"k has shape \[2, 5, 3, 6\], expected \[2, 5, 2, 6\]"):
    ops.retention(q, np.zeros((B, 5, 3, K)), v, np.array([0.5, 0.5]))
  with pytest.raises(ValueError, match=r"v has shape \[2, 4, 2, 5\], expected \[2, 5, 2, \?\]"):
    ops.gated_linear_attention(q, k, v[:, :4], np.zeros((B, 5, H)))


def test_retention_and_gla_errors():
  q, k, v = _qkv()
  with pytest.raises(ValueError, match=r"gamma has shape \[3\], expected \[2\]"):
    ops.retention(q, k, v, np.array([0.5, 0.5, 0.5]))
  for bad in ([0.5, 1.0], [0.0, 0.5], [1.5, 0.5], [np.nan, 0.5]):
    with pytest.raises(ValueError, match=r"gamma must lie in \(0, 1\)"):
      ops.retention(q, k, v, np.array(bad))
  # Under jit the value check is skipped (values unknown), the op still runs.
  o, _ = jax.jit(lambda g: ops.retention(q, k, v, g, mode="recurrent"))(jnp.array([0.5, 1.5]))
  assert o.shape == (B, 5, H, V)
  with pytest.raises(ValueError, match=r"log_forget has shape \[2, 5\], expected \[B,T,H,K\]"):
    ops.gated_linear_attention(q, k, v, np.zeros((B, 5)))
  with pytest.raises(ValueError, match="log_forget must be <= 0"):
    ops.gated_linear_attention(q, k, v, np.full((B, 5, H), 0.1))
