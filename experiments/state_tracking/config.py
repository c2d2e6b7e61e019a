"""Study 7: state tracking — which mixer can count, and does it hold at 8x the training length? (issue 44)

Every arm on parity, mod_count (m = 3, 5), mod_arith (m = 5) and the S3 / S5 permutation word problems
(configs/state_tracking.py, linear_seq/data/state_tracking.py): trained on lengths 3..40, evaluated at the
training lengths and on sequences of exactly 80, 160 and 320 tokens (2x, 4x, 8x). One layer for parity and the
modular tasks, one and two for the permutations. Each arm at its own learning rate (the protocol's pilot,
linear_seq/studies/protocol.py), 3 seeds. The budget and its measurement: experiments/state_tracking/README.md.

  python -m linear_seq.studies.sweep --config=experiments/state_tracking/config.py:stage=pilot \
      --workdir=runs/state_tracking --archive=experiments/state_tracking/points --parallel=2
  python -m linear_seq.studies.sweep --config=experiments/state_tracking/config.py:stage=long \
      --workdir=runs/state_tracking --archive=experiments/state_tracking/points --parallel=2
  python -m linear_seq.studies.sweep --config=experiments/state_tracking/config.py:stage=s5check \
      --workdir=runs/state_tracking --archive=experiments/state_tracking/points
  python -m linear_seq.studies.sweep --config=experiments/state_tracking/config.py:stage=paritycheck \
      --workdir=runs/state_tracking --archive=experiments/state_tracking/points
  python -m linear_seq.studies.sweep --config=experiments/state_tracking/config.py:stage=main,seeds=0 \
      --workdir=runs/state_tracking --archive=experiments/state_tracking/points --parallel=2   # then seeds=1, 2
  python -m linear_seq.studies.tables --table=experiments/state_tracking/config.py \
      --workdir=runs/state_tracking --out=experiments/state_tracking/study.md
Stages (each starts from the pilot's points, finished ones are skipped):
  pilot: seed 0 of every arm on PILOT_CELL (S3, one layer) at 1e-3 and 3e-3 (RULE; 1e-2 as well when 3e-3 wins
         and is below 0.99 there): the arm's learning rate for every task.
  main:  every arm x task cell x seed at the arm's rate, seed-major (seed 0 everywhere before seed 1), STEPS
         steps (CELL_STEPS for the cells the long check showed need more).
  long:  the check that STEPS passes the learning transition: seed 0 of LONG_ARMS[cell] (an arm the papers say
         can learn the cell) at the arm's rate for LONG_FACTOR x STEPS (its cosine schedule stretched to match).
  s5check: why S5 is not learned (the long check): seed 0 of S5_ARM on S5 with one layer at STEPS, once as the
         grid's point and once per S5_CHECK change (width, rate, training lengths).
Options: stage=pilot|main|long|s5check, seeds=0 or seeds=1+2 (a subset of 0, 1, 2), arms=gla+gla-neg (a subset),
tasks=S3+S5 (a subset of TASKS; every layer count of each), tiny=True (one arm, parity, one rate, two seeds:
a smoke test of 2 points).
"""
import os

from linear_seq import config_lib
from linear_seq import eval_lib
from linear_seq.data import state_tracking
from linear_seq.studies import collect
from linear_seq.studies import common
from linear_seq.studies import protocol
from linear_seq.studies import tables

STUDY = "state_tracking"
HERE = os.path.dirname(os.path.abspath(__file__))
TASK = os.path.join(HERE, "..", "..", "configs", "state_tracking.py")
ARCHIVE = os.path.join(HERE, "points")
OPTIONS = ("tiny", "stage", "seeds", "arms", "tasks")
STAGES = ("pilot", "main", "long", "s5check", "paritycheck")

NEG = {"model.negative_eigenvalues": True}   # deltanet/deltaproduct: beta in [0, 2]; gla/mamba2: alpha in [-1, 1]
# The init rule (experiments/mqar/README.md, issue 47): each arm's mixer layers as its reference implementation
# initializes them. fla's layers (linear, retention, GLA, DeltaNet, Gated DeltaNet, DeltaProduct) and HF Llama
# attention draw every nn.Linear from N(0, 0.02^2): the setup's INIT ('gpt2', which also scales the output
# projections by 1/sqrt(2 layers)); Mamba-2 (mamba_ssm, HF) keeps PyTorch's nn.Linear default: 'torch'.
INIT = "gpt2"
TORCH_INIT = {"model.init": "torch"}
ARMS = {
    "softmax": {"model.mixer": "softmax", "model.pos_encoding": "rope"},
    **protocol.arms("linear", "retention", "gla"),
    "gla-neg": {**protocol.MIXER_ARMS["gla"], **NEG},
    "mamba2": {**protocol.MIXER_ARMS["mamba2"], **TORCH_INIT},
    "mamba2-neg": {**protocol.MIXER_ARMS["mamba2"], **TORCH_INIT, **NEG},
    **protocol.arms("deltanet"),                                       # beta in [0, 1]
    "deltanet-neg": {**protocol.MIXER_ARMS["deltanet"], **NEG},        # beta in [0, 2]
    **protocol.arms("deltanet-scalar"),                                # Gated DeltaNet
    "deltanet-scalar-neg": {**protocol.MIXER_ARMS["deltanet-scalar"], **NEG},
    "deltaproduct2-neg": {"model.mixer": "deltaproduct", "model.householder_steps": 2, **NEG},
    "deltaproduct4-neg": {"model.mixer": "deltaproduct", "model.householder_steps": 4, **NEG},
}
# task -> its data overrides (the vocabulary is the task's own: state_tracking.vocab_needed) and layer counts
TASKS = {
    "parity": ({"data.dataset": "parity"}, (1,)),
    "mod_count3": ({"data.dataset": "mod_count", "data.modulus": 3}, (1,)),
    "mod_count5": ({"data.dataset": "mod_count", "data.modulus": 5}, (1,)),
    "mod_arith": ({"data.dataset": "mod_arith", "data.modulus": 5}, (1,)),
    "S3": ({"data.dataset": "permutation", "data.group": "S3"}, (1, 2)),
    "S5": ({"data.dataset": "permutation", "data.group": "S5"}, (1, 2)),
}
CELLS = tuple((t, n) for t, (_, layers) in TASKS.items() for n in layers)
SEEDS = (0, 1, 2)
# The model and budget (README: measured per-step times and the core-hours they add up to).
WIDTH = 32
STEPS = 1500
WARMUP = 100
EVAL_EVERY = 250          # interim evaluations on INTERIM_BATCHES batches of 100 at each length; the last on all 500
INTERIM_BATCHES = 1
PILOT_CELL = ("S3", 1)
THRESHOLD = 0.99          # a cell counts as solved by a seed at this accuracy
RULE = protocol.LrRule((1e-3, 3e-3), metric="accuracy", direction="max", edge="up",
                       condition=lambda row: float(row.get("accuracy") or 0.0) < THRESHOLD,
                       condition_text=f"below {THRESHOLD}")
# The long check: per cell, an arm that the published results say can learn it, for LONG_FACTOR x STEPS.
LONG_FACTOR = 4
LONG_ARMS = {("parity", 1): "deltanet-neg", ("mod_count3", 1): "deltanet-neg", ("mod_count5", 1): "deltanet-neg",
             ("mod_arith", 1): "deltaproduct2-neg", ("S3", 1): "deltaproduct2-neg", ("S3", 2): "deltanet-neg",
             ("S5", 1): "deltaproduct4-neg", ("S5", 2): "deltaproduct4-neg"}
# Cells whose learning transition the long check puts past STEPS but within LONG_FACTOR x STEPS train that long
# (README: deltanet-neg first reaches 0.99 at step 2,250 on mod_count m=5 and 4,250 on m=3). The cells the long
# check's arm does not learn in LONG_FACTOR x STEPS either (mod_arith, S3 with 2 layers, S5) stay at STEPS.
CELL_STEPS = {("mod_count3", 1): LONG_FACTOR * STEPS, ("mod_count5", 1): LONG_FACTOR * STEPS}
# The S5 check: the long check's S5 arm at STEPS, as the grid's point (its rate, WIDTH, lengths 3..40) and with
# one change each: the width (2 heads of 64 channels instead of 16), the rate (the pilot's other rate and 1e-2),
# the training lengths (3..10: is S5 learned by this layer at all when the words are short?), and at lengths
# 3..10 the steps, the init, the heads and the width.
S5_ARM, S5_CELL = "deltaproduct4-neg", ("S5", 1)
SHORT = {"data.seq_len": 10}
S5_CHECK = {"grid point": {}, "width 128": {"model.d_model": 128}, "lr 1e-3": {"train.learning_rate": 1e-3},
            "lr 1e-2": {"train.learning_rate": 1e-2}, "lengths 3..10": SHORT,
            # then, at the short lengths (a run costs ~1 min): 4x the steps, the layers' default init instead of
            # the setup's N(0, 0.02^2), one head of 32 channels, width 128
            "lengths 3..10, 6,000 steps": {**SHORT, "train.num_steps": LONG_FACTOR * STEPS},
            "lengths 3..10, init default": {**SHORT, "model.init": "default"},
            "lengths 3..10, 1 head": {**SHORT, "model.num_heads": 1},
            "lengths 3..10, width 128": {**SHORT, "model.d_model": 128}}
# The parity check: mamba2-neg stays below mamba2 on parity in the main runs (0/3 seeds solve it), against Grazzi
# et al. At WIDTH its 2 x 32 inner channels make one head of mamba_head_dim = 64: one step size Δ and one
# transition 2 exp(ΔA) − 1 per token for the whole state. Each change: (arm, overrides, seeds); a rate in the
# overrides replaces the arm's. The head splits at WIDTH keep the state's size (heads x 64 x head_dim = 4,096).
PARITY_CELL = ("parity", 1)
PARITY_CHECK = {
    "grid point": ("mamba2-neg", {}, (0,)),
    "4 heads of 16 channels": ("mamba2-neg", {"model.mamba_head_dim": 16}, SEEDS),
    "4 heads of 16, no negative eigenvalues": ("mamba2", {"model.mamba_head_dim": 16}, SEEDS),
    "8 heads of 8 channels": ("mamba2-neg", {"model.mamba_head_dim": 8}, (0,)),
    "width 128 (4 heads of 64)": ("mamba2-neg", {"model.d_model": 128}, SEEDS),
    "lr 1e-3": ("mamba2-neg", {"train.learning_rate": 1e-3}, (0,)),
    "lr 3e-3": ("mamba2-neg", {"train.learning_rate": 3e-3}, (0,)),
    "6,000 steps": ("mamba2-neg", {"train.num_steps": LONG_FACTOR * STEPS}, (0,)),
    "Δ init in [0.01, 1]": ("mamba2-neg", {"model.dt_min": 1e-2, "model.dt_max": 1.0}, (0,)),
    "scan form": ("mamba2-neg", {"model.mode": "recurrent"}, (0,)),
}
# Pairs the published directions compare (the first predicted better): negative eigenvalues, Householder steps.
PAIRS = (("gla-neg", "gla"), ("mamba2-neg", "mamba2"), ("deltanet-neg", "deltanet"),
         ("deltanet-scalar-neg", "deltanet-scalar"), ("deltaproduct2-neg", "deltanet-neg"),
         ("deltaproduct4-neg", "deltaproduct2-neg"))
TINY_ARMS, TINY_CELLS = ("deltanet-neg",), (("parity", 1),)
TINY_RULE = protocol.LrRule((1e-3,), metric="accuracy", direction="max")


def _opts(arg: str) -> dict:
  opts = config_lib.parse_options(arg, OPTIONS)
  tiny = bool(opts.get("tiny"))
  stage = protocol.choice(opts, "stage", STAGES, "main")
  arms = TINY_ARMS if tiny else tuple(config_lib.parse_subset(opts, "arms", list(ARMS), list(ARMS), "arm"))
  tasks = config_lib.parse_subset(opts, "tasks", list(TASKS), list(TASKS), "task")
  cells = TINY_CELLS if tiny else tuple(c for c in CELLS if c[0] in tasks)
  seeds = protocol.seeds(opts.get("seeds", 2 if tiny else "+".join(map(str, SEEDS))),
                         within=None if tiny else SEEDS, where="the study")
  pilot_cell = TINY_CELLS[0] if tiny else PILOT_CELL
  tuning = protocol.Tuning(TINY_RULE if tiny else RULE, lambda arm, _, lr: point(arm, pilot_cell, lr, 0, tiny))
  return {"tiny": tiny, "stage": stage, "arms": arms, "cells": cells, "seeds": seeds, "tuning": tuning}


def cell_overrides(cell: tuple[str, int], tiny: bool = False) -> dict:
  """A task cell's overrides: its data fields, its vocabulary (tiny: the tiny config's 8, which holds parity's)
  and its number of layers."""
  task, layers = cell
  data = dict(TASKS[task][0])
  vocab = state_tracking.vocab_needed(data["data.dataset"], modulus=data.get("data.modulus", 2),
                                      group=data.get("data.group", "S3"))
  return {**data, **({} if tiny else {"data.vocab_size": vocab}), "model.num_layers": layers}


def cell_budget(cell: tuple[str, int], tiny: bool = False) -> dict:
  """The cell's step override where CELL_STEPS sets one (none in tiny mode)."""
  return {} if tiny or cell not in CELL_STEPS else {"train.num_steps": CELL_STEPS[cell]}


def point(arm: str, cell: tuple[str, int], lr: float, seed: int, tiny: bool = False, **extra) -> protocol.Point:
  """{**arm, **cell, lr, seed, **extra} (protocol.point), carrying the arm."""
  return protocol.point(ARMS, arm, cell_overrides(cell, tiny), lr, seed, extra)


def long_extra() -> dict:
  """The long check's overrides: LONG_FACTOR x the steps (evaluated every EVAL_EVERY steps, as the grid)."""
  return {"train.num_steps": LONG_FACTOR * STEPS}


def get_config(arg: str = ""):
  """configs/state_tracking.py (task parity: the points set their task) at the study's width and budget."""
  if _opts(arg)["tiny"]:
    return config_lib.load_config(f"{TASK}:tiny=True")
  return config_lib.apply_overrides(config_lib.load_config(TASK), {
      "model.d_model": WIDTH, "model.init": INIT, "train.num_steps": STEPS, "train.warmup_steps": WARMUP,
      "train.eval_every": EVAL_EVERY, "train.checkpoint_every": STEPS // 2,
      "eval.interim_max_batches": INTERIM_BATCHES})


def get_sweep(arg: str = ""):
  """The pilot: seed 0 of every arm on PILOT_CELL at every rate of the grid (every stage starts from it)."""
  opts = _opts(arg)
  return [opts["tuning"].pilot(a, None, lr) for a in opts["arms"] for lr in opts["tuning"].rule.grid]


def get_followup_sweep(rows, arg: str = ""):
  """The steps past the grid's edge still needed; main: then every cell at each arm's rate, seed-major; long:
  then LONG_ARMS' seed-0 points for LONG_FACTOR x STEPS."""
  opts = _opts(arg)
  lrs, todo = opts["tuning"].plan(rows, [(a, None) for a in opts["arms"]])
  lr = lambda arm: lrs[arm, None]
  if opts["stage"] == "main":
    make = lambda s, ac: None if lr(ac[0]) is None else point(*ac, lr(ac[0]), s, opts["tiny"],
                                                              **cell_budget(ac[1], opts["tiny"]))
    todo += protocol.seed_major(opts["seeds"], [(a, c) for c in opts["cells"] for a in opts["arms"]], make)
  elif opts["stage"] == "long":
    todo += [point(a, c, lr(a), 0, opts["tiny"], **long_extra()) for c in opts["cells"]
             if (a := LONG_ARMS[c]) in opts["arms"] and lr(a) is not None]
  elif opts["stage"] == "s5check" and S5_ARM in opts["arms"] and lr(S5_ARM) is not None:
    todo += protocol.new_points([s5_point(lr(S5_ARM), change) for change in S5_CHECK.values()])
  elif opts["stage"] == "paritycheck":
    todo += protocol.new_points([parity_point(arm, lr(arm), change, seed)
                                 for arm, change, seeds in PARITY_CHECK.values() if arm in opts["arms"]
                                 and lr(arm) is not None for seed in seeds])
  return todo


def check_point(arm: str, cell: tuple[str, int], lr: float, change: dict, seed: int = 0) -> protocol.Point:
  """A check's point: the arm on the cell with one change (a rate in `change` replaces the arm's)."""
  change = dict(change)
  return point(arm, cell, change.pop("train.learning_rate", lr), seed, **change)


def s5_point(lr: float, change: dict) -> protocol.Point:
  """The S5 check's point for one change."""
  return check_point(S5_ARM, S5_CELL, lr, change)


def parity_point(arm: str, lr: float, change: dict, seed: int) -> protocol.Point:
  """The parity check's point for one change and seed."""
  return check_point(arm, PARITY_CELL, lr, change, seed)


def label(cell: tuple[str, int]) -> str:
  return f"{cell[0]}, {cell[1]} layer" + ("s" if cell[1] > 1 else "")


def lengths(arg: str = "") -> tuple[int, ...]:
  """The training length (the eval at it draws lengths up to it) and the longer evaluation lengths."""
  base = get_config(arg)
  return (int(base.data.seq_len),) + eval_lib.eval_lengths(base)


def cell_rows(rows, opts: dict, cell: tuple[str, int], **extra) -> dict[str, list[dict]]:
  """{arm: its finished rows of `cell` at the arm's rate, by seed} (extra: the long check's overrides; without
  them the cell's budget)."""
  index, out = protocol.index(tables.ok(rows, "accuracy")), {}
  extra = extra or cell_budget(cell, opts["tiny"])
  for arm in opts["arms"]:
    lr = opts["tuning"].lr(rows, arm)
    found = [] if lr is None else [index.get(protocol.key(point(arm, cell, lr, s, opts["tiny"], **extra)))
                                   for s in opts["seeds"]]
    out[arm] = [r for r in found if r is not None]
  return out


def get_plots(arg: str = ""):
  """Per cell: accuracy per arm at each evaluation length (seeds as dots, the mean a tick)."""
  opts, lens = _opts(arg), lengths(arg)
  length_of = lambda r: f"T≤{r['length']} (training)" if r["length"] == lens[0] else f"T={r['length']}"

  def select(cell):
    return lambda rows: collect.by_length([r for rs in cell_rows(rows, opts, cell).values() for r in rs],
                                          "accuracy", lens)
  return [{"kind": "xy", "x": protocol.arm_of, "y": "accuracy", "group": length_of, "select": select(c),
           "groups": [length_of({"length": n}) for n in lens], "xlabel": "arm",
           "file": f"accuracy_{c[0]}_{c[1]}layer.png",
           "title": f"{label(c)}: accuracy at the training lengths and longer, each arm at its rate"}
          for c in opts["cells"]]


def at(row: dict, length: int, train_len: int) -> float | None:
  """The row's accuracy at an evaluation length (eval.json's at the training lengths, else accuracy@T<L>)."""
  value = row.get("accuracy") if length == train_len else row.get(f"accuracy@T{length}")
  return float(value) if tables.is_number(value) else None


def gap(a: list[float], b: list[float]) -> str:
  """'+0.450 (yes)': mean(a) − mean(b) and whether their seeds separate (tables.verdict); '…' without both."""
  if not a or not b:
    return tables.MISSING
  return f"{common.mean_std(a)[0] - common.mean_std(b)[0]:+.3f} ({tables.verdict(a, b)})"


def cell_of(row: dict, tiny: bool = False) -> tuple[str, int] | None:
  """The task cell whose overrides the row's point has."""
  return next((c for c in (TINY_CELLS if tiny else CELLS)
               if all(row["_overrides"].get(k) == v for k, v in cell_overrides(c, tiny).items())), None)


def other_overrides(row: dict, tiny: bool = False) -> str:
  """The row's overrides beyond its arm, cell, rate, seed and step budget (the S5 check's change), as k=v;..."""
  arm, cell = protocol.arm_of(row, ARMS), cell_of(row, tiny)
  known = {*ARMS.get(arm, {}), *(cell_overrides(cell, tiny) if cell else {}), "train.learning_rate", "seed",
           "train.num_steps"}
  return ";".join(f"{k}={v}" for k, v in row["_overrides"].items() if k not in known)


def write(workdir: str, archive_dir: str = "", out: str = "", arg: str = "") -> str:
  """The study's tables (tables.py): the pilot; per cell, each arm's accuracy at every length (per seed, mean ±
  std, the seeds reaching THRESHOLD); the published directions' pairs (difference of the means at each length,
  and whether the seeds separate); the long check. Writes study.md and study.csv at `out`."""
  del archive_dir   # the tables CLI restores ARCHIVE into workdir first
  opts, lens = _opts(arg), lengths(arg)
  kept = ",".join(f"{k}={v}" for k, v in config_lib.parse_options(arg, OPTIONS).items() if k != "stage")
  followups = [arg] if opts["tiny"] else [",".join(filter(None, (kept, f"stage={s}"))) for s in STAGES[1:]]
  rows = tables.study_rows(os.path.abspath(__file__), workdir, arg, followup_args=followups)
  name = lambda n: f"T≤{n}" if n == lens[0] else f"T={n}"
  values = lambda rs, n: [v for r in rs if (v := at(r, n, lens[0])) is not None]
  seeds = len(opts["seeds"])
  text = f"### Learning-rate pilot (seed 0, {label(TINY_CELLS[0] if opts['tiny'] else PILOT_CELL)})\n\n"
  text += tables.pilot_table(opts["tuning"], rows, [(a, None) for a in opts["arms"]],
                             lambda r: tables.fmt(r["accuracy"]))
  header = [f"{name(lens[0])} per seed", "mean ± std", *(name(n) for n in lens[1:-1]), f"{name(lens[-1])} per seed",
            "mean ± std", f"seeds ≥ {THRESHOLD} ({name(lens[0])} · {name(lens[-1])})"]

  def accuracies(rs: list[dict], lr: float | None, seeds: int) -> list[str]:
    """lr, then the `header` columns: per seed and mean ± std at the training lengths, the means at the longer
    lengths, per seed and mean ± std at the longest, and the seeds reaching THRESHOLD."""
    first, last = values(rs, lens[0]), values(rs, lens[-1])
    return ["…" if lr is None else f"{lr:g}", tables.per_seed(first, seeds), tables.mean_std(first),
            *(tables.mean_std(values(rs, n)) for n in lens[1:-1]), tables.per_seed(last, seeds),
            tables.mean_std(last), f"{sum(v >= THRESHOLD for v in first)}/{len(first)} · "
            f"{sum(v >= THRESHOLD for v in last)}/{len(last)}"]

  by_cell = {c: cell_rows(rows, opts, c) for c in opts["cells"]}
  for cell, per_arm in by_cell.items():
    body = [[arm, *accuracies(rs, opts["tuning"].lr(rows, arm), seeds)] for arm, rs in per_arm.items()]
    steps = CELL_STEPS.get(cell, STEPS) if not opts["tiny"] else None
    text += (f"\n### {label(cell)}: accuracy at each evaluation length" + (f" ({steps:,} steps)" if steps else "") +
             "\n\n") + tables.markdown(["arm", "lr", *header], body)
  pairs = [(a, b) for a, b in PAIRS if a in opts["arms"] and b in opts["arms"]]
  if pairs:
    body = []
    for (a, b), cell in [(p, c) for p in pairs for c in opts["cells"]]:
      body.append([f"{a} − {b}", label(cell),
                   *(gap(values(by_cell[cell][a], n), values(by_cell[cell][b], n)) for n in lens)])
    text += ("\n### The published directions: difference of the means (first − second) and whether the seeds "
             "separate\n\n" + tables.markdown(["pair", "task", *(name(n) for n in lens)], body))
  body = []
  for cell in opts["cells"]:
    arm = LONG_ARMS.get(cell)
    if arm not in opts["arms"] or (lr := opts["tuning"].lr(rows, arm)) is None:
      continue
    # a CELL_STEPS cell's grid runs at the long check's steps: its seed-0 grid point is the long run itself
    short = [] if cell in CELL_STEPS else [r for r in by_cell[cell][arm] if r["_overrides"]["seed"] == 0]
    long_ = cell_rows(rows, {**opts, "arms": (arm,), "seeds": (0,)}, cell, **long_extra())[arm]
    one = lambda rs, n: tables.fmt(values(rs, n)[0] if values(rs, n) else None)
    reached = long_ and tables.first_step(long_[0], THRESHOLD)
    body.append([label(cell), arm, f"{lr:g}", *(f"{one(short, n)} → {one(long_, n)}" for n in lens),
                 tables.MISSING if not long_ else (f"{reached:,}" if reached else "never")])
  if body:
    text += (f"\n### Long check: seed 0 at {STEPS:,} → {LONG_FACTOR * STEPS:,} steps (… → x: a cell whose grid "
             f"runs {LONG_FACTOR * STEPS:,} steps, CELL_STEPS)\n\n" + tables.markdown(
        ["task", "arm", "lr", *(name(n) for n in lens),
         f"first step ≥ {THRESHOLD} at {name(lens[0])} (long run, every {EVAL_EVERY} steps on 100 sequences)"], body))
  index = protocol.index(tables.ok(rows, "accuracy"))
  lr = opts["tuning"].lr(rows, S5_ARM) if S5_ARM in opts["arms"] and not opts["tiny"] else None
  if lr is not None:
    found = {name_: index.get(protocol.key(s5_point(lr, c))) for name_, c in S5_CHECK.items()}
    text += (f"\n### S5 check: {S5_ARM}, {label(S5_CELL)}, seed 0, {STEPS:,} steps unless stated, one change "
             f"each\n\n" + tables.markdown(["change", "at its training lengths", *(name(n) for n in lens[1:])],
                             [[k, *(tables.fmt(at(r, n, lens[0]) if r else None) for n in lens)]
                              for k, r in found.items()]))
  lrs = {arm: opts["tuning"].lr(rows, arm) for arm, _, _ in PARITY_CHECK.values()
         if arm in opts["arms"] and not opts["tiny"]}
  checked = [(k, arm, change, seeds_) for k, (arm, change, seeds_) in PARITY_CHECK.items()
             if lrs.get(arm) is not None]
  if checked:
    body = []
    for k, arm, change, seeds_ in checked:
      point_lr = lrs[arm]
      found = [index.get(protocol.key(parity_point(arm, point_lr, change, s))) for s in seeds_]
      body.append([k, arm, *accuracies([r for r in found if r is not None],
                                       change.get("train.learning_rate", point_lr), len(seeds_))])
    text += (f"\n### Parity check: {label(PARITY_CELL)}, {STEPS:,} steps unless stated, one change each "
             f"(seed 0, or seeds {'/'.join(map(str, SEEDS))})\n\n" + tables.markdown(["change", "arm", "lr", *header],
                                                                                  body))
  if out:
    tables.write_csv(tables.csv_beside(out), ["arm", "task", "layers", "lr", "seed", "steps", "other overrides",
                                              *(f"accuracy_T{n}" for n in lens)], [
        [protocol.arm_of(r, ARMS), *(cell_of(r, opts["tiny"]) or (None, None)),
         r["_overrides"].get("train.learning_rate"), r["_overrides"].get("seed"), r.get("step"),
         other_overrides(r, opts["tiny"]), *(at(r, n, lens[0]) for n in lens)] for r in tables.ok(rows, "accuracy")])
  return common.emit_markdown(text, out)
