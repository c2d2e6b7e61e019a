"""The init check's table (issue 47) from the archived points: experiments/mqar/init_points (model.init set)
and the study's own gpt2 points in experiments/mqar/points.

  python experiments/mqar/init_table.py            # prints mamba2's markdown table (lr 3e-3, every width)
  python experiments/mqar/init_table.py s4 0.01    # another mixer's points at its rate (the init pilots)

One row per (point, width, init): accuracy per seed (with the eval curve's first step ≥ 0.9 in brackets), and
each seed's run time (the sweep's wall time of training + evaluation, one single-threaded point per core).
"""
import glob
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
INIT_POINTS, STUDY_POINTS = os.path.join(HERE, "init_points"), os.path.join(HERE, "points")
INITS = ("gpt2", "torch", "torch_in", "torch_out", "mamba_ssm")


def _records(folder: str) -> list[dict]:
  return [json.load(open(f)) for f in sorted(glob.glob(os.path.join(folder, "*.json")))]


def _first_09(metrics) -> int | None:
  for m in metrics or ():
    if isinstance(m, dict) and m.get("eval_accuracy", 0) >= 0.9:
      return m["step"]
  return None


def rows(mixer: str = "mamba2") -> dict:
  """{(point, width, init, lr): {seed: (accuracy, first step >= 0.9, minutes)}} for `mixer`'s points."""
  out = {}
  for rec in _records(INIT_POINTS) + _records(STUDY_POINTS):
    o, f = rec["overrides"], rec["files"]
    if o.get("model.mixer") != mixer or set(o) - {"model.mixer", "model.d_model", "train.learning_rate", "seed",
                                                  "model.init", "data.seq_len", "data.num_kv_pairs",
                                                  "model.max_len", "train.loss_positions", "train.num_steps",
                                                  "model.feature_map", "model.delta_gate", "model.A_init"}:
      continue
    hard = o.get("data.seq_len") == 128
    if o.get("train.num_steps", 1500) != 1500:
      continue
    ev = f.get("eval.json") or {}
    first = ev.get("first_step_0.9", _first_09(f.get("metrics.jsonl")))
    wall = (f.get("sweep_point.json") or {}).get("wall_time")
    init = o.get("model.init", "gpt2") + (f", A_init={o['model.A_init']}" if "model.A_init" in o else "")
    key = ("hard (128, 8)" if hard else "main (64, 4)", o["model.d_model"], init,
           o["train.learning_rate"])
    out.setdefault(key, {})[o["seed"]] = (ev.get("accuracy"), first, wall / 60 if wall else None)
  return out


def _order(init: str) -> tuple:
  base, _, extra = init.partition(", ")
  return INITS.index(base), extra


def table(mixer: str = "mamba2", lr: float = 3e-3, width: int | None = None) -> str:
  """The markdown table of `mixer`'s points at `lr` (width: only that width; None: every width)."""
  lines = ["| point | width | init | seed 0 | seed 1 | seed 2 | run time (min, per seed) |", "|---|---|---|---|---|---|---|"]
  for (point, w, init, r), seeds in sorted(rows(mixer).items(), key=lambda kv: (kv[0][0], kv[0][1],
                                                                               _order(kv[0][2]))):
    if r != lr or width not in (None, w):
      continue
    cells = []
    for s in (0, 1, 2):
      acc, first, _ = seeds.get(s, (None, None, None))
      cells.append("–" if acc is None else f"{acc:.3f}" + (f" ({first})" if first else ""))
    times = " / ".join(f"{seeds[s][2]:.0f}" if s in seeds and seeds[s][2] else "–" for s in (0, 1, 2))
    lines.append(f"| {point} | {w} | {init} | " + " | ".join(cells) + f" | {times} |")
  return "\n".join(lines)


if __name__ == "__main__":
  args = sys.argv[1:]
  print(table(args[0] if args else "mamba2", float(args[1]) if len(args) > 1 else 3e-3))
