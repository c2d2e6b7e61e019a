"""A tuned study's tables, once for every study: the rows of its points (the follow-up rounds replayed), the
learning-rate pilot table, the per-cell table (cells at the chosen rate; columns: per-seed values, mean ± sample
std, seeds reaching a threshold, first step reaching it), the separation verdict between two arms (every seed of
one better than every seed of the other; beside it, where the seeds allow, Welch's t-test, one-sided, with its
p-value and n) and the tables built on it (each arm's seed spread against the others, an arm's gap to named
others), the values per evaluation length and per rate, learning curves at fixed steps, the rate and seed checks'
tables (protocol.RateCheck, protocol.SeedCheck), and markdown + CSV out.

  python -m linear_seq.studies.tables --table=experiments/mqar/config.py --workdir=runs/mqar \
      --out=experiments/mqar/study.md      # restores the study's points folder into --workdir, writes study.md/.csv

A study's table script (experiments/<study>/table.py, or its config file) defines `write(workdir, archive_dir,
out[, arg][, plots_dir])` from these pieces; the CLI loads it by path (`--table=FILE[:arg]`, the arg passed on) and
runs it on the study's points folder (its ARCHIVE unless --archive; a study with several sweep directories
declares ARCHIVE = {sub-directory of --workdir: points folder}); --plots_dir=DIR draws its plots there too.
"""
import csv
import dataclasses
import inspect
import math
import os
from typing import Any, Callable, Iterable, Mapping, Sequence

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
# What a † beside a rate means (pilot_table(provisional=True), a Cell's provisional rate).
PROVISIONAL_NOTE = ("\n† provisional: the better rate of the grid; the step past its edge (seed 0) has not "
                    "finished yet.\n")


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

  ran = lambda overrides: rows_of(spec, workdir, overrides, base, extra_commands)
  first = list(module.get_sweep(arg)) if first is None else list(first)
  return protocol.replay(first, ask, ran)[1]


def rows_of(config: str, workdir: str, overrides: Iterable[dict], base, extra_commands: Sequence = ()) -> list[Row]:
  """The rows (collect) of those of a study's points (`config`: FILE[:arg], `base` its config) that have a
  sub-workdir in `workdir`, finished or not."""
  made = sweep.make_points(config, workdir, list(overrides), base_config=base, extra_commands=list(extra_commands))
  return collect.collect([p for p in made if os.path.isdir(p.workdir)])


def borrowed_rows(config: str, workdir: str, points: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]],
                  source: str, arg: str = "") -> list[Row]:
  """Another study's rows as this study's: `points` pairs each point of that study (`config`, its options `arg`;
  its sweep directory `workdir`) with this study's point for the same run. Those that have a sub-workdir come back
  with this study's overrides, its arm in '_arm' (a protocol.Point's), '_from' = `source` and their own
  overrides in '_source_overrides'."""
  module = config_lib.load_module(config)
  ours = {protocol.key(theirs): mine for theirs, mine in points}
  extra = sweep.call_hook(module, "get_extra_commands", arg=arg) or ()
  rows = rows_of(config, workdir, [theirs for theirs, _ in points], module.get_config(arg), extra)
  for r in rows:
    mine = ours[protocol.key(r["_overrides"])]
    r["_source_overrides"], r["_overrides"] = dict(r["_overrides"]), mine
    r["_arm"], r["_from"] = getattr(mine, "arm", ""), source
  return rows


def unique_ok(rows: Iterable[Row]) -> list[Row]:
  """The finished rows, each point once (by name), in order."""
  out, seen = [], set()
  for r in rows:
    if r.get("status") == "ok" and r["name"] not in seen:
      seen.add(r["name"])
      out.append(r)
  return out


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


# A table's column: (header, item -> its cell).
Column = tuple[str, Callable[[Any], Any]]


def columns(items: Iterable[Any], spec: Sequence[Column]) -> str:
  """A markdown table with one line per item, spec's columns."""
  return markdown([header for header, _ in spec], [[cell(item) for _, cell in spec] for item in items])


def seed_columns(values: Callable[[Any], Sequence[float]], planned: int | Callable[[Any], int], label: str,
                 threshold: float | None = None, one: str = "",
                 steps: Callable[[Any], Iterable[Row]] | None = None) -> list[Column]:
  """A cell's seed columns from values(cell), its finished seeds' values: each seed's ('…' for each planned seed
  still to run; `planned`: a count, or the cell's), mean ± sample std (`one`: after a single seed's value), and,
  with a threshold, how many seeds reach it; with `steps` too (cell -> its rows), the first step at which each
  row reached it (first_step; '—': never)."""
  count = planned if callable(planned) else lambda c: planned
  spec = [(f"{label} per seed", lambda c: per_seed(values(c), count(c))),
          ("mean ± std", lambda c: mean_std(values(c), one=one))]
  if threshold is not None:
    spec.append((f"seeds ≥ {threshold}", lambda c: f"{sum(v >= threshold for v in values(c))}/{len(values(c))}"))
  if threshold is not None and steps is not None:
    first = lambda r: first_step(r, threshold)
    spec.append((f"first step ≥ {threshold}", lambda c: " / ".join("—" if t is None else str(t) for t in
                                                                   map(first, steps(c)))))
  return spec


@dataclasses.dataclass(frozen=True)
class Cell:
  """An arm at one key of a study's table (e.g. its width) at its chosen rate: the finished rows of its seeds
  there, sorted by seed; provisional: the rate is the grid's best while the step past its edge is to run."""
  arm: str
  key: Any
  lr: float
  rows: list
  provisional: bool = False


def matched_columns(arm: Callable[[Cell], str] = lambda c: c.arm, lead: Sequence[Column] = (),
                    state: Callable[[Cell], str] = lambda c: "") -> list[Column]:
  """The lead columns of a cell per arm at a parameter-matched width: the arm, `lead` (e.g. its layers), the width
  (the cell's key), its parameters, its state in floats per sequence (`state`: a note after it) and its rate (a
  provisional one marked †)."""
  return [("arm", arm), *lead, ("width", lambda c: c.key), ("params", lambda c: first_count(c.rows, "num_params")),
          ("state (floats/seq)", lambda c: first_count(c.rows, "state_size") + state(c)),
          ("lr", lambda c: f"{c.lr:g}" + " †" * c.provisional)]


def cells(tuning: protocol.Tuning, rows: Sequence[Row], keys: Iterable[tuple[str, Any]], metric: str,
          point: Callable[[str, Any, float, int], dict], provisional: bool = False,
          rate_key: Callable[[Any], Any] = lambda key: key) -> list[Cell]:
  """A Cell per (arm, key) whose rate is decided (provisional: or provisional), in `keys`' order: its rows are
  those that are point(arm, key, rate, seed) for their seed. The rate is the rule's for (arm, rate_key(key))
  (default: the key itself; a study that tunes once per arm maps every key to None)."""
  by_key, out = protocol.index(rows), []
  for arm, key in keys:
    decision = tuning.decide(by_key, arm, rate_key(key))
    lr = decision.provisional() if provisional else decision.lr
    if lr is not None:
      mine = cell_rows(rows, metric, lambda seed: point(arm, key, lr, seed))
      out.append(Cell(arm, key, lr, mine, decision.lr is None))
  return out


def cell_rows(rows: Iterable[Row], metric: str, point_of_seed: Callable[[int], dict]) -> list[Row]:
  """One cell's finished rows with a number for `metric`: those whose overrides are exactly point_of_seed(their
  seed), sorted by seed."""
  mine = [r for r in ok(rows, metric)
          if "seed" in r["_overrides"] and r["_overrides"] == dict(point_of_seed(r["_overrides"]["seed"]))]
  return sorted(mine, key=lambda r: r["_overrides"]["seed"])


def values(rows: Iterable[Row], metric: str) -> list[float]:
  """The rows' `metric` as floats (those that have a number for it)."""
  return [float(r[metric]) for r in rows if is_number(r.get(metric))]


def spread_table(by_arm: Mapping[str, Sequence[float]], direction: str = "min") -> str:
  """Per arm with a value (in order): its mean; the arms it is better than beyond the seed spread (separated,
  its mean better in `direction`); the arms whose seeds overlap its own; those with under 2 seeds on a side;
  each with the difference of means (this arm − the other)."""
  body = []
  for arm, a in by_arm.items():
    if not a:
      continue
    ma = sum(a) / len(a)
    better, within, open_ = [], [], []
    for other, b in by_arm.items():
      if other == arm or not b:
        continue
      mb = sum(b) / len(b)
      d = f"{other} ({ma - mb:+.3f})"
      if len(a) < 2 or len(b) < 2:
        open_.append(d)
      elif separated(a, b):
        if (ma < mb) if direction == "min" else (ma > mb):
          better.append(d)
      else:
        within.append(d)
    body.append([arm, f"{ma:.3f}", ", ".join(better) or "—", ", ".join(within) or "—", ", ".join(open_) or "—"])
  return markdown(["arm", "mean", "better than (seeds do not overlap)", "seeds overlap (Δ mean)",
                   "under 2 seeds on a side (Δ mean)"], body)


def gap_table(pairs: Mapping[str, Sequence[str]], by_arm: Mapping[str, Sequence[float]], direction: str,
              header: Sequence[str]) -> str:
  """Each arm of `pairs` that has a cell against its others: Δ = its mean − the other's, signed so that + means
  it is better (higher for 'max', lower for 'min'), and whether their seeds separate (verdict); 'other: …'
  while either has no value."""
  sign = 1.0 if direction == "max" else -1.0
  body = []
  for arm, others in pairs.items():
    if arm not in by_arm:
      continue
    a, out = by_arm[arm], []
    for other in others:
      b = by_arm.get(other) or []
      if not a or not b:
        out.append(f"{other}: …")
      else:
        out.append(f"{other}: {sign * (sum(a) / len(a) - sum(b) / len(b)):+.3f} ({verdict(a, b)})")
    body.append([arm, *out])
  return markdown(header, body)


def curve_table(rows: Iterable[Row], steps: Sequence[int], lead: Sequence[Column], key: str = "eval_accuracy"
                ) -> str:
  """Per row: the lead columns, then its `key` at each of `steps` ('' where it was not evaluated)."""
  at = lambda t: lambda r: next((f"{v:.3f}" for s, v in protocol.curve(r, key) if s == t), "")
  return columns(rows, [*lead, *((f"at {t:,}", at(t)) for t in steps)])


def by_length(rows: Iterable[Row], metric: str = "bits_per_byte") -> list[Row]:
  """One row per (point, evaluation length): 'eval_seq_len' and its `metric` (the training length's from
  eval.json, the others from the <metric>@T<len> columns of the extra evaluations); missing ones left out."""
  out = []
  for r in rows:
    cols = {r.get("_config", {}).get("data.seq_len"): metric}
    cols.update({int(k.split("@T")[1]): k for k in r if k.startswith(f"{metric}@T")})
    out += [{**r, "eval_seq_len": t, metric: r[c]} for t, c in sorted(cols.items())
            if t is not None and isinstance(r.get(c), (int, float))]
  return out


def length_table(by_arm: Mapping[str, Sequence[Row]], metric: str = "bits_per_byte") -> str:
  """Per arm: its `metric` at every evaluation length its rows have (mean ± std over seeds), then the mean over
  seeds of each model's change from the shortest length to the longest."""
  ts = sorted({int(r["eval_seq_len"]) for cell in by_arm.values() for r in by_length(cell, metric)})
  body = []
  for arm, cell in by_arm.items():
    by = by_length(cell, metric)
    per_seed_at = {}   # the change per seed (the same model evaluated at both lengths), then its mean
    for r in by:
      per_seed_at.setdefault(r["_overrides"]["seed"], {})[r["eval_seq_len"]] = float(r[metric])
    deltas = [v[ts[-1]] - v[ts[0]] for v in per_seed_at.values() if ts and ts[0] in v and ts[-1] in v]
    body.append([arm, *(mean_std([float(r[metric]) for r in by if r["eval_seq_len"] == t]) for t in ts),
                 f"{sum(deltas) / len(deltas):+.3f}" if deltas else MISSING])
  return markdown(["arm", *(f"T={t:,}" for t in ts), f"T={ts[-1]:,} − T={ts[0]:,}" if ts else ""], body)


def rate_table(by_arm_rate: Mapping[tuple[str, float], float], arms: Sequence[str]) -> str:
  """Per arm (in `arms`' order, those with a value): a signed value at each rate ('' where none)."""
  lrs = sorted({lr for _, lr in by_arm_rate})
  body = [[arm, *(f"{by_arm_rate[arm, lr]:+.3f}" if (arm, lr) in by_arm_rate else "" for lr in lrs)]
          for arm in arms if any((arm, lr) in by_arm_rate for lr in lrs)]
  return markdown(["arm", *(f"lr {lr:g}" for lr in lrs)], body)


def first_count(rows: Iterable[Row], key: str) -> str:
  """The first row's `key` that is not None, as an integer with thousands separators ('…' without one)."""
  return next((f"{int(r[key]):,}" for r in rows if r.get(key) is not None), MISSING)


def early_to_late(rows: Sequence[Row], early: tuple[int, int], late: tuple[int, int]) -> str:
  """'2.105 → 1.602': the mean over the rows of their validation loss over context positions `early`, then over
  `late` (position_loss); '…' while either has no value."""
  at = lambda span: [v for v in (position_loss(r, span) for r in rows) if v is not None]
  if not at(early) or not at(late):
    return MISSING
  return f"{mean_std(at(early), std=False)} → {mean_std(at(late), std=False)}"


def length_change_by_rate(tuning: protocol.Tuning, rows: Iterable[Row], keys: Iterable[tuple[str, Any]],
                          metric: str = "bits_per_byte") -> str:
  """Per (arm, key) of `keys` (an arm once, in order): the change in `metric` of its seed-0 pilot point at every
  rate it ran (tuning.pilot_rows), from the shortest evaluation length the finished rows have to the longest
  (rate_table; a note instead while they have one length only)."""
  finished = ok(rows, metric)
  ts = sorted({int(r["eval_seq_len"]) for r in by_length(finished, metric)})
  if len(ts) < 2:
    return "(no evaluation past the training length yet)\n"
  by_key, keys, change = protocol.index(finished), list(keys), {}
  for arm, key in keys:
    for lr, r in tuning.pilot_rows(by_key, arm, key).items():
      at = {b["eval_seq_len"]: float(b[metric]) for b in by_length([r], metric)}
      if ts[0] in at and ts[-1] in at:
        change[arm, lr] = at[ts[-1]] - at[ts[0]]
  return rate_table(change, [arm for arm, _ in keys])


def position_loss(row: Row, span: tuple[int, int]) -> float | None:
  """The point's mean validation loss over context positions span[0]..span[1] (1-based, inclusive; its
  position_loss.json from `evaluate --position_loss`), None without one."""
  data = collect.read_json(os.path.join(row.get("_workdir", ""), "position_loss.json")) or {}
  vals = [l for p, l in zip(data.get("position", []), data.get("position_loss", [])) if span[0] <= p <= span[1]]
  return sum(vals) / len(vals) if vals else None


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


def rate_check_table(check: protocol.RateCheck, rows: Sequence[Row], lrs: Mapping[str, float],
                     cell: Callable[[Row | None], str], chosen_header: str = "chosen lr") -> str:
  """Per arm of `lrs` ({arm: its chosen rate}) that collapses at the check's cell (RateCheck.collapses): the
  chosen rate and seed 0's cell(row, None when not run) at the check's cell at every rate of the rule."""
  rates = check.rule.rates()
  body = [[arm, f"{lr:g}", *(cell(protocol.found(rows, check.point(arm, check.cell, x, 0))) for x in rates)]
          for arm, lr in lrs.items() if check.collapses(rows, arm, lr)]
  return markdown(["arm", chosen_header, *(f"lr {x:g}" for x in rates)], body)


def seed_check_table(check: protocol.SeedCheck, rows: Sequence[Row], cells: Iterable[tuple[str, Any, float]],
                     seeds: Sequence[int], cell: Callable[[Row | None], str], key_header: str = "width",
                     longer_header: str = "longer") -> str:
  """Per failing seed of a seed check over `cells` ((arm, key, chosen rate); SeedCheck.cases): the arm, key and
  rate, the cell's other seeds' values at it, the seed, and its cell(row, None when not run) at every rate of the
  rule and at the chosen rate with the check's `longer` overrides."""
  metric, rates, body = check.rule.metric, check.rule.rates(), []
  for arm, key, lr, seed in check.cases(rows, cells, seeds):
    others = [(s, r) for s in seeds if s != seed and (r := protocol.found(rows, check.point(arm, key, lr, s)))]
    body.append([arm, key, f"{lr:g}", ", ".join(f"{s}: {fmt(float(r[metric]))}" for s, r in others), seed,
                 *(cell(protocol.found(rows, check.point(arm, key, x, seed))) for x in rates),
                 cell(protocol.found(rows, check.longer_point(arm, key, lr, seed)))])
  return markdown(["arm", key_header, "chosen lr", "other seeds at it", "seed", *(f"lr {x:g}" for x in rates),
                   longer_header], body)


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


def field(key: str) -> Callable[[Row], Any]:
  """A column's value: the row's `key` (None when absent)."""
  return lambda row: row.get(key)


def override(key: str) -> Callable[[Row], Any]:
  """A column's value: the row's point override `key` (None when absent)."""
  return lambda row: row["_overrides"].get(key)


def config_value(key: str) -> Callable[[Row], Any]:
  """A column's value: the row's config field `key`, dotted (None when absent)."""
  return lambda row: row["_config"].get(key)


def rows_csv(out: str, spec: Sequence[Column], rows: Iterable[Row]) -> str | None:
  """The rows as CSV beside `out` (study.md -> study.csv), spec's columns; nothing when `out` is ''."""
  if out:
    rows = list(rows)
    return write_csv(csv_beside(out), [h for h, _ in spec], [[value(r) for _, value in spec] for r in rows])
  return None


def sections(parts: Iterable[tuple[str, str]], level: int = 3) -> str:
  """Markdown sections: each a heading at `level` ('### heading'), a blank line and its newline-terminated text;
  one blank line between them."""
  return "\n".join(f"{'#' * level} {heading}\n\n{text}" for heading, text in parts)


def report(out: str, parts: Sequence[tuple[str, str]], rows: Iterable[Row] = (), csv_spec: Sequence[Column] = ()
           ) -> str:
  """A study's tables: its (heading, table) parts as '###' sections, printed and written to `out` ('' = print
  only); with `csv_spec`, `rows` as CSV beside it (rows_csv). Returns the markdown."""
  text = common.emit_markdown(sections(parts), out)
  if csv_spec:
    rows_csv(out, csv_spec, rows)
  return text


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
  flags.DEFINE_string("table", None, "The study's config (or table script) that defines write(), "
                      "FILE[:arg].")
  flags.DEFINE_string("workdir", None, "The study's sweep directory (restored from its points folder first).")
  flags.DEFINE_string("archive", None, "The points folder to restore from (default: the script's ARCHIVE); '' = "
                      "none.")
  flags.DEFINE_string("out", "", "Write the markdown here (and the rows as .csv beside it); '' = stdout only.")
  flags.DEFINE_string("plots_dir", "", "Draw the study's plots here too (a write() that takes plots_dir); '' = none.")
  flags.mark_flags_as_required(["table", "workdir"])


def restore_archives(archives: str | Mapping[str, str], workdir: str) -> None:
  """Restores a study's points folder into `workdir` ('' = none); a study with several sweep directories
  declares {sub-directory of workdir: its points folder} (those not made yet are skipped)."""
  if isinstance(archives, Mapping):
    for sub, folder in archives.items():
      if os.path.isdir(folder):
        archive.restore_all(folder, os.path.join(workdir, sub))
  elif archives:
    archive.restore_all(archives, workdir)


def main(argv: Sequence[str]) -> None:
  del argv
  f = flags.FLAGS
  with cli.one_line_errors(ValueError, FileNotFoundError):
    path, arg = config_lib.split_spec(f.table)
    module = config_lib.load_module(path)
    if not hasattr(module, "write"):
      raise ValueError(f"{path} defines no write(workdir, archive_dir, out)")
    restore_archives(getattr(module, "ARCHIVE", "") if f.archive is None else f.archive, f.workdir)
    more = {"arg": arg} if arg else {}
    if f.plots_dir:
      if "plots_dir" not in inspect.signature(module.write).parameters:
        raise ValueError(f"{path}'s write() draws no plots (it takes no plots_dir)")
      more["plots_dir"] = f.plots_dir
    module.write(f.workdir, "", f.out, **more)


if __name__ == "__main__":
  define_flags()
  app.run(main)
