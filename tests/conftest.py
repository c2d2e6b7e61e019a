"""Test-wide JAX settings: exact matmuls (no TF32 on GPUs), a persistent compilation cache, and LLVM at -O0.

The suite compiles hundreds of small programs and runs each a few times, so compile time is most of its time:
XLA_FLAGS gets FAST_COMPILE_XLA_FLAG (tests/helpers.py) before the backend starts (XLA reads the flags then,
not at import), and CLI subprocesses inherit it through the environment. Measured on test_delta.py +
test_mixers.py with a cold cache: 357 s -> 171 s on one core, the same tests passing.
"""
import os

from tests.helpers import FAST_COMPILE_XLA_FLAG

# pytest-xdist workers share an accelerator when there is one: none preallocates 75% of its memory.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
if FAST_COMPILE_XLA_FLAG not in os.environ.get("XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = " ".join(filter(None, [os.environ.get("XLA_FLAGS", ""), FAST_COMPILE_XLA_FLAG]))

import jax  # noqa: E402

jax.config.update("jax_default_matmul_precision", "highest")
jax.config.update("jax_compilation_cache_dir",
                  os.environ.get("JAX_CACHE_DIR", os.path.join(os.path.dirname(__file__), "..", ".jax_cache")))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
