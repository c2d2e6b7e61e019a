"""experiments/mqar/budget_ladder.py (issue 46): its points are the study's hard point with longer budgets, and
its table puts each budget beside the study's own 1x point."""
import json
import os

import pytest

from linear_seq import config_lib
from linear_seq.studies import sweep

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LADDER = os.path.join(REPO, "experiments/mqar/budget_ladder.py")
ladder = config_lib.load_module(LADDER)
study = config_lib.load_module(os.path.join(REPO, "experiments/mqar/config.py"))


def test_points_are_the_hard_point_at_longer_budgets():
  points = ladder.get_sweep("")
  hard = lambda arm, lr: study.point(arm, 64, lr, 0, **study.grid_extra(True))
  for arm, lr in (("s4", 3e-3), ("mamba2", 3e-3)):   # the study's rate and init (torch)
    got = [p for p in points if p["model.mixer"] == arm]
    assert got == [{**hard(arm, lr), "train.num_steps": n} for n in (6000, 24000)]
    assert list(got[0]) == list(hard(arm, lr)) and got[0]["model.init"] == "torch"   # same key order
  gla4 = [p for p in points if p["model.mixer"] == "gla"]
  assert gla4 == [{**hard("gla", 1e-3), "train.num_steps": n, "model.num_layers": 4} for n in (1500, 6000, 24000)]
  assert [p["train.num_steps"] for p in ladder.get_sweep("arms=s4+gla4,factors=4")] == [6000, 1500, 6000]
  assert ladder.get_sweep("arms=mamba2,factors=4,seeds=1") == [{**study.point("mamba2", 64, 3e-3, 1,
                                                                               **study.grid_extra(True)),
                                                                 "train.num_steps": 6000}]
  assert len(ladder.get_sweep("arms=s4,seeds=0+1")) == 4
  with pytest.raises(ValueError, match="unknown arm"):
    ladder.get_sweep("arms=softmax")
  with pytest.raises(ValueError, match="unknown seed"):
    ladder.get_sweep("seeds=2")


def _finish(tmp_path, arg):
  """Writes the one point of `arg` as finished: 0.99 first at step 5,000, 0.995 at 6,000, 10 wall minutes."""
  (p,) = sweep.make_points(f"{LADDER}:{arg}", str(tmp_path), ladder.get_sweep(arg), base_config=ladder.get_config(""))
  os.makedirs(p.workdir)
  with open(os.path.join(p.workdir, "eval.json"), "w") as f:
    json.dump({"step": 6000, "accuracy": 0.995}, f)
  with open(os.path.join(p.workdir, "metrics.jsonl"), "w") as f:
    for step, acc in ((250, 0.05), (2500, 0.95), (5000, 0.991), (6000, 0.995)):
      f.write(json.dumps({"step": step, "eval_accuracy": acc}) + "\n")
  with open(os.path.join(p.workdir, "sweep_point.json"), "w") as f:
    json.dump({"status": "ok", "wall_time": 600.0}, f)


def test_table_from_finished_points(tmp_path):
  """A finished 4x S4D point beside the study's archived 1x points; seed 1's rows only once a rung of it ran."""
  _finish(tmp_path, "arms=s4,factors=4")
  text = ladder.write(str(tmp_path), "", str(tmp_path / "ladder.md"), "arms=s4,factors=4")
  assert "| s4 | 0 | 4x (6,000) | 0.003 | 0.995 | 2500 | 5000 | 10 |" in text
  assert "| s4 | 0 | 16x (24,000) | 0.003 | … | … | … | … |" in text
  assert "| softmax | 0 | 1x (1,500) | 0.003 | 1.000 |" in text   # the study's archived point
  assert "| gla4 | 0 | 1x (1,500) | 0.001 | … |" in text
  assert "| 1 |" not in text
  _finish(tmp_path, "arms=mamba2,factors=4,seeds=1")
  text = ladder.write(str(tmp_path), "", str(tmp_path / "ladder.md"), "")
  assert "| mamba2 | 1 | 4x (6,000) | 0.003 | 0.995 | 2500 | 5000 | 10 |" in text
  assert "| softmax | 1 | 1x (1,500) | 0.003 | 1.000 |" in text   # the study's seed 1
  assert "| s4 | 1 | 4x (6,000) | 0.003 | … |" in text
