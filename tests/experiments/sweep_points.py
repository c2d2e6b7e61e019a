"""The sweep points every study config produces, for the arguments its README uses; the golden file.

  PYTHONPATH=$PWD python -m tests.experiments.sweep_points      # rewrites tests/experiments/sweep_points.json

`test_sweep_points.py` regenerates this and compares it with the committed file, so a refactoring of a
study config (or of what it calls) cannot change a study's points silently. The follow-up hook is replayed
as the sweep runs it, round after round until it adds no point (at most MAX_ROUNDS), with synthetic finished
rows carrying the study's own metric (bits/byte for the LM tasks, accuracy for MQAR; a fixed, varied value per
point, so that a flipped min/max or a changed edge rule changes the choice), so its choices are pinned too.
Config files are imported by path here, independently of the sweep runner.
"""
import importlib.util
import inspect
import json
import os
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sweep_points.json")

# study config (relative to the repo) -> the `:args` variants the READMEs and docstrings use.
VARIANTS = {
    "experiments/mqar/config.py": ["stage=pilot", "stage=main", "stage=hard", "tiny=True", "stage=main,arms=softmax+gla",
                                   "stage=main,seeds=0", "stage=hard,seeds=1", "stage=lrcheck", "stage=seedcheck",
                                   "stage=seedcheck,hard=True", "stage=main,seeds=0+1,widths=64"],
    "experiments/mqar/budget_ladder.py": ["", "arms=s4", "tiny=True"],
    "experiments/mqar/grid_2026_11/config.py": ["", "followup=True", "followup=True,best_seeds=3", "seeds=3",
                                                "tiny=True", "tiny=True,followup=True", "arms=softmax+gla"],
    "experiments/feature_maps/config.py": ["", "task=mqar", "task=lm", "tiny=True", "task=mqar,tiny=True",
                                           "task=lm,tiny=True", "seeds=3", "task=lm,maps=elu1+relu"],
    "experiments/decay/config.py": ["", "seeds=3", "task=lm", "tiny=True", "task=lm,tiny=True"],
    "experiments/lm/config.py": ["", "stage=pilot", "tiny=True", "seeds=1", "arms=softmax+gla", "lengths=",
                               "stage=main,seeds=2"],
    "experiments/lm/length_check.py": ["", "tiny=True", "arms=s4+s4-fast"],
    "experiments/hybrids/config.py": ["task=mqar", "task=lm", "tiny=True", "task=mqar,seeds=1,lrs=1e-3+3e-3",
                                      "task=mqar,widths=32+64", "task=mqar,arms=softmax-gla,edge=False",
                                      "task=mqar,edge=False",
                                      "task=mqar,arms=gla-softmax+gla2,seeds=1,steps=3000,edge=False",
                                      "task=lm,seeds=3", "task=lm,edge=False", "task=lm,lrs=1e-3+3e-3+1e-2"],
    "experiments/mqar/ablation.py": ["", "tiny=True", "mixers=softmax,variants=ours/indep"],
    "experiments/state_tracking/config.py": ["stage=pilot", "stage=long", "stage=s5check", "stage=paritycheck",
                                             "stage=main,seeds=0",
                                             "tiny=True", "stage=main,seeds=1,tasks=S3+S5,arms=gla+gla-neg"],
}


def _load(path: str):
  spec = importlib.util.spec_from_file_location("_golden_" + path.replace("/", "_").replace(".", "_"),
                                                os.path.join(REPO, path))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def _call(module, name: str, *args, arg: str):
  fn = getattr(module, name, None)
  if fn is None:
    return None
  return fn(*args, arg) if len(inspect.signature(fn).parameters) > len(args) else fn(*args)


# the follow-up rounds replayed at most (as linear_seq.studies.sweep.MAX_FOLLOWUP_ROUNDS)
MAX_ROUNDS = 10


def metric(path: str, arg: str) -> str:
  """The metric a variant's study chooses by: bits/byte for the LM tasks, else MQAR's accuracy."""
  return "bits_per_byte" if path.startswith("experiments/lm/") or "task=lm" in arg else "accuracy"


def _rows(points: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
  """Synthetic finished rows: a fixed, varied value of the study's metric per point (so each arm has a distinct
  best lr; bits/byte in [1.5, 2.5], accuracy in [0, 1]), and every third point marked still rising (the mark a
  row without a learning curve carries)."""
  value = lambda i: (37 * i % 101) / 100 + (1.5 if key == "bits_per_byte" else 0.0)
  return [{"_overrides": dict(p), "status": "ok", key: value(i), "still_rising": i % 3 == 0}
          for i, p in enumerate(points)]


def dump_one(path: str, arg: str) -> dict[str, Any]:
  """{"points": [...], "followup": [...] | None, "eval_args": [...] | None, "extra_commands": [...] | None}
  of one variant, through JSON as the golden file holds it (tuples become lists; the repo's path as <repo>).
  "followup": every round's new points in order, each round called with the rows of every point so far."""
  module = _load(path)
  points = [dict(p) for p in _call(module, "get_sweep", arg=arg)]
  followup = None
  if hasattr(module, "get_followup_sweep"):
    followup = []
    for _ in range(MAX_ROUNDS):
      known = points + followup
      more = []
      for p in _call(module, "get_followup_sweep", _rows(known, metric(path, arg)), arg=arg) or []:
        if dict(p) not in known and dict(p) not in more:
          more.append(dict(p))
      if not more:
        break
      followup += more
  out = {"points": points, "followup": followup, "eval_args": _call(module, "get_eval_args", arg=arg),
         "extra_commands": _call(module, "get_extra_commands", arg=arg)}
  return json.loads(json.dumps(out).replace(REPO, "<repo>"))   # a script's absolute path, machine-free


def dump() -> dict[str, Any]:
  """{"path:arg": dump_one(path, arg)} for every variant."""
  return {f"{path}:{arg}": dump_one(path, arg) for path, args in VARIANTS.items() for arg in args}


if __name__ == "__main__":
  with open(GOLDEN, "w") as f:
    json.dump(dump(), f, indent=1)   # each point's keys in their order: the order names its sub-workdir
    f.write("\n")
  print(f"wrote {GOLDEN}")
