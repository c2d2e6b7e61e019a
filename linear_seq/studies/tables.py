"""A tuned study's tables, once for every study: the rows of its points (the follow-up rounds replayed), the
learning-rate pilot table, the per-cell table (per-seed values, mean ± sample std, seeds reaching a threshold,
first step reaching it), the separation verdict between two arms (every seed of one better than every seed of the
other; beside it, where the seeds allow, Welch's t-test, one-sided, with its p-value and n), and markdown + CSV
out.

  python -m linear_seq.studies.tables --table=experiments/mqar/table.py --workdir=runs/mqar \
      --out=experiments/mqar/study.md      # restores the study's points folder into --workdir, writes study.md/.csv

A study's table script (experiments/<study>/table.py, or its config file) defines `write(workdir, archive_dir,
out[, arg])` from these pieces; the CLI loads it by path (`--table=FILE[:arg]`, the arg passed on) and runs it on
the study's points folder (its ARCHIVE unless --archive).
"""
import csv
import math
import os
from typing import Any, Callable, Iterable, Sequence

from absl import app
from absl import flags
import numpy as np

from linear_seq import cli
from linear_seq import config_lib
from linear_seq.studies import archive
from linear_seq.studies import collect
from linear_seq.studies import common
from linear_seq.studies import protocol
from linear_seq.studies import sweep

Row = dict[str, Any]
MISSING = "…"


def study_rows(config: str, workdir: str, arg: str = "", followup_args: Sequence[str] | None = None,
               extra_commands: Sequence = (), first: Sequence[dict] | None = None, hook: Callable | None = None,
               base_arg: str | None = None) -> list[Row]:
  """The rows of a study's points that have a sub-workdir in `workdir` (finished or not): its first points, then
  its follow-up rounds replayed as the sweep chooses them (protocol.replay: bounded). `followup_args`: the
  config args whose follow-ups are all asked each round (default: `arg`); `hook`: instead of the config's
  get_followup_sweep(rows, arg); `first`: instead of get_sweep(arg)."""
  module = config_lib.load_module(config)
  spec = f"{config}:{arg}" if arg else config
  base = module.get_config(arg if base_arg is None else base_arg)
  args = [arg] if followup_args is None else list(followup_args)
  ask = hook or (lambda rows: [o for a in args for o in sweep.call_hook(module, "get_followup_sweep", rows, arg=a)
                                or ()])   # a study without follow-ups: its first points only

  def ran(overrides):
    made = sweep.make_points(spec, workdir, list(overrides), base_config=base, extra_commands=list(extra_commands))
    return collect.collect([p for p in made if os.path.isdir(p.workdir)])

  first = list(module.get_sweep(arg)) if first is None else list(first)
  return protocol.replay(first, ask, ran)[1]


def restored(load_rows: Callable[[str], list[Row]], workdir: str, archive_dir: str = "") -> list[Row]:
  """load_rows(workdir) once the points archived in `archive_dir` are restored into it ('' = none)."""
  if archive_dir:
    archive.restore_all(archive_dir, workdir)
  return load_rows(workdir)


def ok(rows: Iterable[Row], metric: str) -> list[Row]:
  """The finished rows with a number for `metric`."""
  return [r for r in rows if r.get("status") == "ok" and isinstance(r.get(metric), (int, float))]


def fmt(value: float | None, digits: int = 3) -> str:
  """A number to `digits` decimals; '…' for None or NaN."""
  if not isinstance(value, (int, float)) or value != value:
    return MISSING
  return f"{value:.{digits}f}"


def mean_std(values: Sequence[float], digits: int = 3, std: bool = True, one: str = "") -> str:
  """'mean ± sample std' over seeds ('…' for none; one value: the mean followed by `one`, e.g. ' (1 seed)')."""
  if not values:
    return MISSING
  m, sd, n = common.mean_std(values)
  return f"{m:.{digits}f}" + ((f" ± {sd:.{digits}f}" if std else "") if n > 1 else one)


def per_seed(values: Sequence[float], planned: int, digits: int = 3) -> str:
  """'0.912 / 0.950 / …': each finished seed's value, '…' for each planned seed still to run."""
  return " / ".join([f"{v:.{digits}f}" for v in values] + [MISSING] * max(0, planned - len(values)))


def separated(a: Sequence[float], b: Sequence[float]) -> bool:
  """Whether two arms' seeds do not overlap (each with at least 2 seeds): every seed of one better than every
  seed of the other, in either direction."""
  return len(a) >= 2 and len(b) >= 2 and (max(a) < min(b) or max(b) < min(a))


def verdict(a: Sequence[float], b: Sequence[float], direction: str | None = None) -> str:
  """'yes' (separated), 'no' (the seeds overlap) or 'under 2 seeds' (not decided yet). With `direction` ('max':
  higher is better, 'min': lower), Welch's one-sided test that A is better than B beside it (welch_text):
  'no; p = 0.085 (Welch, one-sided, n = 3, 2)'."""
  out = "yes" if separated(a, b) else ("no" if len(a) >= 2 and len(b) >= 2 else "under 2 seeds")
  return out if direction is None or len(a) < 2 or len(b) < 2 else f"{out}; {welch_text(a, b, direction)}"


def welch(a: Sequence[float], b: Sequence[float], direction: str = "max") -> tuple[float, float, float] | None:
  """Welch's t-test (unequal variances) of "A's mean is better than B's", one-sided: (t, degrees of freedom, p),
  t = (mean A − mean B) / sqrt(s_A²/n_A + s_B²/n_B) with the sample variances, its sign turned for direction
  'min' (lower is better), df by Welch–Satterthwaite, p = P(T_df ≥ t). None where a side has under 2 seeds or
  neither side varies (t undefined)."""
  if direction not in protocol.DIRECTIONS:
    raise ValueError(f"direction must be one of {', '.join(protocol.DIRECTIONS)}, got {direction!r}")
  if len(a) < 2 or len(b) < 2:
    return None
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
  if va + vb == 0:
    return None
  from scipy import stats   # pylint: disable=g-import-not-at-top  # here: it takes ~1 s, and only a test needs it
  t = (a.mean() - b.mean()) / math.sqrt(va + vb) * (1 if direction == "max" else -1)
  df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
  return float(t), float(df), float(stats.t.sf(t, df))


def welch_text(a: Sequence[float], b: Sequence[float], direction: str = "max", digits: int = 3) -> str:
  """'p = 0.012 (Welch, one-sided, n = 3, 3)': welch()'s p-value that A is better than B and the seeds on each
  side; 'no test (under 2 seeds)' or 'no test (no spread)' where it is undefined."""
  test = welch(a, b, direction)
  if test is None:
    return "no test (" + ("under 2 seeds" if len(a) < 2 or len(b) < 2 else "no spread") + ")"
  return f"p = {test[2]:.{digits}f} (Welch, one-sided, n = {len(a)}, {len(b)})"


def first_step(row: Row, threshold: float, key: str = "eval_accuracy") -> int | None:
  """The first evaluated step at which the point's `key` reached `threshold` (a row without a learning curve,
  e.g. imported from a committed table, carries the value as 'first_step_<threshold>')."""
  if not row.get("_metrics") and f"first_step_{threshold}" in row:
    return row[f"first_step_{threshold}"]
  for m in row.get("_metrics") or ():
    if m.get(key) is not None and m[key] >= threshold:
      return int(m["step"])
  return None


def markdown(header: Sequence[Any], body: Iterable[Sequence[Any]]) -> str:
  """A markdown table, newline-terminated."""
  return "\n".join(common.md_table(header, body)) + "\n"


def pilot_table(tuning: protocol.Tuning, rows: Iterable[Row], keys: Iterable[tuple[str, Any]],
                cell: Callable[[Row], str], lead: Callable[[str, Any], Sequence[Any]] = lambda arm, key: (arm,),
                lead_header: Sequence[str] = ("arm",), provisional: bool = False, rates: Sequence[float] = ()) -> str:
  """Per (arm, key): its lead columns, the seed-0 metric at every rate of the rule ('' = not run) and the rate
  chosen ('…' until known; provisional: the grid's best while the step past its edge is pending, marked †)."""
  by_name = protocol.index(rows)
  rates = list(rates) or tuning.rule.rates()
  body = []
  for arm, key in keys:
    pilot = {x: r for x, r in tuning.pilot_rows(by_name, arm, key).items() if ok([r], tuning.rule.metric)}
    d = tuning.decide(by_name, arm, key)
    lr = d.provisional() if provisional else d.lr
    chosen = MISSING if lr is None else f"{lr:g}" + (" †" if provisional and d.lr is None else "")
    body.append([*lead(arm, key), *("" if pilot.get(x) is None else cell(pilot[x]) for x in rates), chosen])
  return markdown([*lead_header, *(f"lr {x:g}" for x in rates), "chosen"], body)


def write_csv(path: str, header: Sequence[str], body: Iterable[Sequence[Any]]) -> str:
  """A CSV file (header, then one line per row); returns its path."""
  with open(path, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(header)
    w.writerows(body)
  return path


def csv_beside(out: str) -> str:
  """study.md -> study.csv."""
  return os.path.splitext(out)[0] + ".csv"


def is_number(value: Any) -> bool:
  return isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value))


def run_script(write: Callable[..., Any], workdir: str, archive_dir: str, arg: str | None = None) -> None:
  """A study's table script run as a program: --workdir, --archive and --out (common.define_table_flags), then
  write(workdir, archive_dir, out); with `arg` (not None) also --arg (the study config's options, default `arg`),
  passed on as write(..., arg=). Exits 0 (write's returned text is not an exit status). Flags are defined only
  then: the tests load several scripts in one process."""
  common.define_table_flags(workdir, archive_dir)
  if arg is not None:
    flags.DEFINE_string("arg", arg, "The study config's options, as given to the sweep (e.g. 'seeds=3').")

  def main(argv):
    del argv
    f = flags.FLAGS
    write(f.workdir, f.archive, f.out, **({} if arg is None else {"arg": f.arg}))

  app.run(main)


def define_flags() -> None:
  flags.DEFINE_string("table", None, "The study's table script (experiments/<study>/table.py, defines write()), "
                      "FILE[:arg].")
  flags.DEFINE_string("workdir", None, "The study's sweep directory (restored from its points folder first).")
  flags.DEFINE_string("archive", None, "The points folder to restore from (default: the script's ARCHIVE); '' = "
                      "none.")
  flags.DEFINE_string("out", "", "Write the markdown here (and the rows as .csv beside it); '' = stdout only.")
  flags.mark_flags_as_required(["table", "workdir"])


def main(argv: Sequence[str]) -> None:
  del argv
  f = flags.FLAGS
  with cli.one_line_errors(ValueError, FileNotFoundError):
    path, arg = config_lib.split_spec(f.table)
    module = config_lib.load_module(path)
    if not hasattr(module, "write"):
      raise ValueError(f"{path} defines no write(workdir, archive_dir, out)")
    archive_dir = getattr(module, "ARCHIVE", "") if f.archive is None else f.archive
    if archive_dir:
      archive.restore_all(archive_dir, f.workdir)
    module.write(f.workdir, "", f.out, **({"arg": arg} if arg else {}))


if __name__ == "__main__":
  define_flags()
  app.run(main)
