"""The XLA and JAX environment the code sets for its own processes, in one place.

XLA reads XLA_FLAGS once, when the first backend starts, so flags are added to the environment before any JAX
computation (the entry points call these first). Flags are added to a user's XLA_FLAGS, never replacing them:
a flag the user already set keeps the user's value. An unknown XLA flag aborts the process, so every flag here
is one that the CPU build accepts too (tests/test_xla_env.py starts a CPU process with each).
"""
import importlib.util
import os
from typing import Mapping, Sequence

# Exact resume on GPU: XLA's scatter-adds (the embedding gradient) and some reductions are otherwise
# nondeterministic there, so two runs from one checkpoint could differ in the last bits. Ignored on CPU and TPU
# (deterministic already).
DETERMINISTIC_FLAGS = ("--xla_gpu_deterministic_ops=true",)
# One XLA thread (sweep points run side by side, each pinned to a core: CPU only).
SINGLE_THREAD_XLA_FLAGS = ("--xla_cpu_multi_thread_eigen=false",)
SINGLE_THREAD_ENV = {
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "TF_NUM_INTRAOP_THREADS": "1",
    "TF_NUM_INTEROP_THREADS": "1",
}
# Several JAX processes sharing an accelerator (pytest workers, parallel sweep points): each allocates what it
# needs instead of 75% of the device's memory at start-up.
NO_PREALLOCATE = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}


def merge_flags(existing: str, added: Sequence[str]) -> str:
  """`existing` XLA_FLAGS with `added` appended, except those whose name the existing flags already set."""
  have = {f.split("=", 1)[0] for f in existing.split()}
  return " ".join([*existing.split(), *(f for f in added if f.split("=", 1)[0] not in have)])


def add_flags(added: Sequence[str], environ: "os._Environ | dict[str, str]" = os.environ) -> None:
  """Adds XLA flags to `environ` (before the backend starts, or they have no effect)."""
  environ["XLA_FLAGS"] = merge_flags(environ.get("XLA_FLAGS", ""), added)


def platform_hint(environ: Mapping[str, str] = os.environ) -> str:
  """'cpu', 'gpu' or 'tpu' without starting a backend (starting one in a parent process would take GPU memory
  and a CUDA context): JAX_PLATFORMS when set, else which accelerator plugin is installed."""
  platforms = environ.get("JAX_PLATFORMS", "").split(",")[0].strip().lower()
  if platforms:
    return {"cuda": "gpu", "rocm": "gpu"}.get(platforms, platforms)
  if any(importlib.util.find_spec(m) for m in ("jax_cuda12_plugin", "jax_cuda13_plugin", "jax_rocm_plugin")):
    return "gpu"
  if importlib.util.find_spec("libtpu"):
    return "tpu"
  return "cpu"


def parallel_point_env(base: Mapping[str, str], platform: str) -> dict[str, str]:
  """The environment of one of several points run at once: on CPU single-threaded (each is pinned to a core);
  on an accelerator, no preallocation (the points share the device's memory)."""
  env = {**base, **NO_PREALLOCATE}
  if platform == "cpu":
    env.update(SINGLE_THREAD_ENV)
    add_flags(SINGLE_THREAD_XLA_FLAGS, env)
  return env
