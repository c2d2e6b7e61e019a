"""The studies' shared protocol: a study declares its arms, cells, seeds and learning-rate rule; this turns the
declaration into the sweep's points and follow-up rounds (the hooks of linear_seq.studies.sweep), and replays
those rounds for a study's tables.

  ARMS = {"softmax": {"model.mixer": "softmax"}, "gla": {"model.mixer": "gla"}}
  RULE = protocol.LrRule(grid=(1e-3, 3e-3), metric="accuracy", direction="max", edge="up",
                         condition=still_rising, condition_text="still rising")
  TUNING = protocol.Tuning(RULE, pilot=lambda arm, cell, lr: protocol.point(ARMS, arm, {"model.d_model": 64}, lr, 0))
  TUNING.decide(rows, "gla", 64)      # Decision(lr=..., todo=(points still to run before it is known), grid_best=...)
  SWEEP = protocol.Study(options, TUNING, keys=lambda opts: [(a, 64) for a in opts["arms"]], tiny=..., point=...,
                         stages={"pilot": None})   # main (not named): every seed at each arm's chosen rate
  get_sweep, get_followup_sweep = SWEEP.get_sweep, SWEEP.get_followup_sweep

The learning-rate rule, once for every study: seed 0 runs at every rate of the grid; the best (by the metric, in
its direction) wins, ties to the smaller rate; a failed point (or one whose metric is missing or NaN) loses. When
the best is at an edge of the grid that the rule steps past (edge 'up': the largest rate; 'both': either) and
the stated condition holds for its point (e.g. still rising; none: always), seed 0 runs once more one step
further out on the 1-3-10 ladder (LADDER), and that rate wins if it is strictly better; it is not extended
further. A one-rate grid never steps.

Points carry their arm (`Point.arm`, a dict of overrides with the label beside it), so a table never guesses an
arm back from overrides; the sweep keeps it (sweep.Point.arm) and collect puts it in each row as '_arm'.

Named extra stages are declared the same way: a RateCheck (does the rate chosen at one cell serve another? an
arm that collapses there runs the rule's other rates there) and a SeedCheck (is a cell's split between seeds the
rate's doing or the budget's? its failing seed runs at the other rates, and longer); tables.py has their tables.
"""
import dataclasses
import itertools
import math
import os
from typing import Any, Callable, Hashable, Iterable, Mapping, Sequence

from linear_seq import config_lib

Row = dict[str, Any]

# The rates a grid's edge steps out to: the next on this ladder (x3 or /3 for a rate off it).
LADDER = (1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1, 1.0)
EDGES = ("none", "up", "both")
DIRECTIONS = ("max", "min")
# A row's status once its point has run: a failed point is known (it loses), an unfinished one is not.
DONE = ("ok", "skipped", "failed")
# The follow-up rounds a sweep runs, and a table replays, at most (the sweep's MAX_FOLLOWUP_ROUNDS).
MAX_ROUNDS = 10


# The mixers' usual arms (label -> overrides), that a study picks by label in its own order (protocol.arms).
MIXER_ARMS = {
    "softmax": {"model.mixer": "softmax"},
    "linear": {"model.mixer": "linear"},
    "retention": {"model.mixer": "retention"},
    "gla": {"model.mixer": "gla"},
    "s4": {"model.mixer": "s4"},
    "deltanet": {"model.mixer": "deltanet", "model.delta_gate": "none"},
    "deltanet-scalar": {"model.mixer": "deltanet", "model.delta_gate": "scalar"},
    "deltanet-channel": {"model.mixer": "deltanet", "model.delta_gate": "channel"},
    "mamba2": {"model.mixer": "mamba2"},
}


def arms(*labels: str) -> dict[str, dict[str, Any]]:
  """{label: MIXER_ARMS[label]} for `labels`, in their order (copies: a study may extend one)."""
  return {label: dict(MIXER_ARMS[label]) for label in labels}


def layer_arms(*stacks: str) -> dict[str, dict[str, Any]]:
  """Arms of one mixer per layer, from their comma-joined mixers ('gla,gla,gla,softmax'): {label: {
  model.layer_mixers, model.num_layers}}, in order. The label names each run of a mixer, its count after the name
  when above 1, joined by '-' ('gla3-softmax'; 'gla,gla' -> 'gla2'): no commas or spaces, so `arms=` can name it."""
  out = {}
  for stack in stacks:
    mixers = stack.split(",")
    runs = [(m, len(list(group))) for m, group in itertools.groupby(mixers)]
    out["-".join(m + (str(n) if n > 1 else "") for m, n in runs)] = {"model.layer_mixers": stack,
                                                                      "model.num_layers": len(mixers)}
  return out


class Point(dict):
  """A sweep point's overrides with its arm's label beside them (`.arm`): dict(point) is the overrides alone,
  which name its sub-workdir and its archive file."""

  def __init__(self, overrides: Mapping[str, Any], arm: str = ""):
    super().__init__(overrides)
    self.arm = arm


def point(arms: Mapping[str, Mapping[str, Any]], arm: str, cell: Mapping[str, Any], lr: float | None, seed: int,
          extra: Mapping[str, Any] | None = None) -> Point:
  """{**arm's overrides, **cell, train.learning_rate (unless None), seed, **extra}, in that order (the order
  names the point's sub-workdir), carrying the arm's label."""
  overrides = {**arms[arm], **cell}
  if lr is not None:
    overrides["train.learning_rate"] = lr
  overrides["seed"] = seed
  overrides.update(extra or {})
  return Point(overrides, arm)


def arm_of(row: Row, arms: Mapping[str, Mapping[str, Any]] | None = None) -> str:
  """The arm a row's point carries ('_arm', set by collect from a protocol point). A row without one (rebuilt from
  a results.csv, or an override dict): the most specific of `arms` whose overrides it has, else its mixer."""
  if row.get("_arm"):
    return row["_arm"]
  overrides = row.get("_overrides", row)
  for label, arm in sorted((arms or {}).items(), key=lambda kv: -len(kv[1])):
    if all(overrides.get(k) == v for k, v in arm.items()):
      return label
  return str(overrides.get("model.mixer", ""))


def arm_labels(opts: Mapping[str, Any], arms: Mapping[str, Any], default: Sequence[str] | None = None,
               tiny: Sequence[str] = ()) -> list[str]:
  """The arms a study's options pick: tiny=True's `tiny` arms; else arms=a+b (labels of `arms`, checked), or
  `default` (all of `arms` when None) without the option."""
  if opts.get("tiny"):
    return list(tiny)
  return config_lib.parse_subset(opts, "arms", list(arms), list(arms) if default is None else default, "arm")


def choice(opts: Mapping[str, Any], key: str, valid: Sequence[str], default: str) -> str:
  """A config option that names one of `valid` (e.g. stage=pilot), `default` when absent."""
  value = str(opts.get(key, default))
  if value not in valid:
    raise ValueError(f"unknown {key} {value!r}; valid: {', '.join(valid)}")
  return value


SEEDS_SYNTAX = "a count (3: seeds 0, 1, 2) or '+'-joined seeds (0+2)"


def seeds(value: int | str | Sequence[int], within: Sequence[int] | None = None, where: str = "this stage"
          ) -> tuple[int, ...]:
  """A study's seeds from one spec: a count (3 -> seeds 0, 1, 2) or an explicit list (0+2, or a sequence).
  `within` (a stage's fixed seeds; the MQAR study's stages only): the spec selects among them (a single number
  is then one of them, 1 -> (1,)), and a seed outside them is an error. Anything else (a fraction, a word, a
  repeated or negative seed, a count below 1) is a ValueError saying what a spec is."""
  def integer(x) -> int:
    if isinstance(x, bool) or not (isinstance(x, int) or isinstance(x, str) and x.strip().lstrip("-").isdigit()):
      raise ValueError(f"seeds must be {SEEDS_SYNTAX}, got {value!r}")
    return int(x)

  if isinstance(value, str) and "+" in value or isinstance(value, (list, tuple)):
    out = tuple(integer(s) for s in (value.split("+") if isinstance(value, str) else value))
  elif within is not None:
    out = (integer(value),)
  else:
    n = integer(value)
    if n < 1:
      raise ValueError(f"seeds must be {SEEDS_SYNTAX} (a count of at least 1), got {value!r}")
    return tuple(range(n))
  if any(s < 0 for s in out) or len(set(out)) != len(out):
    raise ValueError(f"seeds must be distinct non-negative integers, got {value!r}")
  if within is not None and not set(out) <= set(within):
    raise ValueError(f"seeds={value}: {where} runs seeds {'+'.join(map(str, within))}")
  return out


def options(arg: str, keys: Sequence[str], arms_: Mapping[str, Any], default_arms: Sequence[str] | None = None,
            tiny_arms: Sequence[str] = (), default_seeds: int | str = 1, stages: Sequence[str] = (),
            flags: Mapping[str, bool] | None = None) -> dict:
  """A study's options (config_lib.parse_options of `arg` over `keys`) with the common ones resolved: with
  `stages`, 'stage' (one of them, default 'main'); 'seeds' (protocol.seeds: a count or the seeds, default
  `default_seeds`); 'arms' (arm_labels of `arms_`); each of `flags` ({name: default}, e.g. edge=False) True or
  False."""
  opts = config_lib.parse_options(arg, keys)
  for name, default in (flags or {}).items():
    opts[name] = opts.get(name, default)
    if not isinstance(opts[name], bool):
      raise ValueError(f"{name} must be True or False, got {opts[name]!r}")
  if stages:
    opts["stage"] = choice(opts, "stage", stages, "main")
  opts["seeds"] = seeds(opts.get("seeds", default_seeds))
  opts["arms"] = arm_labels(opts, arms_, default_arms, tiny_arms)
  return opts


def numbers(opts: Mapping[str, Any], key: str, default: Sequence[float], kind: Callable[[str], float] = int,
            allowed: Sequence[float] | None = None, where: str = "this stage") -> tuple:
  """A config option of '+'-joined positive numbers (widths=64+128 -> (64, 128)); `default` when absent. With
  `allowed` (a stage's own values) they must be among them, and come back in its order."""
  if key not in opts:
    return tuple(default)
  try:
    values = [kind(x) for x in str(opts[key]).split("+")]
  except ValueError:
    values = []
  if not values or any(not v > 0 for v in values):
    raise ValueError(f"{key} must be positive numbers joined by '+', got {opts[key]!r}")
  if allowed is None:
    return tuple(values)
  if not set(values) <= set(allowed):
    raise ValueError(f"{key}={opts[key]}: {where} runs {key} {'+'.join(map(str, allowed))}")
  return tuple(v for v in allowed if v in values)


def found(rows: Iterable[Row], overrides: Mapping[str, Any]) -> Row | None:
  """The first finished ('ok') row of the point with exactly these overrides, else None."""
  want = dict(overrides)
  return next((r for r in rows if r.get("status") == "ok" and r.get("_overrides") == want), None)


def curve(row: Row, key: str = "eval_accuracy") -> list[tuple[int, float]]:
  """A row's learning curve of `key`: [(step, value)] from its metrics.jsonl ('_metrics'), in order."""
  return [(m["step"], m[key]) for m in row.get("_metrics") or () if key in m]


def still_rising(window: int = 500, delta: float = 0.01, below: float = 0.99, key: str = "eval_accuracy"
                 ) -> Callable[[Row], bool]:
  """An LrRule condition: the point's `key` curve ends below `below` and rose by more than `delta` over its last
  `window` steps. A row without a curve (rebuilt from a committed table) carries the table's mark, 'still_rising'."""
  def rising(row: Row) -> bool:
    points = curve(row, key)
    if not points:
      return bool(row.get("still_rising"))
    last_step, last = points[-1]
    before = [v for s, v in points if s <= last_step - window]
    return last < below and bool(before) and last - before[-1] > delta
  return rising


def ladder_step(lr: float, up: bool) -> float:
  """The rate one step up (or down) the 1-3-10 ladder from `lr`; x3 (or /3) for a rate off it."""
  i = next((i for i, x in enumerate(LADDER) if math.isclose(x, lr, rel_tol=1e-9)), None)
  if i is None or not 0 <= i + (1 if up else -1) < len(LADDER):
    return lr * 3 if up else lr / 3
  return LADDER[i + (1 if up else -1)]


@dataclasses.dataclass(frozen=True)
class Decision:
  """A rule's answer for one arm and cell: the rate (None until known), the rates still to run before it is
  known, and the grid's best (None until the grid has finished; what a table shows as provisional)."""
  lr: float | None
  todo: tuple[float, ...] = ()
  grid_best: float | None = None

  def provisional(self) -> float | None:
    """The rate, or the grid's best while the step past its edge is still to run."""
    return self.grid_best if self.lr is None else self.lr


@dataclasses.dataclass(frozen=True)
class LrRule:
  """A learning-rate rule: the grid, the step past its edge, the metric and its direction (module docstring)."""
  grid: tuple[float, ...]
  metric: str = "accuracy"
  direction: str = "max"          # 'max': higher is better (accuracy); 'min': lower (bits/byte, loss)
  edge: str = "none"              # 'none' | 'up' (past the largest rate) | 'both'
  condition: Callable[[Row], bool] | None = None   # the step is taken only when the best point meets it
  condition_text: str = ""        # what the condition says, for the tables ("still rising")

  def __post_init__(self):
    if not self.grid or any(not lr > 0 for lr in self.grid):
      raise ValueError(f"a learning-rate grid is positive rates, got {self.grid!r}")
    if self.edge not in EDGES:
      raise ValueError(f"edge must be one of {', '.join(EDGES)}, got {self.edge!r}")
    if self.direction not in DIRECTIONS:
      raise ValueError(f"direction must be one of {', '.join(DIRECTIONS)}, got {self.direction!r}")

  def score(self, row: Row | None) -> float:
    """The row's metric signed so that lower is better; a missing, failed, non-numeric or NaN point: +inf."""
    value = None if row is None else row.get(self.metric)
    if row is None or row.get("status") not in ("ok", "skipped") or not isinstance(value, (int, float)):
      return math.inf
    if value != value:
      return math.inf
    return -float(value) if self.direction == "max" else float(value)

  def step(self, lr: float) -> float | None:
    """The rate past the grid's edge beyond `lr` when `lr` is at an edge this rule steps past, else None."""
    grid = sorted(self.grid)
    if len(grid) < 2 or self.edge == "none":
      return None
    if lr == grid[-1]:
      return ladder_step(lr, up=True)
    if lr == grid[0] and self.edge == "both":
      return ladder_step(lr, up=False)
    return None

  def rates(self) -> list[float]:
    """Every rate a seed-0 point may run at: the grid and the steps past its edges (ascending)."""
    steps = [self.step(lr) for lr in (min(self.grid), max(self.grid))]
    return sorted(set(self.grid) | {s for s in steps if s is not None})

  def decide(self, by_lr: Mapping[float, Row]) -> Decision:
    """The decision from the seed-0 rows by rate (rows not yet run, or unfinished, are not known)."""
    done = {lr: r for lr, r in by_lr.items() if r is not None and r.get("status") in DONE}
    missing = tuple(lr for lr in self.grid if lr not in done)
    if missing:
      return Decision(None, missing, None)
    best = min(self.grid, key=lambda lr: (self.score(done[lr]), lr))
    step = self.step(best)
    if step is None or (self.condition is not None and not self.condition(done[best])):
      return Decision(best, (), best)
    if step not in done:
      return Decision(None, (step,), best)
    return Decision(step if self.score(done[step]) < self.score(done[best]) else best, (), best)


def key(overrides: Mapping[str, Any]) -> str:
  """A point's identity: its overrides, in order (as its sweep sub-workdir name is)."""
  return repr(list(overrides.items()))


def index(rows: Iterable[Row]) -> dict[str, Row]:
  """{protocol.key(overrides): row}, the later row winning."""
  return {key(r["_overrides"]): r for r in rows}


class Tuning:
  """The rule applied per (arm, cell): `pilot(arm, cell, lr)` is the seed-0 point that tries rate lr for them
  (a study's pilot; the chosen rate then serves every point of the arm that names this cell)."""

  def __init__(self, rule: LrRule, pilot: Callable[[str, Hashable, float], Point]):
    self.rule, self.pilot = rule, pilot

  def pilot_rows(self, rows: Iterable[Row] | Mapping[str, Row], arm: str, cell: Hashable = None) -> dict[float, Row]:
    """{rate: the row of (arm, cell)'s seed-0 point at it} over the rule's rates, for those with a row."""
    by_key = rows if isinstance(rows, Mapping) else index(rows)
    found = {lr: by_key.get(key(self.pilot(arm, cell, lr))) for lr in self.rule.rates()}
    return {lr: r for lr, r in found.items() if r is not None}

  def decide(self, rows: Iterable[Row] | Mapping[str, Row], arm: str, cell: Hashable = None) -> Decision:
    """The rule's decision for (arm, cell) from the rows (a list, or protocol.index(rows) to reuse)."""
    return self.rule.decide(self.pilot_rows(rows, arm, cell))

  def lr(self, rows, arm: str, cell: Hashable = None, provisional: bool = False) -> float | None:
    decision = self.decide(rows, arm, cell)
    return decision.provisional() if provisional else decision.lr

  def best(self, rows, arm: str, cell: Hashable = None) -> tuple[float | None, list[Point]]:
    """(the rate, None until known; the seed-0 points still to run before it is known)."""
    decision = self.decide(rows, arm, cell)
    return decision.lr, [self.pilot(arm, cell, lr) for lr in decision.todo]

  def chosen(self, rows: Iterable[Row], arm_of: Callable[[Row], str],
             cell_of: Callable[[Row], Hashable] = lambda r: None, arms: Iterable[str] | None = None,
             provisional: bool = False, ordered: bool = False) -> list[Row]:
    """The rows at their (arm, cell)'s chosen rate, in order (ordered: in `arms`' order, e.g. a plot's axis;
    provisional: the grid's best while the step past its edge is pending); rows without a rate override (a tiny
    sweep's) are kept; those of an arm whose rate is not decided, or not among `arms` (when given), are left out."""
    rows = list(rows)
    order = None if arms is None else list(arms)
    by_key, lrs, known = index(rows), {}, None if order is None else set(order)
    out = []
    for r in rows:
      lr = r["_overrides"].get("train.learning_rate")
      if lr is None:
        out.append(r)
        continue
      arm, cell = arm_of(r), cell_of(r)
      if known is not None and arm not in known:
        continue
      if (arm, cell) not in lrs:
        lrs[arm, cell] = self.lr(by_key, arm, cell, provisional)
      if lrs[arm, cell] == lr:
        out.append(r)
    if ordered and order is not None:
      out.sort(key=lambda r: order.index(arm_of(r)) if arm_of(r) in known else len(order))
    return out

  def plan(self, rows, keys: Iterable[tuple[str, Hashable]], provisional: bool = False, grid: bool = False
           ) -> tuple[dict[tuple[str, Hashable], float | None], list[Point]]:
    """({(arm, cell): rate or None}, the steps past the grid's edge still to run, in `keys`' order; the grid's
    own points are the study's first points, so they are not listed unless `grid`)."""
    by_key = index(rows)
    lrs, todo = {}, []
    for arm, cell in keys:
      d = self.decide(by_key, arm, cell)
      lrs[arm, cell] = d.provisional() if provisional else d.lr
      todo += [self.pilot(arm, cell, lr) for lr in d.todo if grid or lr not in self.rule.grid]
    return lrs, todo


def seed_major(seeds_: Iterable[int], keys: Iterable[Any], make: Callable[[int, Any], Point | None]) -> list[Point]:
  """make(seed, key) for every key of seed 0 before seed 1 (so a partial run is balanced); None is skipped."""
  keys = list(keys)
  return [p for s in seeds_ for k in keys if (p := make(s, k)) is not None]


def new_points(points: Iterable[Mapping[str, Any]], known: Iterable[Mapping[str, Any]] = ()) -> list:
  """`points` less those in `known` and less repeats, in order."""
  out, seen = [], list(known)
  for p in points:
    if p not in seen:
      seen.append(p)
      out.append(p)
  return out


def replay(first: Sequence[Mapping[str, Any]], followup: Callable[[list[Row]], Iterable[Mapping[str, Any]]],
           rows_of: Callable[[list], list[Row]], rounds: int = MAX_ROUNDS) -> tuple[list, list[Row]]:
  """The sweep's follow-up rounds replayed for a table: `rows_of(points)` are the rows of those points that have
  run (a sub-workdir), `followup(rows)` the study's hook. Round after round until the hook adds no point or none
  of its new points has run, at most `rounds`. Returns (every point listed, the rows of those that ran)."""
  points = list(first)
  rows = rows_of(points)
  for _ in range(rounds):
    more = new_points(followup(rows), points)
    if not more:
      break
    points += more
    if not rows_of(more):
      break
    rows = rows_of(points)
  return points, rows


# The presets a study's task names (configs/<file>.py[:options]).
CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "configs")


def task(preset: str, overrides: Mapping[str, Any] | None = None, tiny: bool = False):
  """A study's task: the config of the preset `preset` in configs/ ('mqar.py:setup=block-conv') with the study's
  `overrides`; tiny: the preset's smoke test (tiny=True added to its options), the overrides left out."""
  spec = os.path.join(CONFIGS, preset)
  if tiny:
    spec += ",tiny=True" if ":" in preset else ":tiny=True"
  config = config_lib.load_config(spec)
  return config if tiny or not overrides else config_lib.apply_overrides(config, dict(overrides))


def length_eval(seq_len: int, tokens: int, tiny: bool = False, *flags: str) -> tuple[list[str], str]:
  """The extra command (get_extra_commands' form) that evaluates a point's final checkpoint at `seq_len`, `tokens`
  tokens a batch (batch size tokens // seq_len, at least 1; tiny: 8), with evaluate's `flags` (e.g.
  '--position_loss'), into eval_validation_T<seq_len>.json."""
  batch = 8 if tiny else max(1, tokens // seq_len)
  return (["-m", "linear_seq.evaluate", "--workdir={workdir}", f"--config.eval.seq_len={seq_len}",
           f"--config.eval.batch_size={batch}", *flags, "--overwrite"], f"eval_validation_T{seq_len}.json")


def at_rates(seeds_: Iterable[int], cells: Iterable[tuple[str, Any]], lrs: Mapping[tuple[str, Any], float | None],
             make: Callable[[str, Any, float, int], Point],
             rate_key: Callable[[str, Any], tuple[str, Any]] = lambda arm, cell: (arm, cell)) -> list[Point]:
  """make(arm, cell, rate, seed) for every (arm, cell) whose rate lrs[rate_key(arm, cell)] is known, seed-major
  (protocol.seed_major). rate_key maps a cell to the (arm, cell) the rate was tuned at (default: itself)."""
  def at(seed: int, cell: tuple[str, Any]) -> Point | None:
    lr = lrs.get(rate_key(*cell))
    return None if lr is None else make(cell[0], cell[1], lr, seed)
  return seed_major(seeds_, cells, at)


def metric_of(row: Row, metric: str) -> float:
  """A finished point's `metric` as a float (0 when it has none)."""
  return float(row.get(metric) or 0.0)


@dataclasses.dataclass(frozen=True)
class RateCheck:
  """A named stage: does an arm's rate, chosen at cell `tuned_at`, serve cell `cell` too? Seed 0 runs at both at
  the chosen rate; an arm whose point is below `low` at `cell` while reaching `high` at `tuned_at` (the rule's
  metric, higher better) collapses there, and runs seed 0 at `cell` at the rule's other rates."""
  rule: LrRule
  point: Callable[[str, Any, float, int], Point]   # (arm, cell, rate, seed) -> its point
  cell: Any
  tuned_at: Any
  low: float = 0.5
  high: float = 0.9

  def collapses(self, rows: Iterable[Row], arm: str, lr: float) -> bool:
    rows = list(rows)
    small, tuned = (found(rows, self.point(arm, c, lr, 0)) for c in (self.cell, self.tuned_at))
    return (small is not None and tuned is not None and metric_of(small, self.rule.metric) < self.low
            and metric_of(tuned, self.rule.metric) >= self.high)

  def points(self, rows: list[Row], lrs: Mapping[str, float]) -> list[Point]:
    """Seed 0 at both cells at each arm's rate (lrs: {arm: its chosen rate}), then, for each arm that collapses,
    seed 0 at `cell` at the rule's other rates."""
    return ([self.point(a, c, lr, 0) for a, lr in lrs.items() for c in (self.cell, self.tuned_at)] +
            [self.point(a, self.cell, x, 0) for a, lr in lrs.items() if self.collapses(rows, a, lr)
             for x in self.rule.rates() if x != lr])


@dataclasses.dataclass(frozen=True)
class SeedCheck:
  """A named stage: is a cell's split between seeds its rate's doing or its budget's? In a cell (an arm at one of
  its cells, at its chosen rate) where one seed reaches `high` while another is below `low` (the rule's metric,
  higher better), each failing seed runs at the rule's other rates, and at the chosen rate with `longer` (e.g.
  more steps) over its overrides."""
  rule: LrRule
  point: Callable[[str, Any, float, int], Point]   # (arm, cell, rate, seed) -> the cell's point
  longer: Mapping[str, Any]
  low: float = 0.5
  high: float = 0.9

  def failing(self, rows: Iterable[Row], arm: str, cell: Any, lr: float, seeds: Iterable[int]) -> list[int]:
    """The seeds of (arm, cell) at rate lr below `low` when another of them reaches `high` (else [])."""
    rows = list(rows)
    values = {s: metric_of(r, self.rule.metric) for s in seeds
              if (r := found(rows, self.point(arm, cell, lr, s))) is not None}
    return [s for s in sorted(values) if values[s] < self.low] if values and max(values.values()) >= self.high else []

  def longer_point(self, arm: str, cell: Any, lr: float, seed: int) -> Point:
    return Point({**self.point(arm, cell, lr, seed), **self.longer}, arm)

  def cases(self, rows: list[Row], cells: Iterable[tuple[str, Any, float]], seeds: Sequence[int]
            ) -> list[tuple[str, Any, float, int]]:
    """(arm, cell, rate, failing seed) for each of `cells` ((arm, cell, its chosen rate)) whose seeds split."""
    return [(a, c, lr, s) for a, c, lr in cells for s in self.failing(rows, a, c, lr, seeds)]

  def points(self, rows: list[Row], cells: Iterable[tuple[str, Any, float]], seeds: Sequence[int]) -> list[Point]:
    """Each failing seed's points: at the rule's other rates, then at the chosen rate with `longer`."""
    out = []
    for a, c, lr, s in self.cases(rows, cells, seeds):
      out += [self.point(a, c, x, s) for x in self.rule.rates() if x != lr] + [self.longer_point(a, c, lr, s)]
    return out


Stage = Callable[[list[Row], dict, dict], list[Point]]


@dataclasses.dataclass(frozen=True)
class Study:
  """A tuned study as one declaration, whose methods are the sweep's hooks (get_sweep, get_followup_sweep): the
  first points are the pilot (seed 0 of every tuned (arm, cell) at every rate of the rule's grid, arm-major);
  the follow-ups are the steps past the grid's edge still to run, then the option stage's points, made at each
  (arm, cell)'s chosen rate.

  options(arg) -> the study's parsed options: 'arms' and 'seeds', optionally 'tiny' and 'stage' (else 'main').
  tuning: the Tuning (its rule, and the pilot point of (arm, cell, rate)), or opts -> it where options set it.
  keys(opts) -> the tuned (arm, cell) pairs, in the pilot's order; plan_keys(opts) (default keys): the order
    the steps past the edge are listed in.
  tiny(arm) -> the arm's tiny=True point (the only point of a tiny sweep: no rates, no follow-ups); a study that
    declares none runs tiny=True through its rule and stages like any options (its options make them small).
  point(arm, cell, rate, seed) -> a point of the study (each_seed's); default: the pilot point of (arm, cell, rate)
    with its seed replaced.
  stages: {stage: fn(rows, opts, lrs) -> its points} with lrs = {(arm, cell): rate, None until known}; a stage
    mapped to None is the pilot alone; a stage not named runs each_seed.
  pilot_todo: the follow-ups list the grid's own seed-0 points still to run as well (before the steps past its
    edge); the sweep has listed them already, so only a caller that passes rows of fewer points sees them.
  arm_of(row) -> a row's arm (default protocol.arm_of); cell_of(row) -> the cell its rate was tuned for (default
    None: once per arm): what chosen() looks a row's rate up by.
  """
  options: Callable[[str], dict]
  tuning: Tuning | Callable[[dict], Tuning]
  keys: Callable[[dict], list[tuple[str, Hashable]]]
  tiny: Callable[[str], dict] | None = None
  point: Callable[[str, Any, float, int], Point] | None = None
  stages: Mapping[str, Stage | None] = dataclasses.field(default_factory=dict)
  plan_keys: Callable[[dict], list[tuple[str, Hashable]]] | None = None
  pilot_todo: bool = False
  arm_of: Callable[[Row], str] | None = None
  cell_of: Callable[[Row], Hashable] = lambda row: None

  def tuned(self, opts: dict) -> Tuning:
    return self.tuning if isinstance(self.tuning, Tuning) else self.tuning(opts)

  def tuning_for(self, arg: str = "") -> Tuning:
    """The Tuning under the options `arg` (its rule: .rule.rates(); an arm's rate: .lr(rows, arm, cell))."""
    return self.tuned(self.options(arg))

  def each_seed(self, rows: list[Row], opts: dict, lrs: Mapping[tuple[str, Any], float | None]) -> list[Point]:
    """Every seed of the options' at each (arm, cell)'s chosen rate, seed-major (seed 0's is its pilot point)."""
    del rows
    pilot = self.tuned(opts).pilot
    reseed = lambda arm, cell, lr, seed: Point({**pilot(arm, cell, lr), "seed": seed}, arm)
    return at_rates(opts["seeds"], self.keys(opts), lrs, self.point or reseed)

  def get_sweep(self, arg: str = "") -> list[dict]:
    """The pilot's points (every stage starts from them: they choose each arm's rate); tiny: the tiny points."""
    opts = self.options(arg)
    if opts.get("tiny") and self.tiny is not None:
      return [self.tiny(a) for a in opts["arms"]]
    tuning = self.tuned(opts)
    return [tuning.pilot(arm, cell, lr) for arm, cell in self.keys(opts) for lr in tuning.rule.grid]

  def get_followup_sweep(self, rows: list[Row], arg: str = "", provisional: bool = False) -> list[Point]:
    """The steps past the grid's edge still to run, then the stage's points at the chosen rates (provisional, for
    a table: the grid's best while a step is pending)."""
    opts = self.options(arg)
    if opts.get("tiny") and self.tiny is not None:
      return []
    lrs, edges = self.tuned(opts).plan(rows, (self.plan_keys or self.keys)(opts), provisional, self.pilot_todo)
    name = opts.get("stage", "main")
    stage = self.stages[name] if name in self.stages else self.each_seed
    return edges + ([] if stage is None else stage(rows, opts, lrs))

  def chosen(self, rows: Iterable[Row], arg: str = "", provisional: bool = False,
             arms: Iterable[str] | None = None, ordered: bool = False) -> list[Row]:
    """The rows at their (arm, cell)'s chosen rate under the options `arg` (Tuning.chosen: rows without a rate
    override are kept; an arm whose rate is undecided, or not among `arms` when given, is left out; provisional:
    the grid's best while the step past its edge is pending; ordered: in `arms`' order)."""
    return self.tuning_for(arg).chosen(rows, self.arm_of or arm_of, self.cell_of, arms, provisional, ordered)
