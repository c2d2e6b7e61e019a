"""Cases for the ops under `jax.shard_map` on 4 fake CPU devices (run by test_seq_parallel.py in a subprocess).

Each case runs an op sharded and unsharded on the same inputs and records the relative-RMS errors of the
outputs, the final state and the gradients (random cotangents on o and every state leaf) wrt q, k, v, the
decay and the initial state. Two kinds:
  'seq'   T split over the mesh axis 'seq' (seq_axis='seq'; mesh seq=4, or data=2 × seq=2 with the batch
          split too), pairwise over op × mode × gate (`*_signed`: with a ±1 decay_sign) × initial state ×
          reset placement;
  'batch' only the batch split (no seq_axis): today's ops must run inside shard_map at all.
`python tests/ops/seq_parallel_cases.py` prints one JSON line {case name: {what: error}}.
"""
import json
import os
import sys

B, T, H, K, V = 2, 32, 2, 4, 3
# Reset positions per batch row: inside a shard (of 4 shards of 8 tokens, and of 2 shards of 16), and at a
# shard's first token.
RESETS = {"none": ([], []), "inside": ([11], [5, 21]), "first": ([8, 24], [16])}

#   (op, mode, gate, init, reset, mesh, chunk_size)
_SEQ = [
    ("recurrence", "chunk", "none", False, "none", "seq4", 4),
    ("recurrence", "recurrent", "fixed", True, "none", "seq4", 4),
    ("recurrence", "chunk", "scalar", True, "inside", "seq4", 3),
    ("recurrence", "recurrent", "scalar", False, "first", "data2seq2", 4),
    ("recurrence", "chunk", "vector", False, "first", "seq4", 4),
    ("recurrence", "recurrent", "vector", True, "inside", "seq4", 4),
    ("recurrence", "parallel", "vector", True, "first", "seq4", 4),
    ("retention", "chunk", "fixed", True, "none", "data2seq2", 4),
    ("retention", "recurrent", "fixed", False, "none", "seq4", 4),
    ("gla", "chunk", "vector", True, "first", "data2seq2", 5),
    ("gla", "recurrent", "scalar", True, "inside", "seq4", 4),
    ("gla", "recurrent", "vector", False, "none", "seq4", 4),
    ("linear_elu1", "chunk", "none", True, "inside", "seq4", 4),
    ("linear_elu1", "recurrent", "scalar", False, "first", "seq4", 4),
    ("linear_exp", "chunk", "none", True, "first", "seq4", 4),
    ("linear_exp", "recurrent", "fixed", False, "inside", "seq4", 4),
    ("linear_exp", "chunk", "scalar", False, "none", "data2seq2", 4),
    ("linear_favor", "chunk", "vector", True, "inside", "seq4", 4),
    ("linear_rbf", "chunk", "scalar", True, "first", "seq4", 4),
    ("linear_relu_unnormalized", "chunk", "fixed", True, "inside", "seq4", 4),
    ("delta", "chunk", "none", True, "first", "data2seq2", 5),   # ungated: resets as a −inf scalar gate
    ("delta", "chunk", "scalar", True, "inside", "seq4", 3),
    ("delta", "chunk", "vector", True, "first", "seq4", 4),
    ("delta", "recurrent", "vector", False, "inside", "data2seq2", 4),
    # signed decays (_signed: log |α| with a random ±1 decay_sign, α = −1 exactly at some tokens)
    ("recurrence", "chunk", "vector_signed", True, "first", "seq4", 4),
    ("recurrence", "parallel", "scalar_signed", False, "inside", "data2seq2", 4),
    ("gla", "recurrent", "vector_signed", True, "inside", "seq4", 4),
    ("retention", "chunk", "fixed_signed", True, "none", "seq4", 4),
    ("linear_relu_unnormalized", "chunk", "scalar_signed", True, "inside", "seq4", 3),
]
_BATCH = [
    ("recurrence", "chunk", "vector", True, "none", "data4", 4),
    ("recurrence", "recurrent", "scalar", False, "none", "data4", 4),
    ("gla", "recurrent", "vector", True, "none", "data4", 4),
    ("linear_exp", "chunk", "scalar", True, "inside", "data4", 4),
    ("delta", "recurrent", "vector", True, "none", "data4", 4),
]


def _name(c):
  op, mode, gate, init, reset, mesh, cs = c
  return f"{op}-{mode}-{gate}-{'h0' if init else 'zero'}-reset_{reset}-{mesh}-C{cs}"


CASES = {_name(c): c for c in _SEQ + _BATCH}
FEATURE_MAP_OPS = ("linear_elu1", "linear_exp", "linear_favor", "linear_rbf", "linear_relu_unnormalized")
DELTA_K = 20   # the delta rule's key size: awkward, and its K×K transition products are the shards' messages


def _op(op, mode, cs, W, seq_axis):
  """f(q, k, v, decay, h0, reset) -> (o, state) for one op (the delta rule takes β in reset's place).
  A signed decay is the pair (log |α|, decay_sign)."""
  from linear_seq import ops
  kw = dict(mode=mode, chunk_size=cs, seq_axis=seq_axis)
  sg = lambda d: dict(decay_sign=d[1]) if isinstance(d, tuple) else {}   # keyword only when signed
  mag = lambda d: d[0] if isinstance(d, tuple) else d
  if op == "delta":
    return lambda q, k, v, d, h0, beta: ops.delta_rule(q, k, v, beta, d, initial_state=h0, **kw)
  if op == "recurrence":
    return lambda q, k, v, d, h0, r: ops.linear_recurrence(q, k, v, mag(d), initial_state=h0, **kw, **sg(d))
  if op == "retention":
    return lambda q, k, v, d, h0, r: ops.retention(q, k, v, mag(d), initial_state=h0, **kw, **sg(d))
  if op == "gla":
    return lambda q, k, v, d, h0, r: ops.gated_linear_attention(q, k, v, mag(d), initial_state=h0, **kw,
                                                                **sg(d))
  fmap = op.split("_")[1]
  normalize = not op.endswith("unnormalized")
  proj = W if fmap in ("favor", "rbf") else None
  return lambda q, k, v, d, h0, r: ops.linear_attention(
      q, k, v, feature_map=fmap, projection=proj, normalize=normalize, log_decay=mag(d), initial_state=h0,
      reset=r, **kw, **sg(d))


def _inputs(case, key):
  import jax
  import jax.numpy as jnp
  import numpy as np
  op, mode, gate, init, reset, mesh, cs = case
  signed, gate = gate.endswith("_signed"), gate.removesuffix("_signed")
  b = 4 if mesh == "data4" else B
  kq, kk, kv, kd, kh, kw = jax.random.split(key, 6)
  Kq = DELTA_K if op == "delta" else K
  q = jax.random.normal(kq, (b, T, H, Kq))
  k = jax.random.normal(kk, (b, T, H, Kq))
  v = jax.random.normal(kv, (b, T, H, V))
  Kf = 8 if op in ("linear_favor", "linear_rbf") else Kq
  W = jax.random.normal(kw, (K, Kf)) / 2 if Kf != K else None
  if op.startswith("linear_"):   # moderate q, k for the exp maps; a large offset on k tests the frames
    q, k = q * 0.5, k * 0.5 + (3.0 if op == "linear_exp" else 0.0)
  if gate == "none":
    d = None
  elif gate == "fixed":
    d = jnp.log(jnp.array([0.9, 0.6])) if op != "retention" else jnp.array([0.9, 0.6])
  elif gate == "scalar":
    d = jax.nn.log_sigmoid(2.0 + 2.0 * jax.random.normal(kd, (b, T, H)))
  else:   # vector: strong gates (log α down to ~ −8) next to weak ones
    d = jax.nn.log_sigmoid(1.0 + 3.0 * jax.random.normal(kd, (b, T, H, Kf)))
  rows = RESETS[reset]
  r = np.zeros((b, T), bool)
  for i in range(b):
    r[i, rows[i % 2]] = True
  if op.startswith("linear_"):
    r = jnp.asarray(r) if reset != "none" else None
  elif op == "delta":   # unit keys (as the mixer feeds them), β ∈ (0, 2) (negative eigenvalues too)
    k = k / jnp.linalg.norm(k, axis=-1, keepdims=True)
    if reset != "none":
      if d is None:
        d = jnp.zeros((b, T, H))
      mask = jnp.asarray(r)[:, :, None] if d.ndim == 3 else jnp.asarray(r)[:, :, None, None]
      d = jnp.where(mask, -jnp.inf, d)
    r = 2.0 * jax.nn.sigmoid(jax.random.normal(jax.random.fold_in(kd, 7), (b, T, H)))
  else:
    assert reset == "none" or gate in ("scalar", "vector"), case
    if reset != "none":
      mask = jnp.asarray(r)[:, :, None] if gate == "scalar" else jnp.asarray(r)[:, :, None, None]
      d = jnp.where(mask, -jnp.inf, d)
    r = None
  if signed:   # random ±1 signs; α = −1 exactly (log |α| = 0) at every 5th token
    sign = jnp.where(jax.random.bernoulli(jax.random.fold_in(kd, 9), 0.5, d.shape), -1.0, 1.0)
    if d.ndim > 1:
      d = d.at[:, ::5].set(0.0)
      sign = sign.at[:, ::5].set(-1.0)
    d = (d, sign)
  h0 = None
  if init:
    ks, kz = jax.random.split(kh)
    S = jax.random.normal(ks, (b, H, Kf, V))
    if op.startswith("linear_") and not op.endswith("unnormalized"):
      h0 = (jnp.abs(S), jnp.abs(jax.random.normal(kz, (b, H, Kf))) + 0.5)
    else:
      h0 = S
  return q, k, v, d, h0, r, W


def run_case(case, key):
  import jax
  import jax.numpy as jnp
  import numpy as np
  from jax.sharding import Mesh, PartitionSpec as P
  from tests.helpers import random_like, rel_rms
  op, mode, gate, init, reset, mesh_name, cs = case
  q, k, v, d, h0, r, W = _inputs(case, key)
  if mesh_name == "data4":   # batch only: a 1-D mesh, no seq_axis
    mesh, seq_axis, tspec = Mesh(np.asarray(jax.devices()), ("data",)), None, P("data")
  else:
    shape = {"seq4": (1, 4), "data2seq2": (2, 2)}[mesh_name]
    mesh = Mesh(np.asarray(jax.devices()).reshape(shape), ("data", "seq"))
    seq_axis, tspec = "seq", P("data", "seq")
  d_spec = None if d is None else (P() if jax.tree.leaves(d)[0].ndim == 1 else tspec)
  h_spec = None if h0 is None else P("data")
  s_spec = P("data")   # replicated over seq
  in_specs = (tspec, tspec, tspec, d_spec, h_spec, None if r is None else tspec)
  sharded = jax.shard_map(_op(op, mode, cs, W, seq_axis), mesh=mesh, in_specs=in_specs,
                          out_specs=(tspec, s_spec))
  plain = _op(op, mode, cs, W, None)
  args = (q, k, v, d, h0, r)
  argnums = [i for i in range(6 if op == "delta" else 5) if args[i] is not None]
  cot = random_like(jax.random.fold_in(key, 1), jax.eval_shape(plain, *args), jnp.float32)

  @jax.jit
  def value_and_grads(f, diff):   # one compile per form: outputs and the pulled-back cotangents
    out, pull = jax.vjp(lambda *a: f(*_full(args, argnums, a)), *diff)
    return out, pull(cot)

  diff = [args[i] for i in argnums]
  out_ref, g_ref = value_and_grads(jax.tree_util.Partial(plain), diff)
  out, g = value_and_grads(jax.tree_util.Partial(sharded), diff)
  errors = {"o": rel_rms(out[0], out_ref[0])}
  for i, (a, b) in enumerate(zip(jax.tree.leaves(out[1]), jax.tree.leaves(out_ref[1]))):
    errors[f"state{i}"] = rel_rms(a, b)
  names = ["dq", "dk", "dv", "ddecay", "dh0", "dbeta"]
  for i, ga, gb in zip(argnums, g, g_ref):
    for j, (a, b) in enumerate(zip(jax.tree.leaves(ga), jax.tree.leaves(gb))):
      errors[names[i] + ("" if j == 0 else str(j))] = rel_rms(a, b)
  return errors


def _full(args, argnums, diff):
  full = list(args)
  for i, x in zip(argnums, diff):
    full[i] = x
  return full


def main():
  import jax
  jax.config.update("jax_default_matmul_precision", "highest")
  if os.environ.get("JAX_CACHE_DIR"):
    jax.config.update("jax_compilation_cache_dir", os.environ["JAX_CACHE_DIR"])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
  assert jax.device_count() == 4, jax.devices()
  names = sys.argv[1:] or list(CASES)
  result = {}
  for i, name in enumerate(names):
    try:
      result[name] = run_case(CASES[name], jax.random.PRNGKey(i))
    except Exception as e:  # reported per case by the test
      result[name] = {"error": f"{type(e).__name__}: {e}"[:2000]}
  print(json.dumps(result))


if __name__ == "__main__":
  main()
