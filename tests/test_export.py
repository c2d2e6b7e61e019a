"""Cross-platform lowering: the forward and backward pass of every op form, and one training step of every
mixer, export (`jax.export`) for CUDA and TPU from this CPU, in float32 and bfloat16.

Plain XLA lowers for any platform, so this is the gate a platform-specific path (cuDNN attention, a Pallas
kernel) must pass before it can become a default; a path that cannot lower off its device is skipped with
its reason, never passed silently. Lowering only: nothing compiles or runs.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export

from linear_seq import config_lib
from linear_seq import ops
from linear_seq import sharding
from linear_seq import steps
from tests import helpers

PLATFORMS = ("cuda", "tpu")
DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}
B, T, H, K, V = 2, 37, 2, 8, 8


def _inputs(dtype):
  rng = np.random.default_rng(0)
  x = lambda *s: jnp.asarray(rng.standard_normal(s), dtype)
  g = lambda *s: jnp.asarray(-np.abs(rng.standard_normal(s)), jnp.float32)
  return x, g


def _recurrence(mode, gate):
  def f(q, k, v, g):
    return ops.linear_recurrence(q, k, v, g, mode=mode, chunk_size=16)[0]
  shapes = {"scalar": (B, T, H), "vector": (B, T, H, K)}
  return f, lambda x, g: (x(B, T, H, K), x(B, T, H, K), x(B, T, H, V), g(*shapes[gate]))


def _delta(mode, gate):
  def f(q, k, v, beta, g):
    return ops.delta_rule(q, k, v, beta, g, mode=mode, chunk_size=16)[0]
  shapes = {"none": None, "scalar": (B, T, H), "channel": (B, T, H, K)}
  def args(x, g):
    k = x(B, T, H, K)
    k = k / jnp.linalg.norm(k.astype(jnp.float32), axis=-1, keepdims=True).astype(k.dtype)
    return (x(B, T, H, K), k, x(B, T, H, V), jax.nn.sigmoid(g(B, T, H)),
            None if shapes[gate] is None else g(*shapes[gate]))
  return f, args


def _ssm_channels(mode):
  def f(u, log_a, b, c, d):
    Ab = jnp.exp(jax.lax.complex(log_a, jnp.ones_like(log_a)))
    return ops.ssm_diag_channels(u, Ab, b.astype(jnp.complex64), c.astype(jnp.complex64), d, mode=mode)[0]
  return f, lambda x, g: (x(B, T, H), g(H, 4) - 0.1, x(H, 4), x(H, 4), x(H))


def _ssm(mode):
  def f(u, log_a, b, c, d):
    return ops.ssm(u, jnp.exp(log_a), b, c, d, mode=mode)[0]
  return f, lambda x, g: (x(B, T, 2), g(4) - 0.1, x(4, 2), x(3, 4), x(3, 2))


def _attention(implementation):
  def f(q, k, v):
    return ops.softmax_attention(q, k, v, causal=True, implementation=implementation)
  return f, lambda x, g: (x(B, T, H, K), x(B, T, H, K), x(B, T, H, K))


def _linear_attention(feature_map):
  def f(q, k, v):
    return ops.linear_attention(q, k, v, feature_map=feature_map, chunk_size=16)[0]
  return f, lambda x, g: (x(B, T, H, K), x(B, T, H, K), x(B, T, H, V))


FORMS = {
    **{f"recurrence-{m}-{gate}": _recurrence(m, gate) for m in ops.MODES for gate in ("scalar", "vector")},
    **{f"delta-{m}-{gate}": _delta(m, gate) for m in ops.MODES for gate in ("none", "scalar", "channel")},
    **{f"ssm-{m}": _ssm(m) for m in ops.SSM_MODES},
    **{f"ssm_channels-{m}": _ssm_channels(m) for m in ops.SSM_CHANNEL_MODES},
    "linear_attention-elu1": _linear_attention("elu1"),
    "attention-xla": _attention(None),
    "attention-explicit": _attention("explicit"),
    "attention-cudnn": _attention("cudnn"),
}


def _fwd_bwd(f, num_args):
  """The outputs' projection and its gradients wrt every input."""
  def loss(*args):
    out = f(*args).astype(jnp.float32)
    return jnp.sum(out * jnp.cos(jnp.arange(out.size, dtype=jnp.float32).reshape(out.shape)))
  return jax.jit(jax.value_and_grad(loss, argnums=tuple(range(num_args))))


def _export(fn, args, platforms=PLATFORMS):
  try:
    return export.export(fn, platforms=platforms)(*args)
  except Exception as e:  # pylint: disable=broad-except
    if "cudnn" in str(e).lower() or "cuDNN" in str(e):
      pytest.skip(f"needs the cuDNN library at lowering time, not present off the device: {str(e)[:200]}")
    raise


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("form", list(FORMS))
def test_op_forms_export_for_gpu_and_tpu(form, dtype):
  f, make_args = FORMS[form]
  args = make_args(*_inputs(DTYPES[dtype]))
  if any(a is None for a in args):
    present, n = [i for i, a in enumerate(args) if a is not None], len(args)
    full = lambda *xs: f(*[xs[present.index(i)] if i in present else None for i in range(n)])
    fn, args = _fwd_bwd(full, len(present)), [args[i] for i in present]
  else:
    fn = _fwd_bwd(f, len(args))
  exported = _export(fn, args)
  assert exported.platforms == PLATFORMS
  assert "stablehlo" in exported.mlir_module() or "func.func" in exported.mlir_module()


MIXERS = {
    "softmax": {}, "linear": {}, "retention": {}, "gla": {}, "s4": {},
    "deltanet": {"model.conv_width": 0}, "mamba2": {"model.conv_width": 0},
}


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("mixer", list(MIXERS))
def test_training_step_of_every_mixer_exports(mixer, dtype):
  config = config_lib.apply_overrides(config_lib.load_config(helpers.DEFAULT_CONFIG + ":tiny=True"), {
      "model.mixer": mixer, **MIXERS[mixer], "model.num_layers": 1, "model.dtype": dtype,
      "data.seq_len": 40, "data.batch_size": 2})
  mesh = sharding.make_mesh(jax.devices()[:1])
  static, abstract, _ = steps.setup(config, 258, mesh)
  batch = {k: jax.ShapeDtypeStruct((2, 40), dt) for k, dt in
           (("inputs", np.int32), ("targets", np.int32), ("weights", np.float32), ("segment_ids", np.int32))}
  train_step = jax.jit(static.train_step.__wrapped__ if hasattr(static.train_step, "__wrapped__")
                       else static.train_step)
  with jax.set_mesh(mesh):
    exported = _export(train_step, (abstract, batch))
  assert exported.platforms == PLATFORMS
