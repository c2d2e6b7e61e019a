"""Study 6: one softmax layer among linear ones — does it close the recall gap, and at what LM cost?

Arms: ARMS (model.layer_mixers, one mixer per layer), each at the width of WIDTHS whose parameter count is nearest
the pure softmax model's of its depth at the reference width; each (arm, reference width)'s rate from seed 0 by
protocol.LrRule, then seeds 1.. at it. The commands, the tasks and why: README.md; the options and the tables
write() prints: its "Options and tables". Smoke test: :tiny=True (2 points).
Options: task=mqar|lm, tiny=True, seeds=N or seeds=0+2 (default 2), arms=gla-softmax+gla2, lrs=1e-3+3e-3,
edge=False, widths=32+64 (reference widths), steps=N.
"""
import functools
import os

from linear_seq import config_lib
from linear_seq.studies import common
from linear_seq.studies import params
from linear_seq.studies import plots
from linear_seq.studies import protocol
from linear_seq.studies import tables

STUDY = "hybrids"
_HERE = os.path.dirname(os.path.abspath(__file__))
_LM_STUDY = os.path.join(_HERE, "..", "lm", "config.py")
# write()'s sweep directories (under its workdir) -> the points folders restored into them.
ARCHIVE = {**{f"hybrids_{d}": os.path.join(_HERE, f"points_{d}") for d in ("mqar", "lm", "mqar_check")},
           "lm": os.path.join(_HERE, "..", "lm", "points")}
OPTIONS = ("task", "tiny", "seeds", "arms", "lrs", "edge", "widths", "steps")
TASKS = ("mqar", "lm")
# label ('gla3-softmax': a mixer's count of layers after its name) -> model.layer_mixers and model.num_layers. The
# last two, the 2-layer hybrids with the softmax layer first (the layer-order check), are not in the default set.
ARMS = protocol.layer_arms(
    "gla,softmax", "deltanet,softmax", "gla,gla,gla,softmax", "deltanet,deltanet,deltanet,softmax", "gla,gla",
    "deltanet,deltanet", "softmax,softmax", "gla,gla,gla,gla", "deltanet,deltanet,deltanet,deltanet",
    "softmax,softmax,softmax,softmax", "softmax,gla", "softmax,deltanet")
DEFAULT_ARMS = tuple(ARMS)[:10]
SEEDS = 2
REFERENCE_WIDTHS = {"mqar": (32,), "lm": (128,)}
WIDTHS = {"mqar": tuple(range(16, 97, 8)), "lm": tuple(range(96, 161, 8))}   # multiples of 8: 4 heads, RoPE-even
LRS = {"mqar": (1e-3, 3e-3), "lm": (3e-3, 1e-2)}
METRIC = {"mqar": ("accuracy", "max"), "lm": ("bits_per_byte", "min")}
TINY_ARMS = ("gla-softmax", "softmax2")


def _opts(arg: str) -> dict:
  opts = protocol.options(arg, OPTIONS, ARMS, DEFAULT_ARMS, TINY_ARMS, SEEDS, flags={"edge": True})
  task = protocol.choice(opts, "task", TASKS, "mqar")
  # "arg": the option string itself (widths(arg) is cached by it)
  return {**opts, "arg": arg, "task": task, "lrs": protocol.numbers(opts, "lrs", LRS[task], float),
          "widths": protocol.numbers(opts, "widths", REFERENCE_WIDTHS[task]),
          "steps": protocol.numbers(opts, "steps", [None])[0]}


def get_config(arg: str = ""):
  """The task's preset: configs/shakespeare.py's LM budget, or configs/mqar.py's hard point evaluated as the MQAR
  study does (every 250 steps, 1,000 sequences in 4 batches); tiny: their smoke tests."""
  opts = _opts(arg)
  preset = {"lm": ("shakespeare.py", {}),
            "mqar": ("mqar.py:point=hard", {"eval.batch_size": 250, "train.eval_every": 250})}[opts["task"]]
  return protocol.task(*preset, tiny=bool(opts.get("tiny")))


def num_layers(arm: str) -> int:
  return ARMS[arm]["model.num_layers"]


arm_of = functools.partial(protocol.arm_of, arms=ARMS)   # a row's arm: its point's, else its overrides'


@functools.lru_cache(maxsize=None)
def widths(arg: str = "") -> dict[tuple[str, int], int]:
  """{(arm, reference width): the arm's width}: its parameter count nearest the pure softmax model's of the same
  depth (softmax2 or softmax4) at the reference width; by reference width, then depth (cached: the plots ask per
  row)."""
  opts = _opts(arg)
  by_depth = {a: ARMS[a] for a in sorted(opts["arms"], key=num_layers)}
  pure = lambda arm: ARMS[f"softmax{num_layers(arm)}"]
  return params.matched_cells(get_config(arg), by_depth, WIDTHS[opts["task"]], pure, opts["widths"])


def point(arm: str, width: int, lr: float, seed: int, steps: int | None = None) -> dict:
  """A point's overrides; `steps` (the steps=N option) sets train.num_steps, otherwise the task's own budget."""
  return protocol.point(ARMS, arm, {"model.d_model": width}, lr, seed, steps and {"train.num_steps": steps})


def _tuning(opts: dict) -> protocol.Tuning:
  """The task's rule on seed 0's points: the grid `lrs` by METRIC, past either edge unless edge=False (LrRule)."""
  rule = protocol.LrRule(tuple(opts["lrs"]), *METRIC[opts["task"]], edge="both" if opts["edge"] else "none")
  return protocol.Tuning(rule, lambda arm, width, lr: point(arm, width, lr, 0, opts["steps"]))


# Seed 0 of every arm at every rate of `lrs` (keys: (arm, its width) per reference width, then arm); then the steps
# past the grid's edge (seed 0, by depth) and every seed at each arm's rate, seed-major (provisional=True, for the
# tables: at the grid's best rate while the step is pending).
SWEEP = protocol.Study(
    _opts, _tuning, keys=lambda opts: [(a, widths(opts["arg"])[a, r]) for r in opts["widths"] for a in opts["arms"]],
    plan_keys=lambda opts: [(a, w) for (a, _), w in widths(opts["arg"]).items()], arm_of=arm_of,
    tiny=lambda arm: {**ARMS[arm], "seed": 0}, cell_of=lambda r: r["_overrides"].get("model.d_model"))
get_sweep, get_followup_sweep = SWEEP.get_sweep, SWEEP.get_followup_sweep
tuning = SWEEP.tuning_for   # tuning(arg): the task's Tuning (.rule.rates(); an arm's rate: .lr(rows, arm, width))
# chosen(rows, arg): the rows at their arm's chosen rate (the grid's best while the step past its edge has not
# finished, as in the tables) in ARMS' order, what the plots compare (rows without a rate, tiny=True's, kept).
chosen = functools.partial(SWEEP.chosen, provisional=True, arms=ARMS, ordered=True)


def get_eval_args(arg: str = ""):
  return ["--position_loss"] if _opts(arg)["task"] == "lm" else []


PLOT_TITLES = {"mqar": ("MQAR (T={data.seq_len}, {data.num_kv_pairs} kv pairs)", "validation accuracy"),
               "lm": ("Shakespeare LM ({train.num_steps:,} steps, T={data.seq_len})", "validation bits/byte")}


def get_plots(arg: str = ""):
  opts = _opts(arg)
  (y, _), (task, ylabel) = METRIC[opts["task"]], PLOT_TITLES[opts["task"]]
  ref = {(a, w): r for (a, r), w in widths(arg).items()}   # (arm, width) -> the reference width it was matched to
  group = (lambda r: f"reference width {ref.get((arm_of(r), r['_overrides'].get('model.d_model')))}"
           ) if len(opts["widths"]) > 1 else None
  return [{"kind": "xy", "x": arm_of, "y": y, "group": group, "select": lambda rows: chosen(rows, arg),
           "file": f"{y}_by_arm.png", "title": f"{task}: {ylabel}", "xlabel": "mixer per layer", "ylabel": ylabel}]


# The MQAR check's sweeps (config arg): the softmax-first order, and 3,000 steps for gla,softmax and gla2.
# Both on the 2-rate grid (edge=False: they ran before the study's rule stepped past the grid's edge).
CHECKS = ("task=mqar,arms=softmax-gla,edge=False", "task=mqar,arms=gla-softmax+gla2,seeds=1,steps=3000,edge=False")
CURVE_STEPS = (500, 1000, 1500, 2000, 2500, 3000)
# the hybrids' pure 2-layer arm -> the LM study's arm
FROM_LM = {"gla2": "gla", "deltanet2": "deltanet", "softmax2": "softmax"}
# each hybrid -> (the pure linear model, the pure softmax model) of its depth
PAIRS = {"gla-softmax": ("gla2", "softmax2"), "deltanet-softmax": ("deltanet2", "softmax2"),
         "gla3-softmax": ("gla4", "softmax4"), "deltanet3-softmax": ("deltanet4", "softmax4")}
TITLES = {"mqar": "MQAR (T=128, 8 key-value pairs, 1,500 steps; reference width 32): validation accuracy",
          "lm": "Shakespeare LM (1,200 steps, T=128; reference width 128): validation bits/byte"}
FROM_LM_NOTE = ("\n‡ from the LM study (experiments/lm/points: the same model, data, steps and width; its seeds "
                f"0–{SEEDS - 1} at the rate this study's rule picks from its seed-0 points).\n")


def load_rows(workdir: str, arg: str) -> list[dict]:
  """Rows of the sweep `arg`'s points that have a sub-workdir in `workdir`: seed 0 at every rate, then the follow-ups
  (the steps past the grid's edge, the seeds at the grid's best rate while a step is pending: provisional)."""
  return tables.study_rows(os.path.join(_HERE, "config.py"), workdir, arg, first=get_sweep(arg),
                           hook=lambda rows: get_followup_sweep(rows, arg, provisional=True))


def lm_study_rows(workdir: str, have: list[dict] = ()) -> list[dict]:
  """The LM study's points (its sweep in `workdir`) of FROM_LM's arms that the rows `have` not, at this study's
  widths and rates, as this study's rows (tables.borrowed_rows; '_from' = 'LM study')."""
  lm, skip = config_lib.load_module(_LM_STUDY), {arm_of(r) for r in have}
  wanted = [(lm.point(FROM_LM[arm], w, lr, seed), point(arm, w, lr, seed)) for (arm, _), w in widths("task=lm").items()
            if arm in FROM_LM and arm not in skip for lr in tuning("task=lm").rule.rates() for seed in range(SEEDS)]
  return tables.borrowed_rows(_LM_STUDY, workdir, wanted, "LM study", "stage=main")


def task_tables(rows, task: str) -> str:
  """A task's sections: the pilot (seed 0 at every rate); each arm at its chosen rate (‡: the LM study's points;
  †: provisional, the grid's best while the step past its edge has not finished); each hybrid against the pure
  models of its depth (Δ = hybrid − other, signed so that + means the hybrid is better: accuracy higher / bits
  per byte lower; whether the seeds separate)."""
  arg, (metric, direction) = f"task={task}", METRIC[task]
  keys = [(a, w) for (a, _), w in widths(arg).items()]
  cs = {c.arm: c for c in tables.cells(tuning(arg), rows, keys, metric, point, provisional=True)}
  lent = lambda c: c.arm + (" ‡" if any(r.get("_from") for r in c.rows) else "")
  note = FROM_LM_NOTE * any(r.get("_from") for r in rows) + tables.PROVISIONAL_NOTE * any(
      c.provisional for c in cs.values())
  return tables.sections([
      ("Learning-rate pilot (seed 0)", tables.pilot_table(
          tuning(arg), rows, keys, lambda r: f"{r[metric]:.3f}" + (" ‡" if r.get("_from") else ""),
          lambda arm, w: (arm, num_layers(arm), w), ("arm", "layers", "width"), provisional=True)),
      ("Each arm at its chosen rate", tables.columns(cs.values(), [
          *tables.matched_columns(lent, [("layers", lambda c: num_layers(c.arm))]),
          *tables.seed_columns(lambda c: tables.values(c.rows, metric), SEEDS, metric)]) + note),
      ("Hybrids against the pure models of their depth (+ = the hybrid is better)", tables.gap_table(
          PAIRS, {a: tables.values(c.rows, metric) for a, c in cs.items()}, direction,
          ["hybrid", "vs pure linear: Δ (seeds separate?)", "vs pure softmax: Δ (seeds separate?)"]))])


def check_table(workdir: str) -> str:
  """Per finished point of the MQAR check (CHECKS' sweeps in `workdir`, each one's seed 0 at every rate and its
  follow-ups): arm, steps, rate, seed, final accuracy, and the evaluation accuracy at CURVE_STEPS."""
  rows = tables.unique_ok(r for arg in CHECKS for r in load_rows(workdir, arg))
  return tables.curve_table(rows, CURVE_STEPS, [
      ("arm", arm_of), ("steps", lambda r: f"{int(r['_config'].get('train.num_steps', 0)):,}"),
      ("lr", lambda r: f"{r['_overrides']['train.learning_rate']:g}"), ("seed", lambda r: r["_overrides"]["seed"]),
      ("accuracy", lambda r: f"{r['accuracy']:.3f}")])


def write(workdir: str, archive_dir: str | dict = "", out: str = "", plots_dir: str = "") -> str:
  """Prints and returns the tables (writes them to `out` too) and draws each task's plot (get_plots, PNG + PDF)
  into `plots_dir` ('' = none) from the same rows, the LM study's included; the sweep directories are ARCHIVE's
  keys under `workdir`, into which the points folders `archive_dir` names (ARCHIVE's form; '' = none) are restored."""
  tables.restore_archives(archive_dir, workdir)
  parts = []
  for task in TASKS:
    rows = load_rows(os.path.join(workdir, f"hybrids_{task}"), f"task={task}")
    rows += lm_study_rows(os.path.join(workdir, "lm"), rows) if task == "lm" else []
    if plots_dir:
      plots.draw(get_plots(f"task={task}"), rows, plots_dir)
    parts.append((TITLES[task], task_tables(rows, task)))
  parts.append(("MQAR check: layer order and training length (width 32; evaluation accuracy during training)",
                check_table(os.path.join(workdir, "hybrids_mqar_check"))))
  return common.emit_markdown(tables.sections(parts, level=2) + "\n", out)
