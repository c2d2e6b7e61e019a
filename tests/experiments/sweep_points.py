"""The sweep points every study config produces, for the arguments its README uses; the golden file.

  PYTHONPATH=$PWD python -m tests.experiments.sweep_points      # rewrites tests/experiments/sweep_points.json

`test_sweep_points.py` regenerates this and compares it with the committed file, so a refactoring of a
study config (or of what it calls) cannot change a study's points silently. The follow-up sweep is called
with synthetic result rows (a fixed accuracy per main point), so its choice is pinned too. Config files are
imported by path here, independently of the sweep runner.
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
                                   "stage=main,seeds=0", "stage=hard,seeds=1"],
    "experiments/mqar/grid_2026_11/config.py": ["", "followup=True", "followup=True,best_seeds=3", "seeds=3",
                                                "tiny=True", "tiny=True,followup=True", "arms=softmax+gla"],
    "experiments/feature_maps/config.py": ["", "task=mqar", "task=lm", "tiny=True", "task=mqar,tiny=True",
                                           "task=lm,tiny=True", "seeds=3", "task=lm,maps=elu1+relu"],
    "experiments/decay/config.py": ["", "seeds=3", "task=lm", "tiny=True", "task=lm,tiny=True"],
    "experiments/lm/config.py": ["", "stage=pilot", "tiny=True", "seeds=1", "arms=softmax+gla", "lengths="],
    "experiments/lm/length_check.py": ["", "tiny=True", "arms=s4+s4-fast"],
    "experiments/hybrids/config.py": ["task=mqar", "task=lm", "tiny=True", "task=mqar,seeds=1,lrs=1e-3+3e-3",
                                      "task=mqar,widths=32+64", "task=mqar,arms=softmax-gla,edge=False",
                                      "task=mqar,edge=False",
                                      "task=mqar,arms=gla-softmax+gla2,seeds=1,steps=3000,edge=False"],
    "experiments/mqar/ablation.py": ["", "tiny=True", "mixers=softmax,variants=ours/indep"],
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


def _rows(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
  """Synthetic finished rows: a fixed, varied accuracy per point (so each arm has a distinct best lr)."""
  return [{"_overrides": dict(p), "status": "ok", "accuracy": (37 * i % 101) / 100} for i, p in enumerate(points)]


def dump_one(path: str, arg: str) -> dict[str, Any]:
  """{"points": [...], "followup": [...] | None, "eval_args": [...] | None, "extra_commands": [...] | None}
  of one variant, through JSON as the golden file holds it (tuples become lists; the repo's path as <repo>)."""
  module = _load(path)
  points = [dict(p) for p in _call(module, "get_sweep", arg=arg)]
  followup = None
  if hasattr(module, "get_followup_sweep"):
    followup = [dict(p) for p in _call(module, "get_followup_sweep", _rows(points), arg=arg) or []]
  out = {"points": points, "followup": followup, "eval_args": _call(module, "get_eval_args", arg=arg),
         "extra_commands": _call(module, "get_extra_commands", arg=arg)}
  return json.loads(json.dumps(out).replace(REPO, "<repo>"))   # a script's absolute path, machine-free


def dump() -> dict[str, Any]:
  """{"path:arg": dump_one(path, arg)} for every variant."""
  return {f"{path}:{arg}": dump_one(path, arg) for path, args in VARIANTS.items() for arg in args}


if __name__ == "__main__":
  with open(GOLDEN, "w") as f:
    json.dump(dump(), f, indent=1, sort_keys=True)
    f.write("\n")
  print(f"wrote {GOLDEN}")
