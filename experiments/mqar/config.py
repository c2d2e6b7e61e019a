"""Study 1: Zoology's accuracy vs state size (Fig. 2) on a CPU — MQAR with every mixer, widths and seeds.

The commands (every stage, one workdir, each reusing the earlier stages' points, all resuming; the points are
kept in points/ and restored from it) and the tables: README.md. Smoke test (2 points, ~1 min): :tiny=True.
The task: configs/mqar.py's default (setup=zoology) and its point=hard.
Options: stage=pilot|main|hard|lrcheck|seedcheck (default main), arms=softmax+gla, seeds=0+1 and widths=64+128
(subsets of the stage's), hard=True (seedcheck on the hard grid), tiny=True. What each stage runs, why, and the
tables write() prints: README.md's "Stages and options".
"""
import functools
import os

from linear_seq import config_lib
from linear_seq.studies import protocol
from linear_seq.studies import tables

STUDY = "mqar"
_HERE = os.path.dirname(os.path.abspath(__file__))
_MQAR = os.path.join(_HERE, "..", "..", "configs", "mqar.py")
ARCHIVE = os.path.join(_HERE, "points")
OPTIONS = ("tiny", "stage", "arms", "seeds", "widths", "hard")
STAGES = ("pilot", "main", "hard", "lrcheck", "seedcheck")
# Every follow-up a complete study runs (the tables enumerate its points from these).
FOLLOWUP_ARGS = tuple(f"stage={s}" for s in STAGES) + ("stage=seedcheck,hard=True",)

# Arms: label -> overrides. Linear attention with two feature maps; the delta rule with its three gates.
ARMS = {
    **protocol.arms("softmax"),
    "linear-elu1": {"model.mixer": "linear", "model.feature_map": "elu1"},
    "linear-relu": {"model.mixer": "linear", "model.feature_map": "relu"},
    **protocol.arms("retention", "gla", "s4", "deltanet", "deltanet-scalar", "deltanet-channel", "mamba2"),
}
PILOT_WIDTH = 64
PILOT_LRS = (1e-3, 3e-3)
WIDTHS = (32, 64, 128)
SEEDS = (0, 1, 2)
HARD = config_lib.load_module(_MQAR).HARD   # the task's hard point (configs/mqar.py:point=hard)
HARD_WIDTHS = (64, 128)
HARD_SEEDS = (0, 1)
HARD_STEPS = config_lib.load_module(_MQAR).HARD_STEPS
CHECK_WIDTH = 32
SEEDCHECK_STEPS = 3000
TINY_ARMS = ("softmax", "gla")
THRESHOLD = 0.9


def get_config(arg: str = ""):
  """configs/mqar.py (setup zoology), evaluated every 250 steps in 4 batches of 250 (tiny: its tiny setup)."""
  tiny = bool(config_lib.parse_options(arg, OPTIONS).get("tiny"))
  return protocol.task("mqar.py", {"eval.batch_size": 250, "train.eval_every": 250}, tiny)


# arm_of(row): the arm label of a result row: the one its point carries, else the arm its overrides match.
arm_of = functools.partial(protocol.arm_of, arms=ARMS)


def _opts(arg: str) -> dict:
  opts = config_lib.parse_options(arg, OPTIONS)
  stage = protocol.choice(opts, "stage", STAGES, "main")
  names = protocol.arm_labels(opts, ARMS, tiny=TINY_ARMS)
  if opts.get("hard") and stage != "seedcheck":
    raise ValueError(f"hard=True is a seedcheck option (stage {stage}: use stage=hard for the hard grid)")
  hard = stage == "hard" or bool(opts.get("hard"))
  seeds = protocol.seeds(opts.get("seeds", "+".join(map(str, HARD_SEEDS if hard else SEEDS))),
                         within=HARD_SEEDS if hard else SEEDS, where=f"stage {stage}")
  allowed = HARD_WIDTHS if hard else WIDTHS
  widths = protocol.numbers(opts, "widths", allowed, allowed=allowed, where=f"stage {stage}")
  return {**opts, "stage": stage, "arms": names, "seeds": seeds, "widths": widths, "hard": hard}


def point(arm: str, width: int, lr: float, seed: int, **more) -> dict:
  return protocol.point(ARMS, arm, {"model.d_model": width}, lr, seed, more)


def grid_extra(hard: bool) -> dict:
  """The overrides a grid point adds to point's: the hard point's task and step budget, or none (main)."""
  return {**HARD, "train.num_steps": HARD_STEPS} if hard else {}


# Below 0.99 at the end and up by more than 0.01 over the last 500 steps of its eval curve (a row imported from the
# committed tables by import_rows.py carries the tables' mark instead).
still_rising = protocol.still_rising(window=500, delta=0.01, below=0.99)
# The pilot's rule: the better of PILOT_LRS by final accuracy (ties: the smaller rate; a failed point loses); if
# that is the larger rate and it is still rising, seed 0 runs at 1e-2 too, which wins if better.
RULE = protocol.LrRule(PILOT_LRS, metric="accuracy", direction="max", edge="up", condition=still_rising,
                       condition_text="still rising")
CHECK_LRS = tuple(RULE.rates())
TUNING = protocol.Tuning(RULE, lambda arm, cell, lr: point(arm, PILOT_WIDTH, lr, 0))
best_lr = TUNING.best   # best_lr(rows, arm) -> (the arm's rate or None, the pilot points still to run)


def main_row(rows, arm: str, width: int, lr: float, seed: int = 0, **more):
  return protocol.found(rows, point(arm, width, lr, seed, **more))


def collapses_small(rows, arm: str, lr: float) -> bool:
  """arm's seed-0 main point at CHECK_WIDTH is below 0.5 while the one at PILOT_WIDTH reaches 0.9."""
  small, pilot = main_row(rows, arm, CHECK_WIDTH, lr), main_row(rows, arm, PILOT_WIDTH, lr)
  return (small is not None and pilot is not None and float(small.get("accuracy") or 0.0) < 0.5
          and float(pilot.get("accuracy") or 0.0) >= 0.9)


def split_seeds(rows, arm: str, width: int, lr: float, seeds=SEEDS, hard: bool = False) -> list[int]:
  """The seeds of arm's main (hard: hard) point (width, lr) below 0.5 when another of them reaches 0.9 (else [])."""
  acc = {s: float(r.get("accuracy") or 0.0) for s in seeds
         if (r := main_row(rows, arm, width, lr, s, **grid_extra(hard))) is not None}
  return [s for s in sorted(acc) if acc[s] < 0.5] if acc and max(acc.values()) >= 0.9 else []


def _grid(rows, opts: dict, lrs: dict) -> list[dict]:
  """The stage's grid (main or hard: its seeds x arms x widths, seed-major) at each arm's pilot rate."""
  del rows
  extra = grid_extra(opts["hard"])
  return protocol.at_rates(opts["seeds"], [(a, w) for a in opts["arms"] for w in opts["widths"]], lrs,
                           lambda a, w, lr, s: point(a, w, lr, s, **extra), rate_key=lambda a, w: (a, None))


def _lrcheck(rows, opts: dict, lrs: dict) -> list[dict]:
  """Seed 0's main points at CHECK_WIDTH and PILOT_WIDTH (finished ones are skipped), then the other rates of
  CHECK_LRS at CHECK_WIDTH for each arm that collapses there (collapses_small)."""
  lr = {a: lrs[a, None] for a in opts["arms"] if lrs[a, None] is not None}
  return ([point(a, w, lr[a], 0) for a in lr for w in (CHECK_WIDTH, PILOT_WIDTH)] +
          [point(a, CHECK_WIDTH, x, 0) for a in lr if collapses_small(rows, a, lr[a]) for x in CHECK_LRS if x != lr[a]])


def _seedcheck(rows, opts: dict, lrs: dict) -> list[dict]:
  """The grid's points (finished ones are skipped), then each split cell's failing seed (split_seeds) at the
  other rates of CHECK_LRS and at the chosen rate for SEEDCHECK_STEPS."""
  out, extra = _grid(rows, opts, lrs), grid_extra(opts["hard"])
  for a, w in [(a, w) for a in opts["arms"] if lrs[a, None] is not None for w in opts["widths"]]:
    for s in split_seeds(rows, a, w, lrs[a, None], opts["seeds"], hard=opts["hard"]):
      out += [point(a, w, lr, s, **extra) for lr in CHECK_LRS if lr != lrs[a, None]]
      out.append(point(a, w, lrs[a, None], s, **{**extra, "train.num_steps": SEEDCHECK_STEPS}))
  return out


# The study: the pilot (every arm at PILOT_WIDTH, seed 0, each rate of RULE's grid) chooses each arm's rate; each
# stage's points then run at it.
SWEEP = protocol.Study(
    _opts, TUNING, keys=lambda opts: [(a, None) for a in opts["arms"]],
    stages={"pilot": None, "main": _grid, "hard": _grid, "lrcheck": _lrcheck, "seedcheck": _seedcheck},
    tiny=lambda arm: {**ARMS[arm], "model.d_model": 16, "seed": 0}, pilot_todo=True, arm_of=arm_of)
get_sweep, get_followup_sweep = SWEEP.get_sweep, SWEEP.get_followup_sweep
# chosen(rows): the rows at their arm's pilot rate (the other pilot rates and undecided arms left out; rows without
# a learning-rate override, e.g. tiny=True's, kept).
chosen = functools.partial(SWEEP.chosen, arms=ARMS)


def get_plots(arg: str = ""):
  opts = _opts(arg)
  # The grid's own budget: seedcheck's longer points at the chosen rate stay out.
  main = {"data.seq_len": 16 if opts.get("tiny") else 64, "train.num_steps": get_config(arg).train.num_steps}
  common_ = {"y": "accuracy", "group": arm_of, "select": chosen, "logx": 2}
  task = "MQAR (T={data.seq_len}, {data.num_kv_pairs} kv pairs"
  return [
      {"kind": "xy", "x": "state_size", "where": main, "file": "accuracy_vs_state_size.png",
       "title": task + "): accuracy vs recurrent state", "xlabel": "state size (floats / sequence)", **common_},
      {"kind": "xy", "x": "model.d_model", "where": main, "file": "accuracy_vs_width.png",
       "title": task + "): accuracy vs width", "xlabel": "model width", **common_},
      {"kind": "xy", "x": "model.d_model", "where": {"data.seq_len": 128, "train.num_steps": HARD_STEPS},
       "file": "accuracy_vs_width_hard.png", "title": task + ", {train.num_steps} steps)", "xlabel": "model width",
       **common_},
  ]


def load_rows(workdir: str) -> list[dict]:
  """Rows of every point the stages define that has a sub-workdir (finished or not), every stage's follow-up
  rounds replayed (main needs the pilot's 1e-2 rows)."""
  return tables.study_rows(os.path.join(_HERE, "config.py"), workdir, followup_args=FOLLOWUP_ARGS)


def _cell(row) -> str:
  """A point's final accuracy, ↑ when still rising; '…' when it has not run."""
  return tables.MISSING if row is None else tables.fmt(float(row["accuracy"])) + (" ↑" if still_rising(row) else "")


def pilot_table(rows) -> str:
  return tables.pilot_table(TUNING, rows, [(arm, None) for arm in ARMS], _cell)


def grid(rows, hard: bool) -> list[tables.Cell]:
  """A Cell per arm and width of the main (hard: hard) grid, at the arm's pilot rate when it is decided: the
  grid's own points (seedcheck's longer runs stay out)."""
  keys = [(a, w) for a in ARMS for w in (HARD_WIDTHS if hard else WIDTHS)]
  return tables.cells(TUNING, rows, keys, "accuracy", lambda a, w, lr, s: point(a, w, lr, s, **grid_extra(hard)),
                      rate_key=lambda w: None)


def grid_table(cells, seeds: int = len(SEEDS)) -> str:
  """The grid's cells: state size, each of `seeds` seeds' accuracy, mean ± std, seeds reaching THRESHOLD and the
  first step each reached it."""
  size = lambda c: tables.first_count(c.rows, "state_size")
  first = lambda r: tables.first_step(r, THRESHOLD)
  steps = lambda c: " / ".join("—" if t is None else str(t) for t in map(first, c.rows))
  return tables.columns(cells, [
      ("arm", lambda c: c.arm), ("width", lambda c: c.key), ("lr", lambda c: f"{c.lr:g}"), ("state (floats)", size),
      *tables.seed_columns(lambda c: tables.values(c.rows, "accuracy"), seeds, "accuracy", THRESHOLD, one=" (1 seed)"),
      (f"first step ≥ {THRESHOLD}", steps)])


def lrcheck_table(rows) -> str:
  """Seed 0 at CHECK_WIDTH per learning rate, for the arms the lrcheck stage ran (collapses_small)."""
  body = [[arm, f"{lr:g}", *(_cell(main_row(rows, arm, CHECK_WIDTH, x)) for x in CHECK_LRS)]
          for arm in ARMS if (lr := best_lr(rows, arm)[0]) is not None and collapses_small(rows, arm, lr)]
  return tables.markdown(["arm", "chosen lr (width 64)", *(f"lr {x:g}" for x in CHECK_LRS)], body)


def seedcheck_table(rows, hard: bool = False) -> str:
  """Each main-grid (hard: hard-grid) cell whose seeds split (split_seeds): the failing seed at every rate of
  CHECK_LRS and at the chosen rate for SEEDCHECK_STEPS, beside the cell's other seeds at the chosen rate."""
  extra, body = grid_extra(hard), []
  seeds, widths = (HARD_SEEDS, HARD_WIDTHS) if hard else (SEEDS, WIDTHS)
  for arm, lr, w in [(a, best_lr(rows, a)[0], w) for a in ARMS for w in widths]:
    for seed in [] if lr is None else split_seeds(rows, arm, w, lr, seeds, hard=hard):
      others = [(s, r) for s in seeds if s != seed and (r := main_row(rows, arm, w, lr, s, **extra))]
      longer = main_row(rows, arm, w, lr, seed, **{**extra, "train.num_steps": SEEDCHECK_STEPS})
      body.append([arm, w, f"{lr:g}", ", ".join(f"{s}: {tables.fmt(float(r['accuracy']))}" for s, r in others), seed,
                   *(_cell(main_row(rows, arm, w, x, seed, **extra)) for x in CHECK_LRS), _cell(longer)])
  return tables.markdown(["arm", "width", "chosen lr", "other seeds at it", "seed", *(f"lr {x:g}" for x in CHECK_LRS),
                          f"chosen lr, {SEEDCHECK_STEPS:,} steps"], body)


def write(workdir: str, archive_dir: str = "", out: str = "") -> str:
  """Prints and returns the tables (writes them to `out`, every finished point as a row of the .csv beside it),
  from the points in `workdir` once those of `archive_dir` ('' = none) are restored into it."""
  rows = tables.restored(load_rows, workdir, archive_dir)
  rising = "; ↑ = still rising)"
  config, over = tables.config_value, tables.override
  return tables.report(out, [
      ("Pilot (width 64, (64, 4), seed 0" + rising, pilot_table(rows)),
      ("Main point (T=64, 4 kv pairs, 1,500 steps)", grid_table(grid(rows, hard=False))),
      (f"Hard point (T=128, 8 kv pairs, {HARD_STEPS:,} steps)", grid_table(grid(rows, hard=True), len(HARD_SEEDS))),
      (f"Learning-rate check at width {CHECK_WIDTH} (seed 0; arms below 0.5 there and ≥ 0.9 at width 64" + rising,
       lrcheck_table(rows)),
      ("Seed check (a cell with one seed ≥ 0.9 and another below 0.5: the failing seed at each rate, and at the "
       f"chosen rate for {SEEDCHECK_STEPS:,} steps" + rising, seedcheck_table(rows)),
      ("Seed check, hard point (T=128, 8 kv pairs: the same check on the hard grid, its rates at "
       f"{HARD_STEPS:,} steps" + rising, seedcheck_table(rows, hard=True))],
      [r for r in rows if r.get("status") == "ok"], [
      ("arm", arm_of), ("seq_len", config("data.seq_len")), ("num_kv_pairs", config("data.num_kv_pairs")),
      ("width", over("model.d_model")), ("lr", over("train.learning_rate")), ("seed", over("seed")),
      ("steps", config("train.num_steps")), ("state_size", tables.field("state_size")),
      ("accuracy", tables.field("accuracy")), (f"first_step_{THRESHOLD}", lambda r: tables.first_step(r, THRESHOLD)),
      ("wall_time_s", tables.field("wall_time"))])
