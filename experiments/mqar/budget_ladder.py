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
default all), factors=4 (a subset of FACTORS), tiny=True (one tiny point: a smoke test).
The table: accuracy at the end of each budget, the first evaluated step at 0.9 and 0.99, and the run's wall
minutes, beside softmax's 1x point (the study's, from experiments/mqar/points).
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
OPTIONS = ("tiny", "arms", "factors")
WIDTH, SEED = 64, 0
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


def point(arm: str, factor: int) -> dict:
  """The hard point at WIDTH, SEED, the arm's rate and init, factor x its steps (gla4: the gla arm, 4 layers)."""
  s = _study()
  extra = {**s.grid_extra(hard=True), "train.num_steps": factor * s.HARD_STEPS}
  if arm == "gla4":
    return {**s.point("gla", WIDTH, LR[arm], SEED, **extra), **GLA4}
  return s.point(arm, WIDTH, LR[arm], SEED, **extra)


def get_sweep(arg: str = ""):
  opts = config_lib.parse_options(arg, OPTIONS)
  if opts.get("tiny"):
    return [{"model.mixer": "s4", "model.d_model": 16, "seed": 0, "train.num_steps": 4}]
  arms = config_lib.parse_subset(opts, "arms", list(ARMS), list(ARMS), "arm")
  factors = [int(f) for f in config_lib.parse_subset(opts, "factors", [str(f) for f in FACTORS],
                                                     [str(f) for f in FACTORS], "factor")]
  return [point(a, f) for a in arms for f in ([1] if a == "gla4" else []) + factors]


def get_plots(arg: str = ""):
  del arg
  return []   # the result is a table


def write(workdir: str, archive_dir: str = "", out: str = "", arg: str = "") -> str:
  """One row per arm and budget: accuracy, the first steps at 0.9 / 0.99, wall minutes; softmax's 1x beside."""
  del archive_dir   # the tables CLI restores the archive into workdir first
  s = _study()
  rows = {protocol.key(r["_overrides"]): r for r in tables.study_rows(os.path.abspath(__file__), workdir, arg)}
  ones = [s.GRID_POINT[True](a, WIDTH, LR[a], SEED) for a in ("softmax", "s4", "mamba2")]   # the study's 1x
  with tempfile.TemporaryDirectory() as study_dir:
    archive.restore_all(s.ARCHIVE, study_dir, log=lambda *_: None)
    rows.update({protocol.key(r["_overrides"]): r for r in tables.rows_of(STUDY_CONFIG, study_dir, ones,
                                                                          s.get_config(""))})
  body = []
  for arm, factor in [("softmax", 1)] + [(a, f) for a in ARMS for f in (1, *FACTORS)]:
    study_point = factor == 1 and arm != "gla4"
    row = rows.get(protocol.key(ones[("softmax", "s4", "mamba2").index(arm)] if study_point else point(arm, factor)))
    done = row is not None and row.get("status") == "ok"
    wall = (row or {}).get("wall_time")
    body.append([arm, f"{factor}x ({factor * s.HARD_STEPS:,})", f"{LR[arm]:g}",
                 tables.fmt(row.get("accuracy")) if done else tables.MISSING,
                 *((tables.first_step(row, t) or "never") if done else tables.MISSING for t in (0.9, 0.99)),
                 f"{wall / 60:.0f}" if done and wall else tables.MISSING])
  text = (f"### Budget ladder: MQAR's hard point (T=128, 8 pairs), width {WIDTH}, seed {SEED}\n\n" +
          tables.markdown(["arm", "steps", "lr", "accuracy", "first step ≥ 0.9", "first step ≥ 0.99",
                           "wall min"], body))
  return common.emit_markdown(text, out)
