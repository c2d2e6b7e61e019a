"""Test-wide JAX settings: exact matmuls (no TF32 on GPUs) and a persistent compilation cache."""
import os

import jax

jax.config.update("jax_default_matmul_precision", "highest")
jax.config.update("jax_compilation_cache_dir",
                  os.environ.get("JAX_CACHE_DIR", os.path.join(os.path.dirname(__file__), "..", ".jax_cache")))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
