"""Issue 46's budget ladder: at MQAR's hard point, are the arms below 0.9 "cannot" or "not yet"?

  python -m linear_seq.studies.sweep --config=experiments/mqar/budget_ladder.py:arms=s4 \
      --workdir=runs/mqar_ladder --archive=experiments/mqar/ladder_points
  python -m linear_seq.studies.tables --table=experiments/mqar/budget_ladder.py --workdir=runs/mqar_ladder \
      --archive=experiments/mqar/ladder_points --out=experiments/mqar/ladder.md

The hard point (T=128, 8 pairs) of experiments/mqar/config.py at width 64, seed 0, each arm at the study's chosen
rate and init (config.py's `point`: Mamba-2 and S4D run `torch`), for FACTORS x the study's 1,500 steps (the
cosine schedule stretched, evaluated every 250 steps as the grid). The arms: the two of the study below 0.9
there (S4D, Mamba-2), and GLA with 4 layers, which stays on the plateau in the hybrids study at width 32
(0.113 / 0.031); it is not a study arm, so its 1x point runs here too, at the hybrids study's rate for it (1e-3).
Each arm's factors run in order (a partial run answers 4x first). Options: arms=s4+mamba2 (a subset of ARMS,
default all), factors=4 (a subset of FACTORS), seeds=1 (a subset of SEEDS, default 0: seed 1, the study's other
hard-point seed, repeats a rung), tiny=True (one tiny point: a smoke test).
The table: accuracy at the end of each budget, the first evaluated step at 0.9 and 0.99, and the run's wall
minutes, beside softmax's 1x point (the study's, from experiments/mqar/points); seed 0's rows, then seed 1's
where a rung of it ran (with the study's 1x points of that seed).
"""
import os
import tempfile

from linear_seq import config_lib
from linear_seq.studies import archive
from linear_seq.studies import common
from linear_seq.studies import protocol
from linear_seq.studies import tables

HERE = os.path.dirname(os.path.abspath(__file__))
STUDY = "mqar_ladder"
OPTIONS = ("tiny", "arms", "factors", "seeds")
WIDTH, SEED = 64, 0
SEEDS = (0, 1)   # the study's hard-point seeds (experiments/mqar/config.py's HARD_SEEDS)
FACTORS = (4, 16)
GLA4 = {"model.num_layers": 4}   # on the study's gla arm
ARMS = ("s4", "mamba2", "gla4")   # gla4 runs its 1x point here too
# Each arm's rate: the study's pilot (experiments/mqar/README.md; S4D's and Mamba-2's with the `torch` init), and
# for gla4 the hybrids study's choice for the 4-layer GLA.
LR = {"s4": 3e-3, "mamba2": 3e-3, "gla4": 1e-3, "softmax": 3e-3}
STUDY_CONFIG = os.path.join(HERE, "config.py")


def _study():
  return config_lib.load_module(STUDY_CONFIG)


def get_config(arg: str = ""):
  """experiments/mqar/config.py's config (tiny: its tiny setup)."""
  return _study().get_config("tiny=True" if config_lib.parse_options(arg, OPTIONS).get("tiny") else "")


def point(arm: str, factor: int, seed: int = SEED) -> dict:
  """The hard point at WIDTH, `seed`, the arm's rate and init, factor x its steps (gla4: the gla arm, 4 layers)."""
  s = _study()
  extra = {**s.grid_extra(hard=True), "train.num_steps": factor * s.HARD_STEPS}
  if arm == "gla4":
    return {**s.point("gla", WIDTH, LR[arm], seed, **extra), **GLA4}
  return s.point(arm, WIDTH, LR[arm], seed, **extra)


def _rungs(arms, factors) -> list[tuple[str, int]]:
  """(arm, factor) in the ladder's order: each arm's factors in turn, gla4 first at 1x (not a study arm)."""
  return [(a, f) for a in arms for f in ([1] if a == "gla4" else []) + list(factors)]


def get_sweep(arg: str = ""):
  opts = config_lib.parse_options(arg, OPTIONS)
  if opts.get("tiny"):
    return [{"model.mixer": "s4", "model.d_model": 16, "seed": 0, "train.num_steps": 4}]
  arms = config_lib.parse_subset(opts, "arms", list(ARMS), list(ARMS), "arm")
  factors = [int(f) for f in config_lib.parse_subset(opts, "factors", [str(f) for f in FACTORS],
                                                     [str(f) for f in FACTORS], "factor")]
  seeds = [int(x) for x in config_lib.parse_subset(opts, "seeds", [str(x) for x in SEEDS], [str(SEED)], "seed")]
  return [point(a, f, x) for x in seeds for a, f in _rungs(arms, factors)]


def get_plots(arg: str = ""):
  del arg
  return []   # the result is a table


def write(workdir: str, archive_dir: str = "", out: str = "", arg: str = "") -> str:
  """One row per arm and budget: accuracy, the first steps at 0.9 / 0.99, wall minutes; softmax's 1x beside."""
  del archive_dir   # the tables CLI restores the archive into workdir first
  s = _study()
  every = [point(a, f, x) for x in SEEDS for a, f in _rungs(ARMS, FACTORS)]
  rows = {protocol.key(r["_overrides"]): r for r in tables.study_rows(os.path.abspath(__file__), workdir, arg,
                                                                       first=every)}
  study_arms = ("softmax", "s4", "mamba2")
  ones = {(a, x): s.GRID_POINT[True](a, WIDTH, LR[a], x) for a in study_arms for x in SEEDS}   # the study's 1x
  with tempfile.TemporaryDirectory() as study_dir:
    archive.restore_all(s.ARCHIVE, study_dir, log=lambda *_: None)
    rows.update({protocol.key(r["_overrides"]): r for r in tables.rows_of(STUDY_CONFIG, study_dir, list(ones.values()),
                                                                          s.get_config(""))})
  done = lambda row: row is not None and row.get("status") == "ok"
  body = []
  rungs = [("softmax", 1)] + [(a, f) for a in ARMS for f in (1, *FACTORS)]   # (every arm's 1x: the table's)
  for seed in SEEDS:
    found = {}
    for arm, factor in rungs:
      found[arm, factor] = rows.get(protocol.key(ones[arm, seed] if factor == 1 and arm in study_arms
                                                 else point(arm, factor, seed)))
    if seed != SEED and not any(done(found[a, f]) for a, f in rungs if f > 1 or a == "gla4"):
      continue   # (another seed's rows only where one of its own rungs ran)
    for (arm, factor), row in found.items():
      wall = (row or {}).get("wall_time")
      body.append([arm, str(seed), f"{factor}x ({factor * s.HARD_STEPS:,})", f"{LR[arm]:g}",
                   tables.fmt(row.get("accuracy")) if done(row) else tables.MISSING,
                   *((tables.first_step(row, t) or "never") if done(row) else tables.MISSING for t in (0.9, 0.99)),
                   f"{wall / 60:.0f}" if done(row) and wall else tables.MISSING])
  text = (f"### Budget ladder: MQAR's hard point (T=128, 8 pairs), width {WIDTH}\n\n" +
          tables.markdown(["arm", "seed", "steps", "lr", "accuracy", "first step ≥ 0.9", "first step ≥ 0.99",
                           "wall min"], body))
  return common.emit_markdown(text, out)
