"""experiments/mqar/init_check.py: its points are the study's points with a model.init override."""
import os

from linear_seq import config_lib

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
check = config_lib.load_module(os.path.join(REPO, "experiments/mqar/init_check.py"))
study = config_lib.load_module(os.path.join(REPO, "experiments/mqar/config.py"))


def _without_init(p: dict) -> dict:
  return {k: v for k, v in p.items() if k != "model.init"}


def test_points_are_the_study_points_with_an_init():
  main = {str(sorted(_without_init(p).items())) for p in [study.point(a, w, check.CHOSEN_LR[a], s)
                                                          for a in study.ARMS for w in study.WIDTHS
                                                          for s in study.SEEDS]}
  hard = {str(sorted(_without_init(p).items())) for p in [study.point(a, w, check.CHOSEN_LR[a], s,
                                                                      **study.grid_extra(True))
                                                          for a in study.ARMS for w in study.HARD_WIDTHS
                                                          for s in (0, 1, 2)]}
  assert set(check.CHOSEN_LR) == set(study.ARMS)
  seen = set()
  for stage in check.STAGES:
    points = check.get_sweep(f"stage={stage}")
    for p in points:
      assert p["model.init"] in ("gpt2", "torch", "torch_in", "torch_out", "mamba_ssm")
      if stage in ("hf", "afactor"):
        assert p.pop("model.A_init") == "arange" and p["model.init"] == ("torch" if stage == "hf" else "gpt2")
      assert str(sorted(_without_init(p).items())) in main | hard, p
      seen.add(str(sorted(p.items())))
  confirm = check.get_sweep("stage=confirm")
  assert [p["model.init"] for p in confirm] == ["torch"] * 6 + ["gpt2"]
  assert confirm[0]["data.seq_len"] == 128 and confirm[0]["seed"] == 0 and confirm[2].get("data.seq_len") is None
  assert [p["seed"] for p in check.get_sweep("stage=confirm,only=main")] == [1, 0, 2]
  assert [p["seed"] for p in check.get_sweep("stage=confirm,only=hard")] == [0, 1, 2, 2]
  hf = check.get_sweep("stage=hf")
  assert [(p.get("data.seq_len"), p["model.d_model"], p["seed"]) for p in hf] == [(128, 64, 0), (128, 64, 1),
                                                                                  (None, 64, 1), (None, 128, 1)]
  assert [p["model.mixer"] for p in check.get_sweep("stage=pilot,arms=s4+gla")] == ["s4", "gla"]
  assert {p["model.d_model"] for p in check.get_sweep("tiny=True")} == {16}
