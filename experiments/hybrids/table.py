"""The hybrids study's tables (experiments/hybrids/config.py), both tasks, from their sweep directories.

  python experiments/hybrids/table.py [--mqar_workdir=runs/hybrids_mqar] [--lm_workdir=runs/hybrids_lm]
      [--out=experiments/hybrids/study.md] [--plots_dir=experiments/hybrids] [--check_workdir=runs/hybrids_mqar_check]
The archived points (points_mqar/, points_lm/) are restored into the workdirs first ('--archive=False': not).

task=lm's pure 2-layer arms (gla2, deltanet2, softmax2) come from the LM study (experiments/lm/points, restored
into --lm_study_workdir) when the hybrids sweep has not run them: the same model (layer_mixers listing one mixer
builds what `mixer` builds, parameter for parameter: tests/test_model.py), data, steps, width and seeds. Their
rate is the hybrids' rule applied to the LM study's seed-0 points (the better of LRS['lm'], or the step past
its edge); the table says which rows come from there.
Per task: the learning-rate pilot (seed 0 at each rate, the edge steps included; the chosen one), then every
arm at its chosen rate: layers, width, parameters, recurrent state (floats per sequence), each seed's metric,
mean ± std; and for each hybrid the gap to the pure linear model and to the pure softmax model of its depth
(+ = hybrid better), with whether the seeds separate (every seed of one better than every seed of the other).
"""
import os

from absl import app
from absl import flags

from linear_seq import config_lib
from linear_seq.studies import archive
from linear_seq.studies import collect
from linear_seq.studies import common
from linear_seq.studies import plots
from linear_seq.studies import sweep
from linear_seq.studies import tables

HERE = os.path.dirname(os.path.abspath(__file__))
PATH = os.path.join(HERE, "config.py")
LM_STUDY = os.path.join(HERE, "..", "lm", "config.py")
study = config_lib.load_module(PATH)  # by path: every study's config is named config.py
ARCHIVES = {"mqar": os.path.join(HERE, "points_mqar"), "lm": os.path.join(HERE, "points_lm")}
CHECK_ARCHIVE = os.path.join(HERE, "points_mqar_check")
# The MQAR check's sweeps (config arg): the softmax-first order, and 3,000 steps for gla,softmax and gla2.
# Both on the 2-rate grid (edge=False: they ran before the study's rule stepped past the grid's edge).
CHECKS = ("task=mqar,arms=softmax-gla,edge=False", "task=mqar,arms=gla-softmax+gla2,seeds=1,steps=3000,edge=False")
CURVE_STEPS = (500, 1000, 1500, 2000, 2500, 3000)
LM_ARCHIVE = os.path.join(HERE, "..", "lm", "points")
# the hybrids' pure 2-layer arm -> the LM study's arm
FROM_LM = {"gla2": "gla", "deltanet2": "deltanet", "softmax2": "softmax"}
# each hybrid -> (the pure linear model, the pure softmax model) of its depth
PAIRS = {"gla-softmax": ("gla2", "softmax2"), "deltanet-softmax": ("deltanet2", "softmax2"),
         "gla3-softmax": ("gla4", "softmax4"), "deltanet3-softmax": ("deltanet4", "softmax4")}


def _arg(task: str) -> str:
  return f"task={task}"


def sweep_rows(arg: str, workdir: str) -> list[dict]:
  """Rows of the hybrids sweep `arg`'s points that have a sub-workdir: seed 0 at every rate, then the follow-ups
  (the steps past the grid's edge, then the other seeds, at the grid's best rate while the step is pending)."""
  return tables.study_rows(PATH, workdir, arg,
                           hook=lambda rows: study.get_followup_sweep(rows, arg, provisional=True))


def load_rows(task: str, workdir: str) -> list[dict]:
  return sweep_rows(_arg(task), workdir)


def lm_study_rows(workdir: str, restore: bool) -> list[dict]:
  """The LM study's points of FROM_LM's arms at the hybrids' widths and rates, as hybrids rows (arm label in
  '_arm', '_from' = 'LM study')."""
  lm = config_lib.load_module(LM_STUDY)
  if restore:
    archive.restore_all(LM_ARCHIVE, workdir)
  wanted = []
  for (arm, _), w in study.widths(_arg("lm")).items():
    if arm in FROM_LM:
      wanted += [lm.point(FROM_LM[arm], w, lr, seed)
                 for lr in study.rates(_arg("lm")) for seed in range(study.SEEDS)]
  base = lm.get_config("stage=main")
  points = sweep.make_points(LM_STUDY, workdir, wanted, base_config=base, extra_commands=lm.get_extra_commands(""))
  rows = collect.collect([p for p in points if os.path.isdir(p.workdir)])
  inverse = {v: k for k, v in FROM_LM.items()}
  for r in rows:
    r["_arm"], r["_from"] = inverse[lm.label(r)], "LM study"
    # the hybrids' point keys, so that best_lr / chosen treat it like one of the study's own points
    o = dict(r["_overrides"])
    r["_lm_overrides"] = o
    r["_overrides"] = study.point(r["_arm"], o["model.d_model"], o["train.learning_rate"], o["seed"])
  return rows


def _arm(r) -> str:
  return r.get("_arm") or study.arm_of(r)


def _metric(task):
  return study.METRIC[task][0]


def _ok(rows, task):
  key = _metric(task)
  return [r for r in rows if r.get("status") == "ok" and isinstance(r.get(key), (int, float))]


def pilot_table(rows, task) -> str:
  arg = _arg(task)
  cell = lambda r: f"{r[_metric(task)]:.3f}" + (" ‡" if r.get("_from") else "")
  return tables.pilot_table(study.tuning(arg), rows, [(arm, w) for (arm, _), w in study.widths(arg).items()], cell,
                            lambda arm, w: (arm, study.num_layers(arm), w), ("arm", "layers", "width"),
                            provisional=True)


PROVISIONAL = ("\n† provisional: the better rate of the grid; the step past its edge (seed 0) has not finished "
               "yet.\n")


def cells(rows, task) -> dict[str, tuple[int, float, list[dict], bool]]:
  """{arm: (width, chosen rate, its finished rows sorted by seed, whether the rate is provisional)} for the arms
  whose rate is decided or provisional (the grid's best while the step past its edge has not finished)."""
  arg = _arg(task)
  out = {}
  ok = _ok(rows, task)
  for (arm, _), w in study.widths(arg).items():
    lr = study.best_lr(rows, arm, w, arg, provisional=True)
    if lr is None:
      continue
    cell = sorted((r for r in ok if r["_overrides"] == study.point(arm, w, lr, r["_overrides"]["seed"])),
                  key=lambda r: r["_overrides"]["seed"])
    out[arm] = (w, lr, cell, study.best_lr(rows, arm, w, arg) is None)
  return out


def _values(cell, task):
  return [float(r[_metric(task)]) for r in cell]


def main_table(cs, task) -> str:
  lines = ["| arm | layers | width | params | state (floats/seq) | lr | " + f"{_metric(task)} per seed | mean ± std |",
           "|---|---|---|---|---|---|---|---|"]
  for arm, (w, lr, cell, provisional) in cs.items():
    vals = _values(cell, task)
    per_seed = tables.per_seed(vals, study.SEEDS)
    first = cell[0] if cell else {}
    params = f"{int(first['num_params']):,}" if "num_params" in first else "…"
    state = f"{int(first['state_size']):,}" if "state_size" in first else "…"
    mark = " ‡" if any(r.get("_from") for r in cell) else ""
    lines.append(f"| {arm}{mark} | {study.num_layers(arm)} | {w} | {params} | {state} | {lr:g}"
                 f"{' †' if provisional else ''} | {per_seed} | "
                 f"{tables.mean_std(vals)} |")
  return "\n".join(lines) + "\n"


def gap_table(cs, task) -> str:
  """Each hybrid against the pure models of its depth: Δ = hybrid − other, signed so that + means the hybrid
  is better (accuracy higher / bits per byte lower)."""
  sign = 1.0 if study.METRIC[task][1] == "max" else -1.0
  lines = ["| hybrid | vs pure linear: Δ (seeds separate?) | vs pure softmax: Δ (seeds separate?) |", "|---|---|---|"]
  for hybrid, (linear, softmax) in PAIRS.items():
    if hybrid not in cs:
      continue
    h = _values(cs[hybrid][2], task)
    out = []
    for other in (linear, softmax):
      o = _values(cs[other][2], task) if other in cs else []
      if not h or not o:
        out.append(f"{other}: …")
        continue
      d = sign * (sum(h) / len(h) - sum(o) / len(o))
      out.append(f"{other}: {d:+.3f} ({tables.verdict(h, o)})")
    lines.append(f"| {hybrid} | " + " | ".join(out) + " |")
  return "\n".join(lines) + "\n"


def check_rows(workdir: str) -> list[dict]:
  """The MQAR check's finished points (CHECKS), each sweep's seed 0 at every rate and its follow-ups."""
  rows, seen = [], set()
  for r in (r for arg in CHECKS for r in sweep_rows(arg, workdir)):
    if r["name"] not in seen and r.get("status") == "ok":
      seen.add(r["name"])
      rows.append(r)
  return rows


def check_table(rows) -> str:
  """Per check point: arm, steps, rate, seed, final accuracy, and the evaluation accuracy at CURVE_STEPS."""
  lines = ["| arm | steps | lr | seed | accuracy | " + " | ".join(f"at {t:,}" for t in CURVE_STEPS) + " |",
           "|---|---|---|---|---|" + "---|" * len(CURVE_STEPS)]
  for r in rows:
    o = r["_overrides"]
    curve = {m["step"]: m["eval_accuracy"] for m in r.get("_metrics", []) if "eval_accuracy" in m}
    steps = int(r["_config"].get("train.num_steps", 0))
    lines.append(f"| {study.arm_of(r)} | {steps:,} | {o['train.learning_rate']:g} | {o['seed']} | "
                 f"{r['accuracy']:.3f} | " + " | ".join(f"{curve[t]:.3f}" if t in curve else "" for t in CURVE_STEPS)
                 + " |")
  return "\n".join(lines) + "\n"


TITLES = {"mqar": "MQAR (T=128, 8 key-value pairs, 1,500 steps; reference width 32): validation accuracy",
          "lm": "Shakespeare LM (1,200 steps, T=128; reference width 128): validation bits/byte"}


def write(mqar_workdir: str, lm_workdir: str, lm_study_workdir: str, restore: bool = True, out: str = "",
          plots_dir: str = "", check_workdir: str = "") -> str:
  """Prints and returns the tables (writes them to `out` too) and draws each task's plot (config.get_plots, PNG +
  PDF) into `plots_dir` ('' = none) from the same rows, the LM study's included."""
  text = ""
  for task, workdir in (("mqar", mqar_workdir), ("lm", lm_workdir)):
    if restore and os.path.isdir(ARCHIVES[task]):   # points_lm/ appears with task=lm's first finished point
      archive.restore_all(ARCHIVES[task], workdir)
    rows = load_rows(task, workdir)
    note = ""
    if task == "lm":
      have = {_arm(r) for r in rows}
      extra = [r for r in lm_study_rows(lm_study_workdir, restore) if r["_arm"] not in have]
      rows += extra
      if extra:
        note = ("\n‡ from the LM study (experiments/lm/points: the same model, data, steps and width; its seeds "
                f"0–{study.SEEDS - 1} at the rate this study's rule picks from its seed-0 points).\n")
    cs = cells(rows, task)
    if any(c[3] for c in cs.values()):
      note += PROVISIONAL
    if plots_dir:
      os.makedirs(plots_dir, exist_ok=True)
      plots.draw(study.get_plots(_arg(task)), rows, plots_dir)
    text += (f"## {TITLES[task]}\n\n### Learning-rate pilot (seed 0)\n\n" + pilot_table(rows, task) +
             "\n### Each arm at its chosen rate\n\n" + main_table(cs, task) + note +
             "\n### Hybrids against the pure models of their depth (+ = the hybrid is better)\n\n" +
             gap_table(cs, task) + "\n")
  if check_workdir:
    if restore and os.path.isdir(CHECK_ARCHIVE):
      archive.restore_all(CHECK_ARCHIVE, check_workdir)
    text += ("## MQAR check: layer order and training length (width 32; evaluation accuracy during training)\n\n"
             + check_table(check_rows(check_workdir)) + "\n")
  return common.emit_markdown(text, out)


def main(argv):
  del argv
  f = flags.FLAGS
  write(f.mqar_workdir, f.lm_workdir, f.lm_study_workdir, f.archive, f.out, f.plots_dir, f.check_workdir)


if __name__ == "__main__":   # flags defined here only (the tests load several study scripts in one process)
  flags.DEFINE_string("mqar_workdir", "runs/hybrids_mqar", "task=mqar's sweep directory.")
  flags.DEFINE_string("lm_workdir", "runs/hybrids_lm", "task=lm's sweep directory.")
  flags.DEFINE_string("lm_study_workdir", "runs/lm", "The LM study's sweep directory (its pure 2-layer rows).")
  flags.DEFINE_string("check_workdir", "runs/hybrids_mqar_check", "The MQAR check's sweep directory (CHECKS); '' = "
                      "no check table.")
  flags.DEFINE_bool("archive", True, "Restore the archived points (points_mqar/, points_lm/, the LM study's "
                    "points/) into the workdirs first.")
  flags.DEFINE_string("out", "", "Write the markdown here; '' = stdout only.")
  flags.DEFINE_string("plots_dir", "", "Draw the plots (PNG + PDF) here, e.g. experiments/hybrids; '' = none.")
  app.run(main)
