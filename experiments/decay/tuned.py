"""How much decay, each arm at its own learning rate: retention at fixed gammas and GLA at gate temperatures on
MQAR's main point, tuned by the shared protocol (linear_seq/studies/protocol.py) — the example study of
experiments/README.md ("How to write a study").

  python -m linear_seq.studies.sweep --config=experiments/decay/tuned.py --workdir=runs/decay_tuned --parallel=2
  python -m linear_seq.studies.tables --table=experiments/decay/tuned.py --workdir=runs/decay_tuned \
      --out=runs/decay_tuned/study.md      # the tables (write() below) and study.csv
Seed 0 of every arm runs at 1e-3 and 3e-3 (and 1e-2 when 3e-3 wins); seeds 1.. at the arm's rate.
Options: seeds=N or seeds=0+2 (default 3), tiny=True (one arm, one rate, two seeds: a smoke test of 2 points).
"""
import os

from linear_seq import config_lib
from linear_seq.studies import common
from linear_seq.studies import protocol
from linear_seq.studies import tables

STUDY = "decay_tuned"
TASK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "configs", "mqar.py")
OPTIONS = ("tiny", "seeds")
ARMS = {
    **{f"retention-{g}": {"model.mixer": "retention", "model.gamma": g} for g in ("0.9", "0.99", "0.999")},
    **{f"gla-tau{t:g}": {"model.mixer": "gla", "model.gate_temperature": t} for t in (1.0, 4.0, 16.0)},
}
TINY_ARMS = ("gla-tau4",)
WIDTH = 64
THRESHOLD = 0.9
RULE = protocol.LrRule((1e-3, 3e-3), metric="accuracy", direction="max", edge="up")
TINY_RULE = protocol.LrRule((1e-3,), metric="accuracy", direction="max")


def _opts(arg: str) -> dict:
  opts = config_lib.parse_options(arg, OPTIONS)
  tiny = bool(opts.get("tiny"))
  arms = TINY_ARMS if tiny else tuple(ARMS)
  return {"tiny": tiny, "arms": arms, "seeds": protocol.seeds(opts.get("seeds", 2 if tiny else 3)),
          "tuning": protocol.Tuning(TINY_RULE if tiny else RULE, lambda arm, _, lr: point(arm, lr, 0))}


def _seeds(rows, opts: dict, lrs: dict) -> list[protocol.Point]:
  """Seeds 1.. at each arm's rate, seed-major (seed 0's point is its pilot point)."""
  del rows
  make = lambda arm, _, lr, seed: point(arm, lr, seed)
  return protocol.at_rates(opts["seeds"][1:], [(a, None) for a in opts["arms"]], lrs, make)


def point(arm: str, lr: float, seed: int) -> protocol.Point:
  return protocol.point(ARMS, arm, {"model.d_model": WIDTH}, lr, seed)


def get_config(arg: str = ""):
  """The task: configs/mqar.py's main point (tiny: its smoke test)."""
  return config_lib.load_config(f"{TASK}:tiny=True" if _opts(arg)["tiny"] else TASK)


# The sweep's hooks: seed 0 of every arm at every rate of the grid (the pilot); then the steps past the grid's
# edge still needed, then the other seeds at each arm's rate (tiny=True: the same on TINY_RULE's one rate).
SWEEP = protocol.Study(_opts, lambda opts: opts["tuning"], keys=lambda opts: [(a, None) for a in opts["arms"]],
                       stages={"main": _seeds})
get_sweep, get_followup_sweep = SWEEP.get_sweep, SWEEP.get_followup_sweep


def get_plots(arg: str = ""):
  chosen = lambda rows: SWEEP.chosen(rows, arg)   # each arm's rows at its rate
  return [{"kind": "xy", "x": protocol.arm_of, "y": "accuracy", "select": chosen, "file": "accuracy_by_arm.png",
           "title": "MQAR: accuracy by decay, each arm at its own rate", "xlabel": "arm"}]


def write(workdir: str, archive_dir: str = "", out: str = "", arg: str = "") -> str:
  """The study's tables (tables.py): the pilot, then each arm at its rate; writes study.md/.csv at `out`."""
  del archive_dir   # this example keeps no points folder
  opts = _opts(arg)
  here = os.path.abspath(__file__)
  rows = tables.study_rows(here, workdir, arg)
  cell = lambda r: tables.fmt(r["accuracy"])
  text = "### Pilot (seed 0)\n\n" + tables.pilot_table(opts["tuning"], rows, [(a, None) for a in opts["arms"]], cell)
  body, per_arm = [], {}
  for arm in opts["arms"]:
    lr = opts["tuning"].lr(rows, arm)
    mine = [] if lr is None else tables.cell_rows(rows, "accuracy", lambda seed: point(arm, lr, seed))
    accs = per_arm[arm] = tables.values(mine, "accuracy")
    body.append([arm, "…" if lr is None else f"{lr:g}", tables.per_seed(accs, len(opts["seeds"])),
                 tables.mean_std(accs), f"{sum(a >= THRESHOLD for a in accs)}/{len(accs)}"])
  text += "\n### Each arm at its rate\n\n" + tables.markdown(
      ["arm", "lr", "accuracy per seed", "mean ± std", f"seeds ≥ {THRESHOLD}"], body)
  best = max(per_arm, key=lambda a: sum(per_arm[a]) / len(per_arm[a]) if per_arm[a] else -1.0)
  text += f"\n### {best} (the best mean) against each arm\n\n" + tables.markdown(
      ["arm", f"separated (every seed apart); Welch's test of {best} better"],
      [[a, tables.verdict(per_arm[best], per_arm[a], "max")] for a in per_arm if a != best])
  if out:
    tables.write_csv(tables.csv_beside(out), ["arm", "lr", "seed", "accuracy"], [
        [r.get("_arm"), r["_overrides"].get("train.learning_rate"), r["_overrides"].get("seed"), r.get("accuracy")]
        for r in tables.ok(rows, "accuracy")])
  return common.emit_markdown(text, out)
