"""Study 6: one softmax layer among linear ones — does it close the recall gap, and at what LM cost?

  python -m linear_seq.studies.sweep --config=experiments/hybrids/config.py:task=mqar --workdir=runs/hybrids_mqar --parallel=2
  python -m linear_seq.studies.sweep --config=experiments/hybrids/config.py:task=lm --workdir=runs/hybrids_lm --parallel=2
Smoke test: :tiny=True (2 points).

Arms (model.layer_mixers lists one mixer per layer): the 2-layer hybrids gla,softmax and deltanet,softmax and the
4-layer gla,gla,gla,softmax and deltanet,deltanet,deltanet,softmax, against the pure 2- and 4-layer gla,
deltanet and softmax models; 2 seeds each (seed-major). At equal parameters: each arm's width is the one of
WIDTHS whose count is nearest the pure softmax model's of the same depth at the task's reference width.
  task=mqar: experiments/mqar/config.py's hard point (T=128, 8 kv pairs, its HARD_STEPS steps, configs/mqar.py's
             setup 2026-12), reference width 64, lr 1e-3 (the setup's; `lrs=1e-3+3e-3` runs a grid and the
             plots keep each arm's best).
  task=lm:   experiments/lm/config.py's Shakespeare LM (1200 steps, T=128), reference width 128, lr 3e-3.
Options: task=mqar|lm, tiny=True, seeds=N (default 2), arms=gla,softmax+gla (a subset of ARMS' labels,
'+'-separated), lrs=1e-3+3e-3.
"""
import os

from linear_seq import config_lib
from linear_seq.studies import params

STUDY = "hybrids"
_HERE = os.path.dirname(os.path.abspath(__file__))
_MQAR = os.path.join(_HERE, "..", "mqar", "config.py")
_LM = os.path.join(_HERE, "..", "lm", "config.py")
OPTIONS = ("task", "tiny", "seeds", "arms", "lrs")
TASKS = ("mqar", "lm")
# label -> the per-layer mixer list (model.layer_mixers; its length is model.num_layers)
ARMS = {
    "gla,softmax": "gla,softmax",
    "deltanet,softmax": "deltanet,softmax",
    "gla x3,softmax": "gla,gla,gla,softmax",
    "deltanet x3,softmax": "deltanet,deltanet,deltanet,softmax",
    "gla x2": "gla,gla",
    "deltanet x2": "deltanet,deltanet",
    "softmax x2": "softmax,softmax",
    "gla x4": "gla,gla,gla,gla",
    "deltanet x4": "deltanet,deltanet,deltanet,deltanet",
    "softmax x4": "softmax,softmax,softmax,softmax",
}
SEEDS = 2
REFERENCE_WIDTH = {"mqar": 64, "lm": 128}
WIDTHS = {"mqar": tuple(range(48, 81, 8)), "lm": tuple(range(96, 161, 8))}
LEARNING_RATE = {"mqar": 1e-3, "lm": 3e-3}
TINY_ARMS = ("gla,softmax", "softmax x2")


def _opts(arg: str) -> dict:
  opts = config_lib.parse_options(arg, OPTIONS)
  task = str(opts.get("task", "mqar"))
  if task not in TASKS:
    raise ValueError(f"unknown task {task!r}; valid: {', '.join(TASKS)}")
  names = list(TINY_ARMS) if opts.get("tiny") else config_lib.parse_subset(opts, "arms", list(ARMS), ARMS, "arm")
  lrs = [float(x) for x in str(opts.get("lrs", LEARNING_RATE[task])).split("+")]
  return {**opts, "task": task, "arms": names, "lrs": lrs}


def get_config(arg: str = ""):
  opts = _opts(arg)
  tiny = ":tiny=True" if opts.get("tiny") else ""
  if opts["task"] == "lm":
    return config_lib.load_module(_LM).get_config("tiny=True" if tiny else "")
  mqar = config_lib.load_module(_MQAR)
  c = mqar.get_config("tiny=True" if tiny else "")
  if tiny:
    return c
  return config_lib.apply_overrides(c, {**mqar.HARD, "train.num_steps": mqar.HARD_STEPS})


def num_layers(arm: str) -> int:
  return len(ARMS[arm].split(","))


def arm_of(row: dict) -> str:
  mixer = row.get("_overrides", row).get("model.layer_mixers")
  return next((label for label, m in ARMS.items() if m == mixer), str(mixer))


def get_sweep(arg: str = ""):
  opts = _opts(arg)
  if opts.get("tiny"):
    return [{"model.layer_mixers": ARMS[a], "model.num_layers": num_layers(a), "seed": 0} for a in opts["arms"]]
  base = get_config(arg)
  task = opts["task"]
  arms = [{"model.layer_mixers": ARMS[a], "model.num_layers": num_layers(a)} for a in opts["arms"]]
  width = {}
  for depth in sorted({num_layers(a) for a in opts["arms"]}):  # the reference: pure softmax at the same depth
    names = [a for a in opts["arms"] if num_layers(a) == depth]
    ref = ({"model.layer_mixers": ",".join(["softmax"] * depth), "model.num_layers": depth}, REFERENCE_WIDTH[task])
    width.update(zip(names, params.matched_widths(base, [arms[opts["arms"].index(a)] for a in names],
                                                  WIDTHS[task], ref)))
  widths = [width[a] for a in opts["arms"]]
  return [{**arm, "model.d_model": w, "train.learning_rate": lr, "seed": s}
          for s in range(int(opts.get("seeds", SEEDS))) for arm, w in zip(arms, widths) for lr in opts["lrs"]]


def get_eval_args(arg: str = ""):
  return ["--position_loss"] if _opts(arg)["task"] == "lm" else []


def get_plots(arg: str = ""):
  opts = _opts(arg)
  y = "bits_per_byte" if opts["task"] == "lm" else "accuracy"
  title = ("Shakespeare LM: validation bits/byte" if opts["task"] == "lm"
           else "MQAR (T=128, 8 kv pairs): accuracy")
  better = "min" if opts["task"] == "lm" else "max"
  return [{"kind": "xy", "x": arm_of, "y": y, "best_over": ["train.learning_rate"], "better": better,
           "file": f"{y}_by_arm.png", "title": title, "xlabel": "mixer per layer"}]
