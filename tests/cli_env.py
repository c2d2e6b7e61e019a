"""Environment for tests that run the linear_seq CLIs as subprocesses."""
import os

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cli_env() -> dict[str, str]:
  """Subprocess env: repo importable, the tests' persistent compilation cache (reruns compile nothing)."""
  env = dict(os.environ)
  env["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO, env.get("PYTHONPATH", "")]))
  env.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(REPO, ".jax_cache"))
  env.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.5")
  return env
