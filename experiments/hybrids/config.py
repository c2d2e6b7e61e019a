"""Study 6: one softmax layer among linear ones — does it close the recall gap, and at what LM cost?

Arms: ARMS (model.layer_mixers, one mixer per layer), each at the width of WIDTHS whose parameter count is nearest
the pure softmax model's of its depth at the reference width; each (arm, reference width)'s rate from seed 0 by
protocol.LrRule, then seeds 1.. at it. The commands, the tasks and why: README.md; the options and the tables
write() prints: its "Options and tables". Smoke test: :tiny=True (2 points).
Options: task=mqar|lm, tiny=True, seeds=N or seeds=0+2 (default 2), arms=gla-softmax+gla2, lrs=1e-3+3e-3,
edge=False, widths=32+64 (reference widths), steps=N.
"""
import functools
import itertools
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
# write()'s sweep directories (under its workdir) and the points folders restored into them.
WORKDIRS = {"mqar": "hybrids_mqar", "lm": "hybrids_lm", "check": "hybrids_mqar_check", "lm_study": "lm"}
ARCHIVE = {WORKDIRS["mqar"]: os.path.join(_HERE, "points_mqar"), WORKDIRS["lm"]: os.path.join(_HERE, "points_lm"),
           WORKDIRS["check"]: os.path.join(_HERE, "points_mqar_check"),
           WORKDIRS["lm_study"]: os.path.join(_HERE, "..", "lm", "points")}
OPTIONS = ("task", "tiny", "seeds", "arms", "lrs", "edge", "widths", "steps")
TASKS = ("mqar", "lm")
# label (a mixer's count of layers after its name; no commas or spaces, so that `arms=` can name them) -> the
# per-layer mixer list (model.layer_mixers; its length is model.num_layers)
ARMS = {
    "gla-softmax": "gla,softmax",
    "deltanet-softmax": "deltanet,softmax",
    "gla3-softmax": "gla,gla,gla,softmax",
    "deltanet3-softmax": "deltanet,deltanet,deltanet,softmax",
    "gla2": "gla,gla",
    "deltanet2": "deltanet,deltanet",
    "softmax2": "softmax,softmax",
    "gla4": "gla,gla,gla,gla",
    "deltanet4": "deltanet,deltanet,deltanet,deltanet",
    "softmax4": "softmax,softmax,softmax,softmax",
    # not in the default set: the 2-layer hybrids with the softmax layer first (the layer-order check)
    "softmax-gla": "softmax,gla",
    "softmax-deltanet": "softmax,deltanet",
}
DEFAULT_ARMS = tuple(ARMS)[:10]
SEEDS = 2
REFERENCE_WIDTHS = {"mqar": (32,), "lm": (128,)}
# candidate widths (multiples of 8: 4 heads of even size for RoPE)
WIDTHS = {"mqar": tuple(range(16, 97, 8)), "lm": tuple(range(96, 161, 8))}
LRS = {"mqar": (1e-3, 3e-3), "lm": (3e-3, 1e-2)}
METRIC = {"mqar": ("accuracy", "max"), "lm": ("bits_per_byte", "min")}
TINY_ARMS = ("gla-softmax", "softmax2")


def _opts(arg: str) -> dict:
  opts = protocol.options(arg, OPTIONS, ARMS, DEFAULT_ARMS, TINY_ARMS, SEEDS)
  task = protocol.choice(opts, "task", TASKS, "mqar")
  steps = protocol.numbers(opts, "steps", [None])[0]
  edge = opts.get("edge", True)
  if not isinstance(edge, bool):
    raise ValueError(f"edge must be True or False, got {edge!r}")
  lrs = protocol.numbers(opts, "lrs", LRS[task], float)
  # "arg": the option string itself (widths(arg) is cached by it)
  return {**opts, "arg": arg, "task": task, "lrs": lrs, "edge": edge,
          "widths": protocol.numbers(opts, "widths", REFERENCE_WIDTHS[task]), "steps": steps}


def get_config(arg: str = ""):
  """The task's preset: configs/shakespeare.py's LM budget, or configs/mqar.py's hard point evaluated as the MQAR
  study does (every 250 steps, 1,000 sequences in 4 batches); tiny: their smoke tests."""
  opts = _opts(arg)
  tiny = bool(opts.get("tiny"))
  if opts["task"] == "lm":
    return protocol.task("shakespeare.py", tiny=tiny)
  return protocol.task("mqar.py" if tiny else "mqar.py:point=hard", {"eval.batch_size": 250, "train.eval_every": 250},
                       tiny)


def num_layers(arm: str) -> int:
  return len(ARMS[arm].split(","))


def arm_of(row: dict) -> str:
  mixer = row.get("_overrides", row).get("model.layer_mixers")
  return next((label for label, m in ARMS.items() if m == mixer), str(mixer))


def _arm(label: str) -> dict:
  return {"model.layer_mixers": ARMS[label], "model.num_layers": num_layers(label)}


@functools.lru_cache(maxsize=None)
def widths(arg: str = "") -> dict[tuple[str, int], int]:
  """{(arm, reference width): the arm's width}: its parameter count nearest the pure softmax model's of the same
  depth at the reference width (cached: the plots ask per row)."""
  opts, out = _opts(arg), {}
  for ref, depth in itertools.product(opts["widths"], sorted({num_layers(a) for a in opts["arms"]})):
    names = [a for a in opts["arms"] if num_layers(a) == depth]
    pure = ({"model.layer_mixers": ",".join(["softmax"] * depth), "model.num_layers": depth}, ref)
    matched = params.matched_widths(get_config(arg), [_arm(a) for a in names], WIDTHS[opts["task"]], pure)
    out.update(zip([(a, ref) for a in names], matched))
  return out


def point(arm: str, width: int, lr: float, seed: int, steps: int | None = None) -> dict:
  """A point's overrides; `steps` (the steps=N option) sets train.num_steps, otherwise the task's own budget."""
  return protocol.point({arm: _arm(arm)}, arm, {"model.d_model": width}, lr, seed,
                        None if steps is None else {"train.num_steps": steps})


def _tuning(opts: dict) -> protocol.Tuning:
  """The task's rule over seed 0's points: the grid `lrs`, its metric and direction (METRIC), a step past either
  edge unless edge=False (protocol.LrRule)."""
  rule = protocol.LrRule(tuple(opts["lrs"]), *METRIC[opts["task"]], edge="both" if opts["edge"] else "none")
  return protocol.Tuning(rule, lambda arm, width, lr: point(arm, width, lr, 0, opts["steps"]))


def tuning(arg: str = "") -> protocol.Tuning:
  return _tuning(_opts(arg))


def rates(arg: str = "") -> list[float]:
  """Every rate a seed-0 point may run at: the grid and the steps past both its edges (ascending)."""
  return tuning(arg).rule.rates()


def best_lr(rows, arm: str, width: int, arg: str = "", provisional: bool = False) -> float | None:
  """The arm's rate at this width, None until known (provisional: the grid's best while the step is pending)."""
  return tuning(arg).lr(rows, arm, width, provisional)


def _keys(opts: dict) -> list[tuple[str, int]]:
  """(arm, its width) per reference width, then arm: the pilot's order and the seeds'."""
  ws = widths(opts["arg"])
  return [(a, ws[a, ref]) for ref in opts["widths"] for a in opts["arms"]]


def _seeds(rows, opts: dict, lrs: dict) -> list[dict]:
  """Seeds 1.. (seed 0's point is its pilot point) at each (arm, reference width)'s chosen rate, seed-major."""
  del rows
  return protocol.at_rates(opts["seeds"][1:], _keys(opts), lrs, lambda a, w, lr, s: point(a, w, lr, s, opts["steps"]))


# Seed 0 of every arm at every rate of `lrs` (per reference width); then the steps past the grid's edge (seed 0,
# listed by depth) and the other seeds. get_followup_sweep(rows, arg, provisional=True) (the tables, not the
# sweep): the seeds of an arm whose step past the edge has not finished are listed at its grid's best rate.
SWEEP = protocol.Study(_opts, _tuning, keys=_keys, tiny=lambda arm: {**_arm(arm), "seed": 0}, stages={"main": _seeds},
                       plan_keys=lambda opts: [(a, w) for (a, _), w in widths(opts["arg"]).items()], arm_of=arm_of,
                       cell_of=lambda r: r["_overrides"].get("model.d_model"))
get_sweep = SWEEP.get_sweep
get_followup_sweep = SWEEP.get_followup_sweep


def chosen(rows, arg: str = "") -> list[dict]:
  """The rows at their arm's chosen rate (what the plots compare; the grid's best while the step past its edge
  has not finished, as in the tables), in ARMS' order (the plots' x axis); rows without a rate (tiny=True) are
  kept."""
  out, order = SWEEP.chosen(rows, arg, provisional=True), list(ARMS)
  return sorted(out, key=lambda r: order.index(arm_of(r)) if arm_of(r) in order else len(order))


def reference_width(row: dict, arg: str = "") -> int | None:
  """The reference width a point was matched to (its group in the plots)."""
  o = row.get("_overrides", row)
  return next((ref for (a, ref), w in widths(arg).items() if a == arm_of(row) and w == o.get("model.d_model")),
              None)


def get_eval_args(arg: str = ""):
  return ["--position_loss"] if _opts(arg)["task"] == "lm" else []


def get_plots(arg: str = ""):
  opts = _opts(arg)
  y = METRIC[opts["task"]][0]
  if opts["task"] == "lm":
    title = "Shakespeare LM ({train.num_steps:,} steps, T={data.seq_len}): validation bits/byte"
    ylabel = "validation bits/byte"
  else:
    title, ylabel = "MQAR (T={data.seq_len}, {data.num_kv_pairs} kv pairs): validation accuracy", "validation accuracy"
  group = (lambda r: f"reference width {reference_width(r, arg)}") if len(opts["widths"]) > 1 else None
  return [{"kind": "xy", "x": arm_of, "y": y, "group": group, "select": lambda rows: chosen(rows, arg),
           "file": f"{y}_by_arm.png", "title": title, "xlabel": "mixer per layer", "ylabel": ylabel}]


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
PROVISIONAL = tables.PROVISIONAL_NOTE
FROM_LM_NOTE = ("\n‡ from the LM study (experiments/lm/points: the same model, data, steps and width; its seeds "
                f"0–{SEEDS - 1} at the rate this study's rule picks from its seed-0 points).\n")


def sweep_rows(arg: str, workdir: str) -> list[dict]:
  """Rows of the sweep `arg`'s points that have a sub-workdir: seed 0 at every rate, then the follow-ups (the
  steps past the grid's edge, then the other seeds, at the grid's best rate while the step is pending)."""
  return tables.study_rows(os.path.join(_HERE, "config.py"), workdir, arg,
                           hook=lambda rows: get_followup_sweep(rows, arg, provisional=True))


def load_rows(task: str, workdir: str) -> list[dict]:
  return sweep_rows(f"task={task}", workdir)


def lm_study_rows(workdir: str) -> list[dict]:
  """The LM study's points of FROM_LM's arms at this study's widths and rates, as this study's rows (its point's
  overrides, the arm in '_arm', '_from' = 'LM study', the LM study's overrides in '_source_overrides')."""
  lm = config_lib.load_module(_LM_STUDY)
  wanted = [(lm.point(FROM_LM[arm], w, lr, seed), point(arm, w, lr, seed)) for (arm, _), w in widths("task=lm").items()
            if arm in FROM_LM for lr in rates("task=lm") for seed in range(SEEDS)]
  return tables.borrowed_rows(_LM_STUDY, workdir, wanted, "LM study", "stage=main")


def pilot_table(rows, task: str) -> str:
  cell = lambda r: f"{r[METRIC[task][0]]:.3f}" + (" ‡" if r.get("_from") else "")
  return tables.pilot_table(tuning(f"task={task}"), rows, [(a, w) for (a, _), w in widths(f"task={task}").items()],
                            cell, lambda arm, w: (arm, num_layers(arm), w), ("arm", "layers", "width"),
                            provisional=True)


def cells(rows, task: str) -> dict[str, tables.Cell]:
  """{arm: its Cell (width, chosen rate, finished rows by seed, provisional)} for the arms whose rate is decided
  or provisional (the grid's best while the step past its edge has not finished)."""
  arg = f"task={task}"
  keys = [(a, w) for (a, _), w in widths(arg).items()]
  cs = tables.cells(tuning(arg), rows, keys, METRIC[task][0], lambda a, w, lr, s: point(a, w, lr, s), True)
  return {c.arm: c for c in cs}


def main_table(cs: dict, task: str) -> str:
  first = lambda c, key: tables.first_count(c.rows, key)
  return tables.columns(cs.values(), [
      ("arm", lambda c: c.arm + (" ‡" if any(r.get("_from") for r in c.rows) else "")),
      ("layers", lambda c: num_layers(c.arm)), ("width", lambda c: c.key), ("params", lambda c: first(c, "num_params")),
      ("state (floats/seq)", lambda c: first(c, "state_size")), ("lr", lambda c: f"{c.lr:g}" + " †" * c.provisional),
      *tables.seed_columns(lambda c: tables.values(c.rows, METRIC[task][0]), SEEDS, METRIC[task][0])])


def gap_table(cs: dict, task: str) -> str:
  """Each hybrid against the pure models of its depth: Δ = hybrid − other, signed so that + means the hybrid
  is better (accuracy higher / bits per byte lower)."""
  return tables.gap_table(PAIRS, {a: tables.values(c.rows, METRIC[task][0]) for a, c in cs.items()}, METRIC[task][1],
                          ["hybrid", "vs pure linear: Δ (seeds separate?)", "vs pure softmax: Δ (seeds separate?)"])


def check_rows(workdir: str) -> list[dict]:
  """The MQAR check's finished points (CHECKS), each sweep's seed 0 at every rate and its follow-ups."""
  return tables.unique_ok(r for arg in CHECKS for r in sweep_rows(arg, workdir))


def check_table(rows) -> str:
  """Per check point: arm, steps, rate, seed, final accuracy, and the evaluation accuracy at CURVE_STEPS."""
  return tables.curve_table(rows, CURVE_STEPS, [
      ("arm", arm_of), ("steps", lambda r: f"{int(r['_config'].get('train.num_steps', 0)):,}"),
      ("lr", lambda r: f"{r['_overrides']['train.learning_rate']:g}"), ("seed", lambda r: r["_overrides"]["seed"]),
      ("accuracy", lambda r: f"{r['accuracy']:.3f}")])


def write(workdir: str, archive_dir: str | dict = "", out: str = "", plots_dir: str = "") -> str:
  """Prints and returns the tables (writes them to `out` too) and draws each task's plot (get_plots, PNG + PDF)
  into `plots_dir` ('' = none) from the same rows, the LM study's included; the sweep directories are WORKDIRS
  under `workdir`, into which the points folders `archive_dir` names (ARCHIVE's form; '' = none) are restored."""
  tables.restore_archives(archive_dir, workdir)
  parts = []
  for task in TASKS:
    rows, note = load_rows(task, os.path.join(workdir, WORKDIRS[task])), ""
    if task == "lm":
      have = {r.get("_arm") or arm_of(r) for r in rows}
      extra = [r for r in lm_study_rows(os.path.join(workdir, WORKDIRS["lm_study"])) if r["_arm"] not in have]
      rows, note = rows + extra, FROM_LM_NOTE if extra else ""
    cs = cells(rows, task)
    note += PROVISIONAL if any(c.provisional for c in cs.values()) else ""
    if plots_dir:
      os.makedirs(plots_dir, exist_ok=True)
      plots.draw(get_plots(f"task={task}"), rows, plots_dir)
    parts.append((TITLES[task], tables.sections([
        ("Learning-rate pilot (seed 0)", pilot_table(rows, task)),
        ("Each arm at its chosen rate", main_table(cs, task) + note),
        ("Hybrids against the pure models of their depth (+ = the hybrid is better)", gap_table(cs, task))])))
  parts.append(("MQAR check: layer order and training length (width 32; evaluation accuracy during training)",
                check_table(check_rows(os.path.join(workdir, WORKDIRS["check"])))))
  return common.emit_markdown(tables.sections(parts, level=2) + "\n", out)
