"""Helpers shared by the whole test suite (the one place for them; test files never import each other).

Numerics (fla's metric and gradient checks):
  `rel_rms(a, b)` — RMS(a − b) / RMS(b), in float64 on the host; `assert_close` applies it leafwise;
  `random_like` — standard-normal pytrees; `vjp_grads(f, args, cotangents)` pulls fixed random cotangents
  back through `f`, so every output (all of o and the final state, say) contributes to every gradient.
Linear-recurrence cases (ops tests): `make_inputs`, `recurrence_cotangents`, `run_recurrence`, the tolerances.
Environment: `cli_env()` for CLI subprocesses; `default_data_config()`, `write_files()` for data tests.
Trainer runs (tests/test_train.py, test_faults.py): `tiny(name, **overrides)`, `mqar()`, the short text `TEXT`.
"""
import functools
import importlib.util
import os
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from linear_seq import config_lib
from linear_seq import ops

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CONFIGS = os.path.join(REPO, "configs")
DEFAULT_CONFIG = os.path.join(CONFIGS, "default.py")

# XLA_FLAGS addition for the whole suite (conftest.py sets it; CLI subprocesses inherit it) and for the
# subprocesses that set their own XLA_FLAGS (fake-device meshes, 2 processes): programs compiled once and run a
# few times. LLVM at -O0 cuts such a compile by a third to a half (measured: a delta-rule shard_map case
# 14.0 -> 6.2 CPU s). The HLO, its passes and so the math are unchanged; only machine code is less optimized,
# which these programs' microsecond runtimes do not notice.
FAST_COMPILE_XLA_FLAG = "--xla_backend_optimization_level=0"


def fake_devices_env(devices: int) -> dict[str, str]:
  """Subprocess env with `devices` fake CPU devices: the CPU backend forced (on a GPU host JAX would otherwise
  pick the GPU, and the device count would not be `devices`), the fake-device count and the suite's fast-compile
  flag added to the caller's XLA_FLAGS, no GPU memory preallocation, the tests' compilation cache."""
  env = cli_env()
  flags = [f for f in env.get("XLA_FLAGS", "").split() if not f.startswith("--xla_force_host_platform_device_count")]
  flags += [f"--xla_force_host_platform_device_count={devices}"]
  flags += [] if FAST_COMPILE_XLA_FLAG in flags else [FAST_COMPILE_XLA_FLAG]
  env.update({"XLA_FLAGS": " ".join(flags), "JAX_PLATFORMS": "cpu", "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
              "JAX_CACHE_DIR": env.get("JAX_CACHE_DIR", env["JAX_COMPILATION_CACHE_DIR"])})
  return env


def cli_env() -> dict[str, str]:
  """Subprocess env: repo importable, the tests' persistent compilation cache (reruns compile nothing)."""
  env = dict(os.environ)
  env["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO, env.get("PYTHONPATH", "")]))
  env.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(REPO, ".jax_cache"))
  env.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.5")
  return env


def default_data_config():
  """configs/default.py's data section (so the tests' field names stay in sync with it)."""
  spec = importlib.util.spec_from_file_location("linear_seq_default_config", DEFAULT_CONFIG)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config().data


def write_files(folder, contents: dict) -> str:
  """Writes {relative name: str or bytes} under folder; returns the folder path."""
  for name, content in contents.items():
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
  return str(folder)


TEXT = ("Now is the winter of our discontent made glorious summer by this sun of York; and all the clouds "
        "that lour'd upon our house in the deep bosom of the ocean buried.\n")


def tiny(name: str, **overrides) -> ml_collections.ConfigDict:
  """configs/<name>.py:tiny=True with dotted overrides, e.g. tiny('mqar', **{'train.num_steps': 6})."""
  config = config_lib.load_sibling(os.path.join(CONFIGS, f"{name}.py"), name).get_config("tiny=True")
  return config_lib.apply_overrides(config, overrides)


# tests/test_train.py's and test_faults.py's runs: mqar tiny=True, a train line every step, the evaluation before
# the last on 1 batch, and its batches of 8 as 2 micro-batches (test_exact_resume then checks that resuming stays
# bitwise with gradient accumulation). Subprocess runs pass the same as --config flags (mqar_flags).
MQAR_OVERRIDES = {"train.log_every": 1, "eval.interim_max_batches": 1, "train.grad_accum_steps": 2}


def mqar(**overrides) -> ml_collections.ConfigDict:
  """tiny('mqar') with MQAR_OVERRIDES (the runs share their compiled steps)."""
  return tiny("mqar", **{**MQAR_OVERRIDES, **overrides})


def mqar_flags(**overrides) -> list[str]:
  """The command-line flags of mqar(**overrides) for `python -m linear_seq.main`."""
  return ["--config=configs/mqar.py:tiny=True",
          *(f"--config.{k}={v}" for k, v in {**MQAR_OVERRIDES, **overrides}.items())]


def rel_rms(a, b) -> float:
  """RMS(a − b) / RMS(b) in float64 (complex: over real and imaginary parts); 0 when both are all zero.
  Non-finite values give inf."""
  a, b = np.asarray(a), np.asarray(b)
  if np.iscomplexobj(a) or np.iscomplexobj(b):
    a, b = np.stack([a.real, a.imag]), np.stack([b.real, b.imag])
  a = np.asarray(a, np.float64)
  b = np.asarray(b, np.float64)
  if a.shape != b.shape:
    raise ValueError(f"shape mismatch: {a.shape} vs {b.shape}")
  if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
    return float("inf")
  err = np.sqrt(np.mean((a - b) ** 2)) if a.size else 0.0
  ref = np.sqrt(np.mean(b ** 2)) if b.size else 0.0
  if ref == 0.0:
    return 0.0 if err == 0.0 else float("inf")
  return float(err / ref)


def assert_close(actual, expected, tol: float, what: str = "") -> None:
  """Asserts rel_rms(actual, expected) ≤ tol for arrays or matching pytrees of arrays."""
  leaves_a, tree_a = jax.tree.flatten(actual)
  leaves_e, tree_e = jax.tree.flatten(expected)
  assert tree_a == tree_e, f"{what}: structure {tree_a} != {tree_e}"
  for i, (a, e) in enumerate(zip(leaves_a, leaves_e)):
    err = rel_rms(a, e)
    label = f"{what}[{i}]" if len(leaves_a) > 1 else what
    assert err <= tol, f"{label}: rel_rms {err:.3g} > {tol:.3g} (shape {np.shape(e)})"


def random_like(key, tree, dtype=None):
  """Standard-normal arrays with the shapes (and dtypes, unless given) of a pytree's leaves."""
  leaves, treedef = jax.tree.flatten(tree)
  keys = jax.random.split(key, max(len(leaves), 1))
  out = [jax.random.normal(k, np.shape(x), dtype or jnp.asarray(x).dtype)
         for k, x in zip(keys, leaves)]
  return jax.tree.unflatten(treedef, out)


def vjp_grads(f: Callable, args: Sequence, cotangents, argnums: Sequence[int] | None = None):
  """Gradients of Σ ⟨f(*args), cotangents⟩ wrt args[i] for i in argnums (default: all).

  `cotangents` matches f's output pytree (e.g. `random_like(key, f(*args))`); entries of args
  that are None are skipped. Returns a tuple aligned with argnums.
  """
  if argnums is None:
    argnums = [i for i, a in enumerate(args) if a is not None]
  argnums = tuple(argnums)

  def f_of(*diff):
    full = list(args)
    for i, d in zip(argnums, diff):
      full[i] = d
    return f(*full)

  out, pullback = jax.vjp(f_of, *[args[i] for i in argnums])
  cot = jax.tree.map(lambda c, o: jnp.asarray(c, jnp.asarray(o).dtype), cotangents, out)
  return pullback(cot)


# linear_recurrence test cases (tests/ops/test_recurrence.py, test_chunk.py): float32 ops vs float64 references.
VALUE_TOL = 1e-5  # values (o, final state) vs the float64 loop reference, relative RMS
GRAD_TOL = 2e-5   # gradients vs the float64 recurrent mode, relative RMS


def make_inputs(T, K, V, gate, strength, resets, init, seed=0, B=2, H=2):
  """Random q, k, v [B,T,H,·], log_decay of the given shape/strength (−inf resets), state."""
  r = np.random.default_rng(seed)
  q = r.normal(size=(B, T, H, K)).astype(np.float32)
  k = r.normal(size=(B, T, H, K)).astype(np.float32)
  v = r.normal(size=(B, T, H, V)).astype(np.float32)
  s0 = r.normal(size=(B, H, K, V)).astype(np.float32) if init else None
  if gate is None:
    return q, k, v, None, s0
  g = random_log_decay(r, gate, strength, resets, (B, T, H, K))
  return q, k, v, g.astype(np.float32), s0


def random_log_decay(r, gate, strength, resets, shape_BTHK):
  """log α of a gate kind ('fixed' [H], 'scalar' [B,T,H], 'vector' [B,T,H,K]) and strength ('weak' −0.01..−0.1,
  'strong' −15..−25 per step, 'mixed' 30% strong), with −inf resets at T//3 and T−1 when asked (float64)."""
  B, T, H, K = shape_BTHK
  shape = {"fixed": (H,), "scalar": (B, T, H), "vector": (B, T, H, K)}[gate]
  weak = -r.uniform(0.01, 0.1, size=shape)
  strong = -r.uniform(15.0, 25.0, size=shape)
  g = {"weak": weak, "strong": strong, "mixed": np.where(r.random(shape) < 0.3, strong, weak)}[strength]
  if resets:
    g[:, [T // 3, T - 1]] = -np.inf
  return g


def hlo_dots(hlo: str) -> list[str]:
  """The dot_general lines of a lowered program's StableHLO text."""
  return [line for line in hlo.splitlines() if "dot_general" in line]


def count_bf16_dots(hlo: str) -> int:
  """The dots whose two operands are bf16 and whose result is float32 (the precision policy's products,
  ops/precision.py); asserts that no dot returns bf16."""
  dots = hlo_dots(hlo)
  assert not any("xbf16>" in line.rsplit("->", 1)[-1] for line in dots), "a product returns bf16"

  def bf16_to_f32(line: str) -> bool:
    operands, result = line.rsplit(":", 1)[-1].split("->")
    return operands.count("xbf16>") == 2 and result.strip().endswith("xf32>")

  return sum(map(bf16_to_f32, dots))


def recurrence_cotangents(q, v, s0):
  """Fixed random cotangents for (o, S) of linear_recurrence on these inputs."""
  B_, T, H_, K = q.shape
  out = (np.zeros((B_, T, H_, v.shape[-1]), np.float32), np.zeros((B_, H_, K, v.shape[-1]), np.float32))
  return random_like(jax.random.PRNGKey(1), out)


@functools.lru_cache(maxsize=None)
def _recurrence_vjp(mode, chunk_size, has_g, has_s0):
  """Jitted (o, S, grads) of linear_recurrence; grads of ⟨(o, S), cot⟩ wrt q, k, v[, g][, s0]."""
  def f(q, k, v, g, s0, cot):
    def run(q, k, v, g, s0):
      return ops.linear_recurrence(q, k, v, g, initial_state=s0, mode=mode, chunk_size=chunk_size)
    out = run(q, k, v, g, s0)
    return out, vjp_grads(run, (q, k, v, g, s0), cot)
  return jax.jit(f)


def run_recurrence(mode, chunk_size, q, k, v, g, s0, cot):
  """(o, S), grads of ⟨(o, S), cot⟩ wrt q, k, v[, g][, s0] for one linear_recurrence mode (jitted once)."""
  return _recurrence_vjp(mode, chunk_size, g is not None, s0 is not None)(q, k, v, g, s0, cot)
