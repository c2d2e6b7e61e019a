"""What the studies share: the environment a result was measured in, markdown tables, XLA's compiled memory,
timing one call, the mean ± std over seeds, the flags of a study's table script, and a probe script's main."""
import importlib.metadata
import os
import platform
import statistics
import sys
import time
from typing import Any, Callable, Iterable, Sequence

from absl import flags
import jax

from linear_seq import checkpoint

# Libraries whose versions a study's results.md records.
LIBRARIES = ("jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "numpy", "ml-collections", "grain")


def versions(libraries: Iterable[str] = LIBRARIES) -> dict[str, str]:
  """{library: installed version or 'not installed'}."""
  out = {}
  for lib in libraries:
    try:
      out[lib] = importlib.metadata.version(lib)
    except importlib.metadata.PackageNotFoundError:
      out[lib] = "not installed"
  return out


def xla_flags() -> str:
  return os.environ.get("XLA_FLAGS", "")


def load_average() -> float | None:
  """The 1-minute load average (None where the OS has none): how busy the machine was."""
  return os.getloadavg()[0] if hasattr(os, "getloadavg") else None


def environment(point_env: dict[str, str] | None = None) -> dict[str, str]:
  """Library versions, Python, platform and the XLA flags of this process (and of a sweep's points)."""
  env = {"python": platform.python_version(), "platform": platform.platform(), "cpus": str(os.cpu_count()),
         **versions(), "XLA_FLAGS": xla_flags()}
  if point_env:
    env["XLA_FLAGS (points)"] = point_env.get("XLA_FLAGS", "")
    env["points"] = "single-threaded, one CPU core each (affinity)"
  return env


def md_table(header: Sequence[Any], body: Iterable[Sequence[Any]]) -> list[str]:
  """A markdown table's lines ('|' inside a cell escaped)."""
  lines = ["| " + " | ".join(map(str, header)) + " |", "|" + "|".join("---" for _ in header) + "|"]
  return lines + ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in body]


def compiled_memory(compiled) -> int | None:
  """XLA's compiled memory of a `jax.jit(f).lower(...).compile()` result: temp + arguments + outputs, bytes."""
  stats = compiled.memory_analysis()
  if stats is None:
    return None
  return int(stats.temp_size_in_bytes + stats.argument_size_in_bytes + stats.output_size_in_bytes)


def timed(fn: Callable[..., Any], *args) -> tuple[Any, float, float]:
  """(fn(*args) once it is ready, wall seconds, process CPU seconds); CPU time sums XLA's threads and is less
  sensitive than wall time to other processes competing for the cores."""
  t0, c0 = time.perf_counter(), time.process_time()
  out = jax.block_until_ready(fn(*args))
  return out, time.perf_counter() - t0, time.process_time() - c0


def mean_std(values: Sequence[float]) -> tuple[float, float, int]:
  """(mean, sample std (0 for one value), n) over seeds."""
  return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0, len(values)


def define_table_flags(workdir: str, archive_dir: str) -> None:
  """--workdir, --archive and --out of a study's table script (experiments/<study>/table.py), defined when it
  runs as a script only (tests load several of them in one process, and absl flags are process-global)."""
  flags.DEFINE_string("workdir", workdir, "The study's sweep directory.")
  flags.DEFINE_string("archive", archive_dir, "The study's archive (sweep --archive): its points are restored into "
                      "--workdir first; '' = none.")
  flags.DEFINE_string("out", "", "Write the markdown here (a table script may write its rows as .csv beside it); "
                      "'' = stdout only.")


def emit_markdown(text: str, out: str = "") -> str:
  """Prints a table script's markdown and writes it to `out` too ('' = print only); returns it."""
  print(text)
  if out:
    with open(out, "w") as f:
      f.write(text)
  return text


def print_probe(header: Sequence[str], rows_of: Callable[[str], list[list[str]]], workdirs: Sequence[str]) -> None:
  """A probe script's main (experiments/<study>/<probe>.py reading trained workdirs): the markdown table of every
  row rows_of(workdir) gives, printed as each workdir finishes. A workdir it cannot read (CheckpointError or
  ValueError) prints one `error:` line to stderr and the others still run; SystemExit(1) after them if any
  failed, and at once without workdirs."""
  if not workdirs:
    raise SystemExit("error: give one or more trained workdirs (runs/<sweep>/<point>)")
  for line in md_table(header, []):
    print(line)
  failed = 0
  for workdir in workdirs:
    try:
      found = rows_of(workdir)
    except (checkpoint.CheckpointError, ValueError) as e:
      print(f"error: {e}", file=sys.stderr)
      failed += 1
      continue
    for line in md_table(header, found)[2:]:
      print(line, flush=True)
  if failed:
    raise SystemExit(1)
