"""The timer the benchmark scripts beside this file share (they run as `python experiments/benchmark/X.py`,
so this folder is on sys.path)."""
import statistics
import time

import jax


def median_ms(f, *args, n: int = 5, warmup: bool = True) -> float:
  """Median wall time of n calls of f(*args) in milliseconds (each waits for its result), after one call
  that is not timed when warmup (the compile)."""
  if warmup:
    jax.block_until_ready(f(*args))
  times = []
  for _ in range(n):
    t = time.perf_counter()
    jax.block_until_ready(f(*args))
    times.append(time.perf_counter() - t)
  return 1e3 * statistics.median(times)
