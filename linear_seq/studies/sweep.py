"""Sweep runner: train + evaluate every point of a config's `get_sweep()`, then write the study's report.

  python -m linear_seq.studies.sweep --config=experiments/mqar/config.py[:args] --workdir=DIR \
      [--parallel=N] [--dry_run] [--config.train.num_steps=...]
  python -m linear_seq.studies.sweep --config=experiments/mqar/config.py[:args] --workdir=experiments/mqar \
      --plots_only     # redraw a committed study's plots from its results.csv (nothing runs)

A config file defines `get_config(arg)` and `get_sweep()` (or `get_sweep(arg)`), a list of override dicts
such as `[{"model.mixer": m, "seed": s} for m in ... for s in ...]`. Each point runs in its own sub-workdir
named after its overrides (`DIR/model.mixer=gla,seed=0`) as two subprocesses,
  python -m linear_seq.main --config=FILE[:args] --workdir=SUB --config.k=v ...
  python -m linear_seq.evaluate --workdir=SUB
with their output appended to SUB/log.txt. Points whose eval.json is at the final step are skipped; an
interrupted point is rerun and the trainer resumes from its checkpoint. A failed point is reported and the
sweep goes on; the exit status is non-zero if any point failed. Each finished point prints one line (for logs
without a terminal): `[3/12] ok model.mixer=gla, seed=0: accuracy=0.912 in 4m10s; elapsed 12m30s, ETA 37m`.

Optional hooks in the config file:
  get_followup_sweep(rows[, arg]) -> more override dicts, run after the first points finish (`rows` are
      collect.collect's rows of the points run or finished so far, e.g. pick each arm's best learning rate for
      a harder setting); called again with all rows so far after those have run, until it returns no new
      point (at most MAX_FOLLOWUP_ROUNDS rounds). Follow-ups that finished in an earlier sweep join the rows
      at once, so a round holds every point whose choice is already known and they run side by side;
  get_plots([arg]) -> plot specs for linear_seq.studies.plots (default: the main metric per point);
  get_eval_args([arg]) -> extra flags for linear_seq.evaluate;
  get_extra_commands([arg]) -> [(module_args, output_file), ...] run after evaluate in each point, e.g.
      (['-m', 'linear_seq.probe', '--workdir={workdir}'], 'probe.json'); scalars in output_file join the table
      and the point counts as finished only when every output_file exists.
`--config.x=v` flags given to the sweep apply to every point (a point's own override of x wins).
`--archive=DIR` (a committed folder, e.g. experiments/mqar/points) keeps each finished point's small result files
as DIR/<point>.json and restores them into a fresh --workdir, so a study run over several sittings on different
machines skips what is already done (linear_seq.studies.archive); commit DIR as points finish.
With --parallel N on CPU, each point is pinned to one core (XLA's CPU thread pool follows the process's
affinity; XLA_FLAGS/OMP settings alone do not limit it in jax 0.10) so N single-threaded runs share the cores;
on a GPU/TPU host the points share the device without preallocating its memory (linear_seq/xla_env.py). The
flags are added to the user's XLA_FLAGS, not replacing them.
"""
import concurrent.futures
import dataclasses
import hashlib
import inspect
import json
import math
import os
import queue
import re
import shlex
import statistics
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Sequence

from absl import app
from absl import flags
import ml_collections

from linear_seq import cli
from linear_seq import config_lib
from linear_seq import xla_env
from linear_seq.studies import archive
from linear_seq.studies import collect
from linear_seq.studies import plots as plots_lib
from linear_seq.studies import protocol
from linear_seq.studies import report

_NAME_MAX = 120


# ---------------------------------------------------------------------------------------------- config files


def load_study(path: str):
  """Imports a study config file by path (config_lib.load_module); it must define get_config(arg)."""
  module = config_lib.load_module(path)
  if not hasattr(module, "get_config"):
    raise ValueError(f"config file {path!r} defines no get_config(arg)")
  return module


def call_hook(module, name: str, *args, arg: str = ""):
  """Calls module.<name>(*args) or module.<name>(*args, arg) depending on its signature; None if absent."""
  fn = getattr(module, name, None)
  if fn is None:
    return None
  n_params = len(inspect.signature(fn).parameters)
  return fn(*args, arg) if n_params > len(args) else fn(*args)


def get_points(module, arg: str = "") -> list[dict[str, Any]]:
  """The config's sweep points; a config without get_sweep() is one point with no overrides."""
  points = call_hook(module, "get_sweep", arg=arg)
  if points is None:
    return [{}]
  points = [protocol.Point(p, getattr(p, "arm", "")) for p in points]   # a protocol point keeps its arm
  if not points:
    raise ValueError("get_sweep() returned no points")
  return points


def resolve(config: ml_collections.ConfigDict, overrides: dict[str, Any]) -> ml_collections.ConfigDict:
  """config_lib.apply_overrides for a sweep point: unknown fields and wrong types raise ValueError naming it."""
  try:
    return config_lib.apply_overrides(config, overrides)
  except ValueError as e:
    raise ValueError(f"sweep point {overrides}: {e}") from None


# ---------------------------------------------------------------------------------------------- points


def format_value(value: Any) -> str:
  """A value as config_flags parses it back from the command line."""
  if isinstance(value, bool):
    return "True" if value else "False"
  if isinstance(value, float):
    return repr(value)
  if isinstance(value, (list, tuple)):
    return repr(tuple(value))
  return str(value)


def point_name(overrides: dict[str, Any]) -> str:
  """Deterministic, filesystem-safe sub-workdir name: 'model.mixer=gla,seed=0' (in the dict's order)."""
  if not overrides:
    return "base"
  parts = [f"{k}={format_value(v)}" for k, v in overrides.items()]
  name = re.sub(r"[^A-Za-z0-9._+=,-]", "_", ",".join(parts))
  if len(name) > _NAME_MAX:
    digest = hashlib.sha1(name.encode()).hexdigest()[:10]
    name = name[:_NAME_MAX - 11] + "-" + digest
  return name


@dataclasses.dataclass
class Point:
  """One sweep point: its overrides, sub-workdir and the commands that run it."""
  overrides: dict[str, Any]
  name: str
  workdir: str
  num_steps: int
  commands: list[list[str]]
  outputs: tuple[str, ...] = ()
  flat_config: dict[str, Any] = dataclasses.field(default_factory=dict)   # the resolved config, flattened
  arm: str = ""   # the study's arm label, when the point came from linear_seq.studies.protocol (protocol.Point)


def make_points(config_arg: str, workdir: str, overrides_list: list[dict[str, Any]], *,
                base_config: ml_collections.ConfigDict, global_flags: dict[str, str] | None = None,
                eval_args: Sequence[str] = (), extra_commands: Sequence[tuple[Sequence[str], str]] = (),
                python: str = sys.executable) -> list[Point]:
  """Validates every point's overrides against `base_config` and builds its commands."""
  global_flags = global_flags or {}
  points, seen = [], {}
  for overrides in overrides_list:
    resolved = resolve(base_config, overrides)
    name = point_name(overrides)
    if name in seen:
      raise ValueError(f"two sweep points map to the same sub-workdir {name!r}: {seen[name]} and {overrides}")
    seen[name] = overrides
    sub = os.path.join(workdir, name)
    flags = {**global_flags, **{k: format_value(v) for k, v in overrides.items()}}
    train = [python, "-m", "linear_seq.main", f"--config={config_arg}", f"--workdir={sub}"]
    train += [f"--config.{k}={v}" for k, v in flags.items()]
    evaluate = [python, "-m", "linear_seq.evaluate", f"--workdir={sub}", *eval_args]
    extra = [[python, *(a.format(workdir=sub) for a in args)] for args, _ in extra_commands]
    points.append(Point(overrides, name, sub, int(resolved.train.num_steps), [train, evaluate, *extra],
                        tuple(out for _, out in extra_commands),
                        config_lib.flatten(config_lib.to_dict(resolved)), getattr(overrides, "arm", "")))
  return points


def is_finished(point: Point) -> bool:
  """eval.json exists and was written at the final training step (and the extra commands' outputs exist)."""
  if not all(os.path.exists(os.path.join(point.workdir, out)) for out in point.outputs):
    return False
  path = os.path.join(point.workdir, "eval.json")
  try:
    with open(path) as f:
      return int(json.load(f).get("step", -1)) >= point.num_steps
  except (OSError, ValueError):
    return False


def dry_run_lines(points: Sequence[Point]) -> list[str]:
  """One shell line per point: train && evaluate (with `python`, for a cluster launcher)."""
  lines = []
  for p in points:
    cmds = [shlex.join(["python", *c[1:]]) for c in p.commands]
    lines.append(" && ".join(cmds))
  return lines


# ---------------------------------------------------------------------------------------------- running


def _run_point(point: Point, env: dict[str, str], cpu: int | None) -> dict[str, Any]:
  """Runs a point's commands in order (stopping at the first failure); returns its status record."""
  os.makedirs(point.workdir, exist_ok=True)
  record_path = os.path.join(point.workdir, "sweep_point.json")
  previous = {}
  if os.path.exists(record_path):
    with open(record_path) as f:
      previous = json.load(f)
  preexec = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
  start, returncode, failed_command = time.time(), 0, None
  with open(os.path.join(point.workdir, "log.txt"), "a") as log:
    for cmd in point.commands:
      log.write(f"\n$ {shlex.join(cmd)}\n")
      log.flush()
      proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, preexec_fn=preexec)
      if proc.returncode != 0:
        returncode, failed_command = proc.returncode, shlex.join(cmd)
        break
  wall = time.time() - start
  record = {
      "name": point.name, "overrides": point.overrides, "commands": [shlex.join(c) for c in point.commands],
      "status": "ok" if returncode == 0 else "failed", "returncode": returncode,
      "failed_command": failed_command, "attempts": previous.get("attempts", 0) + 1,
      # Summed over attempts, so a resumed point reports its whole run time.
      "wall_time": previous.get("wall_time", 0.0) + wall,
  }
  with open(record_path, "w") as f:
    json.dump(record, f, indent=1)
  return record


def _duration(seconds: float) -> str:
  seconds = int(round(seconds))
  return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else (
      f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s")


def point_metric(workdir: str) -> str:
  """The point's main result from its eval.json ('accuracy=0.912', else bits/byte or eval loss), or ''."""
  try:
    with open(os.path.join(workdir, "eval.json")) as f:
      ev = json.load(f)
  except (OSError, ValueError):
    return ""
  for key in ("accuracy", "bits_per_byte", "eval_loss"):
    if isinstance(ev.get(key), (int, float)):
      return f"{key}={ev[key]:.4g}"
  return ""


class Progress:
  """One line per finished point: index/total, status, the point's overrides, its metric, its time, the
  sweep's elapsed time and an ETA (the mean time of the points run so far, `parallel` at a time)."""

  def __init__(self, total: int, parallel: int = 1, clock: Callable[[], float] = time.time):
    self.total, self.parallel, self.clock = total, parallel, clock
    self.start, self.done, self.walls = clock(), 0, []
    self.lock = threading.Lock()

  def line(self, point: Point, rec: dict[str, Any]) -> str:
    with self.lock:
      self.done += 1
      self.walls.append(float(rec.get("wall_time", 0.0)))
      elapsed, left = self.clock() - self.start, self.total - self.done
      eta = statistics.fmean(self.walls) * math.ceil(left / self.parallel) if left else 0.0
      overrides = ", ".join(f"{k}={format_value(v)}" for k, v in point.overrides.items()) or "(no overrides)"
      metric = point_metric(point.workdir) if rec["status"] == "ok" else ""
      failed = f" (see {os.path.join(point.workdir, 'log.txt')})" if rec["status"] != "ok" else ""
      return (f"[{self.done}/{self.total}] {rec['status']} {overrides}" + (f": {metric}" if metric else "")
              + f" in {_duration(rec.get('wall_time', 0.0))}{failed}; elapsed {_duration(elapsed)}, "
              + (f"ETA {_duration(eta)}" if left else "done"))


def run_points(points: Sequence[Point], *, parallel: int = 1, log: Callable[[str], None] = print,
               env: dict[str, str] | None = None, archive_dir: str = "") -> dict[str, dict[str, Any]]:
  """Runs the unfinished points, `parallel` at a time; returns {name: status record}. With archive_dir, each
  point that finishes is archived there at once (archive.save_point) and finished points are first restored from it
  (archive.sync)."""
  if parallel < 1:
    raise ValueError(f"--parallel must be >= 1, got {parallel}")
  base_env = dict(os.environ if env is None else env)
  # The points run from the repository root, so linear_seq imports even when not installed.
  repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  base_env["PYTHONPATH"] = os.pathsep.join(filter(None, [repo, base_env.get("PYTHONPATH", "")]))
  platform = xla_env.platform_hint(base_env)
  if parallel > 1:  # CPU: single-threaded points, each pinned to a core; accelerators: no preallocation
    base_env = xla_env.parallel_point_env(base_env, platform)
  pin = parallel > 1 and platform == "cpu"
  cpus = sorted(os.sched_getaffinity(0))
  slots: queue.Queue = queue.Queue()
  for i in range(parallel):
    slots.put(cpus[i % len(cpus)] if pin else None)

  if archive_dir:
    archive.sync(points, archive_dir, is_finished, log)
  results, todo = {}, []
  for p in points:
    if is_finished(p):
      log(f"[skip] {p.name} (eval.json at step {p.num_steps})")
      results[p.name] = {"name": p.name, "status": "skipped"}
    else:
      todo.append(p)

  progress = Progress(len(todo), parallel)

  def work(p: Point):
    cpu = slots.get()
    try:
      resumed = os.path.isdir(os.path.join(p.workdir, "checkpoints"))
      log(f"[start] {p.name}" + (" (resuming)" if resumed else "") + (f" on cpu {cpu}" if cpu is not None else ""))
      rec = _run_point(p, base_env, cpu)
      if archive_dir and rec["status"] == "ok" and is_finished(p):
        archive.save_point(archive_dir, p, log)
      log(progress.line(p, rec))
      return rec
    finally:
      slots.put(cpu)

  with concurrent.futures.ThreadPoolExecutor(max_workers=parallel) as pool:
    for rec in pool.map(work, todo):
      results[rec["name"]] = rec
  return results


# ---------------------------------------------------------------------------------------------- entry point


# get_followup_sweep is called again with every row so far until it returns no new point (a choice can depend
# on a follow-up's result: MQAR's main grid needs the pilot's extra learning rate first); a bound on the rounds.
MAX_FOLLOWUP_ROUNDS = protocol.MAX_ROUNDS


def _new_followups(module, arg: str, points: list, rows: list[dict]) -> list[dict]:
  """The hook's follow-up overrides whose points are not among `points` yet (each once)."""
  if not hasattr(module, "get_followup_sweep"):
    return []
  names, more = {p.name for p in points}, []
  for o in call_hook(module, "get_followup_sweep", rows, arg=arg) or []:
    if point_name(o) not in names:
      names.add(point_name(o))
      more.append(o)
  return more


def _next_round(module, arg: str, points: list, statuses: dict, make: Callable[[list[dict]], list]) -> list:
  """The next round's points: the hook's follow-ups for the rows so far, then, while some of those have already
  finished (in an earlier sweep), the follow-ups their rows choose, and so on. A round then holds every point
  whose choice is known (run side by side with --parallel), not only the first link of a chain whose other
  links are finished. The hook sees the rows of run or finished points only, never of points still to run."""
  extra: list = []
  for _ in range(MAX_FOLLOWUP_ROUNDS):
    known = points + extra
    done = [p for p in known if p.name in statuses or is_finished(p)]
    more = _new_followups(module, arg, known, collect.collect(done, statuses))
    if not more:
      break
    extra += make(more)
  return extra


def redraw_plots(config_arg: str, workdir: str, *, base_config: ml_collections.ConfigDict,
                 log: Callable[[str], None] = print) -> list[str]:
  """--plots_only: the study's plots redrawn, nothing run and results.{csv,md} left as they are. The rows come
  from the points' sub-workdirs where they exist (with the follow-up points that have a sub-workdir), else from DIR/results.csv and DIR/curves.json (a committed
  study; without curves.json, which sweeps write since 2026-12-01, learning curves and series are skipped)."""
  path, arg = config_lib.split_spec(config_arg)
  module = load_study(path)
  # the extra commands' outputs (decode.json, eval_validation_T512.json, ...) are columns the plots may use
  kw = dict(base_config=base_config, extra_commands=list(call_hook(module, "get_extra_commands", arg=arg) or []))
  points = make_points(config_arg, workdir, get_points(module, arg), **kw)
  csv_path = os.path.join(workdir, "results.csv")
  if any(os.path.isdir(p.workdir) for p in points) or not os.path.exists(csv_path):
    ran = lambda overrides: [p for p in make_points(config_arg, workdir, overrides, **kw) if os.path.isdir(p.workdir)]
    # the follow-up points that have run, chosen as the sweep would
    _, rows = protocol.replay([p.overrides for p in points], lambda rows: call_hook(
        module, "get_followup_sweep", rows, arg=arg) or [], lambda overrides: collect.collect(ran(overrides)))
  else:
    rows = collect.rows_from_csv(csv_path, base_config, {p.name: p.overrides for p in points})
    curves = os.path.exists(os.path.join(workdir, collect.CURVES_FILE))
    log(f"sweep: plots from {csv_path} ({len(rows)} rows; no sub-workdirs"
        + (f", curves from {collect.CURVES_FILE})" if curves else f" and no {collect.CURVES_FILE}: no learning curves)"))
  specs = call_hook(module, "get_plots", arg=arg)
  files = plots_lib.draw(specs, rows, workdir)
  drawn = {os.path.splitext(f)[0] for f in files}
  skipped = [s["file"] for s in specs or () if os.path.splitext(s["file"])[0] not in drawn]
  log("sweep: drew " + (", ".join(files) or "nothing") + (f"; no data for {', '.join(skipped)}" if skipped else ""))
  return files


def run_sweep(config_arg: str, workdir: str, *, base_config: ml_collections.ConfigDict,
              global_flags: dict[str, str] | None = None, parallel: int = 1, dry_run: bool = False,
              command: str = "", log: Callable[[str], None] = print, plots_only: bool = False,
              archive_dir: str = "") -> int:
  """Runs (or with dry_run prints) the sweep, then writes the plots and DIR/results.{csv,md}; returns the exit code.

  collect -> plots -> report: the rows of every point, the study's plots drawn from them, then the tables.
  plots_only: redraw_plots (nothing runs). archive_dir: finished points are archived there as they finish and
  restored from it into their sub-workdirs (linear_seq.studies.archive), so a sweep continued on another
  machine from a commit of that folder skips them."""
  if plots_only:
    if archive_dir:
      archive.restore_all(archive_dir, workdir, log)
    redraw_plots(config_arg, workdir, base_config=base_config, log=log)
    return 0
  path, arg = config_lib.split_spec(config_arg)
  module = load_study(path)
  eval_args = list(call_hook(module, "get_eval_args", arg=arg) or [])
  extra_commands = list(call_hook(module, "get_extra_commands", arg=arg) or [])
  kw = dict(base_config=base_config, global_flags=global_flags, eval_args=eval_args, extra_commands=extra_commands)
  points = make_points(config_arg, workdir, get_points(module, arg), **kw)
  if dry_run:
    for line in dry_run_lines(points):
      print(line)
    if hasattr(module, "get_followup_sweep"):
      print("# + follow-up points chosen from these points' results by get_followup_sweep(); "
            "rerun with --dry_run once they have finished to list them")
    return 0

  os.makedirs(workdir, exist_ok=True)
  log(f"sweep: {len(points)} points in {workdir}" + (f", {parallel} in parallel" if parallel > 1 else ""))
  if archive_dir:
    log(f"sweep: finished points are archived in {archive_dir}")

  def make(more: list[dict]) -> list[Point]:
    made = make_points(config_arg, workdir, more, **kw)
    if archive_dir:   # before _next_round asks which of them finished
      archive.sync(made, archive_dir, is_finished, log)
    return made

  statuses = run_points(points, parallel=parallel, log=log, archive_dir=archive_dir)
  for round_ in range(1, MAX_FOLLOWUP_ROUNDS + 1):
    extra = _next_round(module, arg, points, statuses, make)
    if not extra:
      break
    log(f"sweep: {len(extra)} follow-up points" + (f" (round {round_})" if round_ > 1 else ""))
    statuses.update(run_points(extra, parallel=parallel, log=log, archive_dir=archive_dir))
    points = points + extra

  rows = collect.collect(points, statuses)
  specs = call_hook(module, "get_plots", arg=arg)
  plot_files = plots_lib.draw(specs, rows, workdir)
  sources = sorted({s.get("source", "position_loss.json") for s in specs or () if s.get("kind") == "series"})
  curves = collect.write_curves(workdir, rows, sources)  # what --plots_only redraws the curves from
  study = getattr(module, "STUDY", os.path.basename(os.path.dirname(os.path.abspath(path))))
  files = report.write_report(workdir, rows, study=study, command=command, plot_files=plot_files,
                              point_env=xla_env.parallel_point_env(
                                  {}, xla_env.platform_hint()) if parallel > 1 else None) + plot_files + [curves]
  failed = [n for n, s in statuses.items() if s["status"] == "failed"]
  done = sum(s["status"] == "ok" for s in statuses.values())
  skipped = sum(s["status"] == "skipped" for s in statuses.values())
  log(f"sweep: {done} ran, {skipped} skipped, {len(failed)} failed; wrote " + ", ".join(files))
  for n in failed:
    log(f"  FAILED {n}: see {os.path.join(workdir, n, 'log.txt')}")
  return 1 if failed else 0


def define_flags() -> None:
  """The CLI flags (defined only when run as a program, so importing this module defines no absl flags)."""
  flags.DEFINE_string("config", None, "Study config file[:args] with get_config(arg) and get_sweep().")
  flags.DEFINE_string("workdir", None, "Sweep directory: one sub-workdir per point, results.csv/md, plots.")
  flags.DEFINE_integer("parallel", 1, "Points run at once, each pinned to one CPU core when > 1.")
  flags.DEFINE_bool("dry_run", False, "Print the points' commands (for a cluster launcher) instead of running.")
  flags.DEFINE_string("archive", "", "Folder (e.g. experiments/mqar/points, committed) where each finished point is "
                      "kept as DIR/<point>.json and from which a fresh --workdir is restored, so the sweep skips "
                      "the points finished on another machine ('' = none).")
  flags.DEFINE_bool("plots_only", False, "Only redraw the plots (PNG + PDF), from the sub-workdirs or, without "
                    "them, from DIR/results.csv; runs nothing and leaves results.csv/md as they are.")
  cli.define_verbose_flag()
  flags.mark_flags_as_required(["config", "workdir"])


def _parse_flags(argv: list[str]) -> list[str]:
  """absl parses the sweep's flags; the --config.a.b=value overrides (for every point) stay in argv for main."""
  overrides = [arg for arg in argv[1:] if arg.startswith("--config.")]
  return cli.parse_flags([arg for arg in argv if arg not in overrides]) + overrides


def main(argv: Sequence[str]) -> None:
  """User errors (a config that does not load, an unknown field, a bad plot spec, --parallel=0) are one line
  and exit 1 (--verbose adds the traceback); a failed point is reported and the sweep goes on."""
  flag_values = flags.FLAGS
  with cli.one_line_errors(ValueError, FileNotFoundError):
    # the one way configs load: unknown fields and wrong types fail here, before any point runs
    global_flags, unexpected = config_lib.override_args(argv[1:])
    base_config = config_lib.apply_overrides(config_lib.load_config(flag_values.config), global_flags)
    if unexpected:
      raise ValueError(f"unexpected arguments: {' '.join(unexpected)}")
    command = shlex.join(["python", "-m", "linear_seq.studies.sweep", *sys.argv[1:]])
    code = run_sweep(flag_values.config, flag_values.workdir, base_config=base_config, global_flags=global_flags,
                     parallel=flag_values.parallel, dry_run=flag_values.dry_run, command=command,
                     plots_only=flag_values.plots_only, archive_dir=flag_values.archive)
  sys.exit(code)


if __name__ == "__main__":
  define_flags()
  app.run(main, flags_parser=_parse_flags)
