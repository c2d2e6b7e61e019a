"""Study 1: Zoology's accuracy vs state size (Fig. 2) on a CPU — MQAR with every mixer, widths and seeds.

Three commands, one workdir (each later stage reuses the earlier stages' finished points; all resume; the
finished points are kept in experiments/mqar/points/, committed, and restored from it on a fresh machine):
  python -m linear_seq.studies.sweep --config=experiments/mqar/config.py:stage=pilot --workdir=runs/mqar \
      --archive=experiments/mqar/points --parallel=2
  python -m linear_seq.studies.sweep --config=experiments/mqar/config.py:stage=main --workdir=runs/mqar \
      --archive=experiments/mqar/points --parallel=2
  python -m linear_seq.studies.sweep --config=experiments/mqar/config.py:stage=hard --workdir=runs/mqar \
      --archive=experiments/mqar/points --parallel=2
Smoke test (2 points, ~1 min): :tiny=True.

Setup: configs/mqar.py's default (setup=2026-12, from experiments/mqar/ablation.py): vocab 1024, batch 64,
2 layers, 2 heads, no MLP, short convs (width 4) on q, k, v (deltanet and mamba2: their own), learned absolute
positions, LayerNorm, GPT-2 init, untied head, no output gate, AdamW with 50 warmup steps and weight decay
0.01; evaluation every 250 steps on the 1,000 validation sequences.
Stages:
  pilot: every arm at width 64, (T, kv) = (64, 4), seed 0, lr in {1e-3, 3e-3}; its follow-up adds lr 1e-2 for
         an arm whose better rate is 3e-3 and which is still rising there (below 0.99 and up by more than 0.01
         over its last 500 steps: `still_rising`).
  main:  the pilot, then each arm at its pilot lr (`best_lr`), widths {32, 64, 128}, seeds {0, 1, 2}, 1,500
         steps, seed-major (every arm and width of seed 0 before seed 1) so a partial grid stays balanced. An
         arm whose 1e-2 pilot point has not finished gets that point first and its main points on the next
         run of the command.
  hard:  (T, kv) = (128, 8), widths {64, 128}, seeds {0, 1} at the arm's pilot lr, HARD_STEPS = 1,500 steps
         (measured on the 2026-12 setup: softmax and GLA at width 64 pass 0.99 by step 500 / 750; a point
         costs ~3x its main-point twin, so seed, width and arm subsets keep each command under ~150 min).
  lrcheck: is an arm's failure at the smallest width its learning rate, chosen at width 64? Every arm whose
         seed-0 main point collapses at width 32 (below 0.5 there, >= 0.9 at width 64: `collapses_small`)
         runs width 32, seed 0 at the other rates of {1e-3, 3e-3, 1e-2}. Not part of the grid's tables or
         plots (they keep the pilot's rate); table.py lists them apart.
  seedcheck: is a cell whose seeds split (one >= 0.9, another below 0.5 at the arm's pilot rate:
         `split_seeds`) a rate on the edge, or a seed that is slow to leave the plateau? The failing seed
         reruns that width at the other rates of {1e-3, 3e-3, 1e-2}, and at the chosen rate for
         SEEDCHECK_STEPS = 3,000 steps (twice the grid's budget; its cosine schedule stretched to match). It
         reads the main grid's points of the stage's seeds (run it with the seeds that have finished, e.g.
         seeds=0+1, or it runs the others first); like lrcheck, apart from the grid's tables and plots. With
         hard=True it does the same for the hard point's grid (its seeds and widths; the longer run is
         SEEDCHECK_STEPS = twice HARD_STEPS too).
Options: stage=pilot|main|hard|lrcheck|seedcheck, arms=softmax+gla (a subset), seeds=0 or seeds=1+2 (a subset of the stage's
seeds, so one command fits a sitting: the points of the other seeds are left for a later command), widths=64 or
widths=64+128 (a subset of the stage's widths, the same way), hard=True (seedcheck only), tiny=True.
"""
import os

from linear_seq import config_lib
from linear_seq.studies import protocol

STUDY = "mqar"
_MQAR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "configs", "mqar.py")
OPTIONS = ("tiny", "stage", "arms", "seeds", "widths", "hard")
STAGES = ("pilot", "main", "hard", "lrcheck", "seedcheck")
# Every follow-up a complete study runs (the table enumerates its points from these).
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


def get_config(arg: str = ""):
  """configs/mqar.py (setup 2026-12), evaluated every 250 steps in 4 batches of 250 (tiny: its tiny setup)."""
  if config_lib.parse_options(arg, OPTIONS).get("tiny"):
    return config_lib.load_config(f"{_MQAR}:tiny=True")
  return config_lib.apply_overrides(config_lib.load_config(_MQAR),
                                    {"eval.batch_size": 250, "train.eval_every": 250})


def arm_of(row: dict) -> str:
  """The arm label of a result row: the one its point carries, else the arm its overrides match."""
  return protocol.arm_of(row, ARMS)


def _opts(arg: str) -> dict:
  opts = config_lib.parse_options(arg, OPTIONS)
  stage = protocol.choice(opts, "stage", STAGES, "main")
  names = list(TINY_ARMS) if opts.get("tiny") else config_lib.parse_subset(opts, "arms", list(ARMS), ARMS, "arm")
  if opts.get("hard") and stage != "seedcheck":
    raise ValueError(f"hard=True is a seedcheck option (stage {stage}: use stage=hard for the hard grid)")
  hard = stage == "hard" or bool(opts.get("hard"))
  seeds = protocol.seeds(opts.get("seeds", "+".join(map(str, HARD_SEEDS if hard else SEEDS))),
                         within=HARD_SEEDS if hard else SEEDS, where=f"stage {stage}")
  widths = _subset(opts, "widths", HARD_WIDTHS if hard else WIDTHS, stage)
  return {**opts, "stage": stage, "arms": names, "seeds": seeds, "widths": widths, "hard": hard}


def _subset(opts: dict, key: str, allowed: tuple, stage: str) -> tuple:
  """opts[key] as '64+128' -> those ints (a subset of `allowed`, the stage's values, in its order); absent ->
  `allowed`."""
  if key not in opts:
    return allowed
  wanted = [int(x) for x in str(opts[key]).split("+")]
  if not set(wanted) <= set(allowed):
    raise ValueError(f"{key}={opts[key]}: stage {stage} runs {key} {'+'.join(map(str, allowed))}")
  return tuple(v for v in allowed if v in wanted)


def point(arm: str, width: int, lr: float, seed: int, **more) -> dict:
  return protocol.point(ARMS, arm, {"model.d_model": width}, lr, seed, more)


def grid_extra(hard: bool) -> dict:
  """The overrides a grid point adds to point's: the hard point's task and step budget, or none (main)."""
  return {**HARD, "train.num_steps": HARD_STEPS} if hard else {}


def get_sweep(arg: str = ""):
  """The pilot's points (every stage starts from them: they choose each arm's learning rate)."""
  opts = _opts(arg)
  if opts.get("tiny"):
    return [{**ARMS[a], "model.d_model": 16, "seed": 0} for a in opts["arms"]]
  return [point(a, PILOT_WIDTH, lr, 0) for a in opts["arms"] for lr in PILOT_LRS]


def _curve(row: dict) -> list[tuple[int, float]]:
  return [(m["step"], m["eval_accuracy"]) for m in row.get("_metrics") or () if "eval_accuracy" in m]


def still_rising(row: dict, window: int = 500, delta: float = 0.01) -> bool:
  """Below 0.99 at the end and up by more than `delta` over the last `window` steps of its eval curve. A row
  without a curve (imported from the committed tables by import_rows.py) carries the tables' mark instead."""
  curve = _curve(row)
  if not curve:
    return bool(row.get("still_rising"))
  last_step, last = curve[-1]
  before = [a for s, a in curve if s <= last_step - window]
  return last < 0.99 and bool(before) and last - before[-1] > delta


# The pilot's rule: the better of PILOT_LRS by final accuracy (ties: the smaller rate; a failed point loses); if
# that is the larger rate and it is still rising, seed 0 runs at 1e-2 too (EXTRA_LR), which wins if better.
RULE = protocol.LrRule(PILOT_LRS, metric="accuracy", direction="max", edge="up", condition=still_rising,
                       condition_text="still rising")
EXTRA_LR = RULE.step(max(PILOT_LRS))
CHECK_LRS = tuple(RULE.rates())
TUNING = protocol.Tuning(RULE, lambda arm, cell, lr: point(arm, PILOT_WIDTH, lr, 0))


def pilot_rows(rows, arm: str) -> dict[float, dict]:
  """arm's seed-0 pilot rows (width 64, (64, 4)) by learning rate."""
  return TUNING.pilot_rows(rows, arm)


def best_lr(rows, arm: str) -> tuple[float | None, list[dict]]:
  """(the arm's learning rate, pilot points still to run before it is known): RULE over its pilot points."""
  decision = TUNING.decide(rows, arm)
  return decision.lr, [point(arm, PILOT_WIDTH, lr, 0) for lr in decision.todo]


def main_row(rows, arm: str, width: int, lr: float, seed: int = 0, **more):
  want = point(arm, width, lr, seed, **more)
  return next((r for r in rows if r.get("status") == "ok" and r.get("_overrides") == want), None)


def collapses_small(rows, arm: str, lr: float) -> bool:
  """arm's seed-0 main point at CHECK_WIDTH is below 0.5 while the one at PILOT_WIDTH reaches 0.9."""
  small, pilot = main_row(rows, arm, CHECK_WIDTH, lr), main_row(rows, arm, PILOT_WIDTH, lr)
  return (small is not None and pilot is not None and float(small.get("accuracy") or 0.0) < 0.5
          and float(pilot.get("accuracy") or 0.0) >= 0.9)


def split_seeds(rows, arm: str, width: int, lr: float, seeds=SEEDS, hard: bool = False) -> list[int]:
  """The seeds of arm's main (hard: hard) point (width, lr) below 0.5 when another of them reaches 0.9 (else [])."""
  extra = grid_extra(hard)
  acc = {s: float(r.get("accuracy") or 0.0) for s in seeds
         if (r := main_row(rows, arm, width, lr, s, **extra)) is not None}
  return [s for s in sorted(acc) if acc[s] < 0.5] if acc and max(acc.values()) >= 0.9 else []


def get_followup_sweep(rows, arg: str = ""):
  """pilot: the 1e-2 points still needed; main/hard: their grids at each arm's pilot lr."""
  opts = _opts(arg)
  if opts.get("tiny"):
    return []
  pending, lrs = [], {}
  for arm in opts["arms"]:
    lr, todo = best_lr(rows, arm)
    pending += todo
    if lr is not None:
      lrs[arm] = lr
  if opts["stage"] == "pilot":
    return pending
  if opts["stage"] == "main":
    grid = [point(a, w, lrs[a], s) for s in opts["seeds"] for a in opts["arms"] if a in lrs
            for w in opts["widths"]]
  elif opts["stage"] == "lrcheck":   # seed 0's main points first (finished ones are skipped), then the checks
    grid = [point(a, w, lrs[a], 0) for a in opts["arms"] if a in lrs for w in (CHECK_WIDTH, PILOT_WIDTH)]
    grid += [point(a, CHECK_WIDTH, lr, 0) for a in opts["arms"] if a in lrs and collapses_small(rows, a, lrs[a])
             for lr in CHECK_LRS if lr != lrs[a]]
  elif opts["stage"] == "seedcheck":   # the grid's points (finished ones are skipped), then the checks
    extra = grid_extra(opts["hard"])
    grid = [point(a, w, lrs[a], s, **extra)
            for s in opts["seeds"] for a in opts["arms"] if a in lrs for w in opts["widths"]]
    for a, w in [(a, w) for a in opts["arms"] if a in lrs for w in opts["widths"]]:
      for s in split_seeds(rows, a, w, lrs[a], opts["seeds"], hard=opts["hard"]):
        grid += [point(a, w, lr, s, **extra) for lr in CHECK_LRS if lr != lrs[a]]
        grid.append(point(a, w, lrs[a], s, **{**extra, "train.num_steps": SEEDCHECK_STEPS}))
  else:
    grid = [point(a, w, lrs[a], s, **grid_extra(True))
            for s in opts["seeds"] for a in opts["arms"] if a in lrs for w in opts["widths"]]
  return pending + grid


def chosen(rows) -> list[dict]:
  """The rows at their arm's pilot learning rate (the grid's points); the other pilot rates and the arms whose
  rate is not decided yet are left out (rows without a learning-rate override, e.g. tiny=True's, are kept)."""
  lrs = {}
  for r in rows:
    arm = arm_of(r)
    if arm not in lrs:
      lrs[arm] = best_lr(rows, arm)[0] if arm in ARMS else None
  return [r for r in rows if "train.learning_rate" not in r["_overrides"]
          or (lrs[arm_of(r)] is not None and r["_overrides"]["train.learning_rate"] == lrs[arm_of(r)])]


def get_plots(arg: str = ""):
  opts = _opts(arg)
  # The grid's own budget: seedcheck's longer points at the chosen rate stay out.
  main = {"data.seq_len": 16 if opts.get("tiny") else 64, "train.num_steps": get_config(arg).train.num_steps}
  common = {"y": "accuracy", "group": arm_of, "select": chosen, "logx": 2}
  return [
      {"kind": "xy", "x": "state_size", "where": main, "file": "accuracy_vs_state_size.png",
       "title": "MQAR (T={data.seq_len}, {data.num_kv_pairs} kv pairs): accuracy vs recurrent state", "xlabel": "state size (floats / sequence)",
       **common},
      {"kind": "xy", "x": "model.d_model", "where": main, "file": "accuracy_vs_width.png",
       "title": "MQAR (T={data.seq_len}, {data.num_kv_pairs} kv pairs): accuracy vs width", "xlabel": "model width", **common},
      {"kind": "xy", "x": "model.d_model", "where": {"data.seq_len": 128, "train.num_steps": HARD_STEPS},
       "file": "accuracy_vs_width_hard.png",
       "title": "MQAR (T={data.seq_len}, {data.num_kv_pairs} kv pairs, {train.num_steps} steps)", "xlabel": "model width", **common},
  ]
