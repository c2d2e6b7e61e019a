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
_TASK = config_lib.load_module(os.path.join(protocol.CONFIGS, "mqar.py"))   # configs/mqar.py
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
# Issue 47's init rule (README): each arm's mixer as its reference initializes it: these PyTorch's default, 'torch'
# (after the point's cell, rate and seed); the others the setup's 'gpt2' (fla's and HF Llama's N(0, 0.02^2)).
INIT = {"mamba2": "torch", "s4": "torch"}
PILOT_WIDTH = 64
PILOT_LRS = (1e-3, 3e-3)
WIDTHS = (32, 64, 128)
SEEDS = (0, 1, 2)
HARD, HARD_STEPS = _TASK.HARD, _TASK.HARD_STEPS   # the task's hard point (point=hard) and its step budget
HARD_WIDTHS, HARD_SEEDS = (64, 128), (0, 1)
CHECK_WIDTH, SEEDCHECK_STEPS = 32, 3000
TINY_ARMS = ("softmax", "gla")
THRESHOLD = 0.9


def get_config(arg: str = ""):
  """configs/mqar.py (setup zoology), evaluated every 250 steps in 4 batches of 250 (tiny: its tiny setup)."""
  tiny = bool(config_lib.parse_options(arg, OPTIONS).get("tiny"))
  return protocol.task("mqar.py", {"eval.batch_size": 250, "train.eval_every": 250}, tiny)


arm_of = functools.partial(protocol.arm_of, arms=ARMS)   # a row's arm: its point's, else the one its overrides match


def _opts(arg: str) -> dict:
  opts = config_lib.parse_options(arg, OPTIONS)
  stage = protocol.choice(opts, "stage", STAGES, "main")
  if opts.get("hard") and stage != "seedcheck":
    raise ValueError(f"hard=True is a seedcheck option (stage {stage}: use stage=hard for the hard grid)")
  hard = stage == "hard" or bool(opts.get("hard"))
  (seeds, widths), where = (HARD_SEEDS, HARD_WIDTHS) if hard else (SEEDS, WIDTHS), f"stage {stage}"
  return {**opts, "stage": stage, "arms": protocol.arm_labels(opts, ARMS, tiny=TINY_ARMS), "hard": hard,
          "seeds": protocol.seeds(opts.get("seeds", seeds), seeds, where),
          "widths": protocol.numbers(opts, "widths", widths, allowed=widths, where=where)}


def point(arm: str, width: int, lr: float, seed: int, **more) -> dict:
  more = {**more, "model.init": INIT[arm]} if arm in INIT else more
  return protocol.point(ARMS, arm, {"model.d_model": width}, lr, seed, more)


def grid_extra(hard: bool) -> dict:
  """The overrides a grid point adds to point's: the hard point's task and step budget, or none (main)."""
  return {**HARD, "train.num_steps": HARD_STEPS} if hard else {}


# A point of the main (GRID_POINT[False]) or the hard (GRID_POINT[True]) grid.
GRID_POINT = {hard: lambda a, w, lr, s, hard=hard: point(a, w, lr, s, **grid_extra(hard)) for hard in (False, True)}
# Below 0.99 at the end and up by more than 0.01 over the last 500 steps of its eval curve (a row imported from the
# 2026-12-02 tables, without a curve, carries the tables' mark instead).
still_rising = protocol.still_rising(window=500, delta=0.01, below=0.99)
# The pilot's rule: the better of PILOT_LRS by final accuracy (ties: the smaller rate; a failed point loses); if
# that is the larger rate and it is still rising, seed 0 runs at 1e-2 too, which wins if better.
RULE = protocol.LrRule(PILOT_LRS, metric="accuracy", direction="max", edge="up", condition=still_rising,
                       condition_text="still rising")
TUNING = protocol.Tuning(RULE, lambda arm, cell, lr: point(arm, PILOT_WIDTH, lr, 0))
best_lr = TUNING.best   # best_lr(rows, arm) -> (the arm's rate or None, the pilot points still to run)
# The checks: does the rate chosen at PILOT_WIDTH serve CHECK_WIDTH (stage lrcheck: below 0.5 there while reaching
# 0.9 at PILOT_WIDTH, the other rates there); is a grid cell's split (one seed ≥ 0.9, one below 0.5) the rate's
# doing or the budget's (stage seedcheck: the failing seed at the other rates, and for SEEDCHECK_STEPS)?
LRCHECK = protocol.RateCheck(RULE, point, cell=CHECK_WIDTH, tuned_at=PILOT_WIDTH)
SEEDCHECK = {h: protocol.SeedCheck(RULE, GRID_POINT[h], {"train.num_steps": SEEDCHECK_STEPS}) for h in (False, True)}


def _grid(rows, opts: dict, lrs: dict) -> list[dict]:
  """The stage's grid (main or hard: its seeds x arms x widths, seed-major) at each arm's pilot rate."""
  del rows
  return protocol.at_rates(opts["seeds"], [(a, w) for a in opts["arms"] for w in opts["widths"]], lrs,
                           GRID_POINT[opts["hard"]], rate_key=lambda a, w: (a, None))


def _lrcheck(rows, opts: dict, lrs: dict) -> list[dict]:
  """Seed 0's main points at CHECK_WIDTH and PILOT_WIDTH (finished ones are skipped), then LRCHECK's other rates."""
  return LRCHECK.points(rows, {a: lrs[a, None] for a in opts["arms"] if lrs[a, None] is not None})


def _seedcheck(rows, opts: dict, lrs: dict) -> list[dict]:
  """The grid's points (finished ones are skipped), then each split cell's failing seed (SEEDCHECK's points)."""
  cells = [(a, w, lrs[a, None]) for a in opts["arms"] if lrs[a, None] is not None for w in opts["widths"]]
  return _grid(rows, opts, lrs) + SEEDCHECK[opts["hard"]].points(rows, cells, opts["seeds"])


# The study: the pilot (every arm at PILOT_WIDTH, seed 0, RULE's rates) chooses each arm's rate for every stage.
SWEEP = protocol.Study(
    _opts, TUNING, keys=lambda opts: [(a, None) for a in opts["arms"]],
    stages={"pilot": None, "main": _grid, "hard": _grid, "lrcheck": _lrcheck, "seedcheck": _seedcheck},
    tiny=lambda arm: {**ARMS[arm], "model.d_model": 16, "seed": 0}, pilot_todo=True, arm_of=arm_of)
get_sweep, get_followup_sweep = SWEEP.get_sweep, SWEEP.get_followup_sweep
# chosen(rows): the rows at their arm's pilot rate (undecided arms left out; rows without a rate, tiny=True's, kept).
chosen = functools.partial(SWEEP.chosen, arms=ARMS)


def get_plots(arg: str = ""):
  """Accuracy vs state size and vs width (main grid), vs width (hard grid), each grid at its own budget."""
  config = get_config(arg)
  main = {"data.seq_len": config.data.seq_len, "train.num_steps": config.train.num_steps}
  common_ = {"kind": "xy", "y": "accuracy", "group": arm_of, "select": chosen, "logx": 2}
  task, width = "MQAR (T={data.seq_len}, {data.num_kv_pairs} kv pairs", {"x": "model.d_model", "xlabel": "model width"}
  return [{"x": "state_size", "where": main, "file": "accuracy_vs_state_size.png", **common_,
           "title": task + "): accuracy vs recurrent state", "xlabel": "state size (floats / sequence)"},
          {"where": main, "file": "accuracy_vs_width.png", "title": task + "): accuracy vs width", **width, **common_},
          {"where": {"data.seq_len": 128, "train.num_steps": HARD_STEPS}, "file": "accuracy_vs_width_hard.png",
           "title": task + ", {train.num_steps} steps)", **width, **common_}]


def load_rows(workdir: str) -> list[dict]:
  """Rows of the stages' points that have a sub-workdir (finished or not), every stage's follow-ups replayed."""
  return tables.study_rows(os.path.join(_HERE, "config.py"), workdir, followup_args=FOLLOWUP_ARGS)


def _cell(row) -> str:
  """A point's final accuracy, ↑ when still rising; '…' when it has not run."""
  return tables.MISSING if row is None else tables.fmt(float(row["accuracy"])) + (" ↑" if still_rising(row) else "")


def pilot_table(rows) -> str:
  return tables.pilot_table(TUNING, rows, [(arm, None) for arm in ARMS], _cell)


def grid(rows, hard: bool) -> list[tables.Cell]:
  """A Cell per arm and width of the main (hard: hard) grid at the arm's pilot rate, once decided (its own points)."""
  keys = [(a, w) for a in ARMS for w in (HARD_WIDTHS if hard else WIDTHS)]
  return tables.cells(TUNING, rows, keys, "accuracy", GRID_POINT[hard], rate_key=lambda w: None)


def grid_table(cells, seeds: int = len(SEEDS)) -> str:
  """The grid's cells: state size, each of `seeds` seeds' accuracy, mean ± std, seeds reaching THRESHOLD and when."""
  size = lambda c: tables.first_count(c.rows, "state_size")
  return tables.columns(cells, [
      ("arm", lambda c: c.arm), ("width", lambda c: c.key), ("lr", lambda c: f"{c.lr:g}"), ("state (floats)", size),
      *tables.seed_columns(lambda c: tables.values(c.rows, "accuracy"), seeds, "accuracy", THRESHOLD, one=" (1 seed)",
                           steps=lambda c: c.rows)])


def lrcheck_table(rows) -> str:
  """Seed 0 at CHECK_WIDTH per learning rate, for the arms the lrcheck stage ran (LRCHECK.collapses)."""
  lrs = {arm: lr for arm in ARMS if (lr := best_lr(rows, arm)[0]) is not None}
  return tables.rate_check_table(LRCHECK, rows, lrs, _cell, f"chosen lr (width {PILOT_WIDTH})")


def seedcheck_table(rows, hard: bool = False) -> str:
  """Each main-grid (hard: hard-grid) cell whose seeds split (SEEDCHECK): the failing seed at every rate and at the
  chosen rate for SEEDCHECK_STEPS, beside the cell's other seeds at the chosen rate."""
  seeds, widths = (HARD_SEEDS, HARD_WIDTHS) if hard else (SEEDS, WIDTHS)
  cells = [(a, w, lr) for a in ARMS if (lr := best_lr(rows, a)[0]) is not None for w in widths]
  return tables.seed_check_table(SEEDCHECK[hard], rows, cells, seeds, _cell,
                                 longer_header=f"chosen lr, {SEEDCHECK_STEPS:,} steps")


def write(workdir: str, archive_dir: str = "", out: str = "") -> str:
  """Prints and returns the tables (writes them to `out`, every finished point as a row of the .csv beside it),
  from the points in `workdir` once those of `archive_dir` ('' = none) are restored into it."""
  rows = tables.restored(load_rows, workdir, archive_dir)
  rising, config, over = "; ↑ = still rising)", tables.config_value, tables.override
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
