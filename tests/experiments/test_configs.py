"""Every study config in experiments/: its full and tiny sweeps make valid points (known fields, right types,
models that build), point counts match the READMEs, plot specs are complete; and the LM study's tiny sweep
runs end to end through the sweep CLI (its extra evaluation flags and decode command included)."""
import csv
import os
import subprocess
import sys

import pytest
from flax import nnx

from linear_seq import config_lib
from linear_seq import data
from linear_seq import model as model_lib
from linear_seq.studies import plots
from linear_seq.studies import protocol
from linear_seq.studies import sweep
from linear_seq.studies import tables
from tests.helpers import REPO, cli_env



def _path(study):
  """'mqar' -> experiments/mqar/config.py; 'mqar/ablation' -> experiments/mqar/ablation.py."""
  return os.path.join(REPO, "experiments", *((study + ".py",) if "/" in study else (study, "config.py")))


# (study, config arg, number of points of the full sweep as documented in the study's README)
STUDIES = [
    ("mqar", "stage=main", 20),
    ("mqar/grid_2026_11/config", "", 24),
    ("feature_maps", "task=mqar", 8),
    ("feature_maps", "task=lm", 8),
    ("decay", "", 10),
    ("decay", "task=lm", 10),
    ("lm", "", 30),
    ("lm/length_check", "", 5),
    ("mqar/ablation", "", 52),
    ("hybrids", "task=mqar", 20),
    ("hybrids", "task=lm", 20),
]


def _check_points(study, arg):
  module = sweep.load_study(_path(study))
  base = module.get_config(arg)
  overrides = sweep.get_points(module, arg)
  points = sweep.make_points(f"{_path(study)}:{arg}", "/tmp/unused", overrides, base_config=base)
  assert len({p.workdir for p in points}) == len(points)
  vocab = data.dataset_info(base.data).vocab_size
  seen = set()
  for o in overrides:
    config = config_lib.apply_overrides(base, o)
    key = tuple(sorted((k, str(v)) for k, v in o.items() if k.startswith("model.")))
    if key in seen:
      continue
    seen.add(key)
    cfg = model_lib.ModelConfig.from_config(config.model, vocab_size=vocab)
    nnx.eval_shape(lambda cfg=cfg: model_lib.LM(cfg, rngs=nnx.Rngs(0)))  # builds: no bad field combination
  for spec in sweep.call_hook(module, "get_plots", arg=arg) or []:
    assert spec["kind"] in plots.KINDS and spec["file"].endswith(".png") and "y" in spec
  return overrides


@pytest.mark.parametrize("study, arg, count", STUDIES, ids=[f"{s}:{a}" for s, a, _ in STUDIES])
def test_full_sweep_points_are_valid(study, arg, count):
  assert len(_check_points(study, arg)) == count


@pytest.mark.parametrize("study, arg", [(s, a) for s, a, _ in STUDIES], ids=[f"{s}:{a}" for s, a, _ in STUDIES])
def test_tiny_sweep_points_are_valid(study, arg):
  tiny = ",".join(filter(None, [arg, "tiny=True"] + (["variants=ours/indep", "mixers=gla"] if "ablation" in study else [])))
  assert len(_check_points(study, tiny)) == 2


def test_mqar_ablation_variants():
  """Each revert differs from `indep` in exactly one factor's keys, and every point maps back to its variant."""
  ablation = sweep.load_study(_path("mqar/ablation"))
  for mixer in ablation.MIXERS:
    indep = ablation.variant(mixer, "indep")
    for factor in ablation.FACTORS:
      revert = ablation.variant(mixer, f"indep-{factor}")
      if revert is None:
        assert factor == "gate" and mixer not in ablation.GATED
        continue
      changed = {k for k in indep if indep[k] != revert.get(k)}
      assert changed and changed <= set(ablation.FACTORS[factor]) | {"model.pos_encoding"}
  rows = [{"_overrides": o} for o in ablation.get_sweep("")]
  names = [ablation.variant_of(r) for r in rows]
  assert "?" not in names and names.count("indep") == 6 and names.count("indep-gate") == 4
  assert names.count("indep-head") == 6


def test_unknown_options_are_rejected():
  with pytest.raises(ValueError, match="unknown arm"):
    sweep.load_study(_path("mqar")).get_sweep("arms=softmax+nope")
  with pytest.raises(ValueError, match="unknown task"):
    sweep.load_study(_path("feature_maps")).get_config("task=vision")
  with pytest.raises(ValueError, match="unknown arm"):
    sweep.load_study(_path("lm")).get_sweep("arms=gla+rnn")
  with pytest.raises(ValueError, match="lengths must be positive"):
    sweep.load_study(_path("lm")).get_extra_commands("lengths=512+-3")


def test_lm_study_tiny_sweep_end_to_end(tmp_path):
  """Both points train, evaluate with --position_loss and at twice the training length, time decoding; the
  table (with the longer evaluation's columns) and the plots are written."""
  proc = subprocess.run([sys.executable, "-m", "linear_seq.studies.sweep", f"--config={_path('lm')}:tiny=True",
                         f"--workdir={tmp_path}", "--parallel=2"], env=cli_env(), capture_output=True, text=True,
                        cwd=REPO)
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  subs = sorted(d for d in os.listdir(tmp_path) if os.path.isdir(tmp_path / d))
  assert len(subs) == 2
  for sub in subs:
    for name in ("eval.json", "position_loss.json", "decode.json", "eval_validation_T64.json"):
      assert os.path.exists(tmp_path / sub / name), (sub, name)
  with open(tmp_path / "results.csv") as f:
    rows = list(csv.DictReader(f))
  assert len(rows) == 2 and all(r["status"] == "ok" for r in rows)
  assert all(float(r["bits_per_byte"]) > 0 and float(r["bits_per_byte@T64"]) > 0 for r in rows)
  assert any(k.startswith("decode") for k in rows[0]), list(rows[0])
  for name in ("loss_vs_position.png", "eval_loss_curves.png", "bits_per_byte_vs_length.png"):
    assert os.path.exists(tmp_path / name), name



def test_mqar_2026_11_followup_uses_each_arms_best_learning_rate_at_the_largest_width():
  module = sweep.load_study(_path("mqar/grid_2026_11/config"))
  gla = module.ARMS["gla"]
  rows = [{"_overrides": {**gla, "model.d_model": w, "train.learning_rate": lr, "seed": 0}, "status": "ok",
           "accuracy": acc} for w, lr, acc in ((64, 3e-3, 0.2), (64, 1e-2, 0.8), (32, 3e-3, 0.5))]
  assert module.get_followup_sweep(rows, "") == []
  out = module.get_followup_sweep(rows, "followup=True,best_seeds=3")
  best = {**gla, "model.d_model": 64, "train.learning_rate": 1e-2}
  assert out == [{**best, **module.HARD, "seed": 0}, {**best, "model.conv_width": 0, "seed": 0},
                 {**best, "seed": 1}, {**best, "seed": 2}]
  # the extra seeds are named like the main grid's points, so the report aggregates them (mean ± std)
  assert sweep.point_name(out[2]) == sweep.point_name({**best, "seed": 1})


def _pilot_row(module, arm, lr, curve):
  """A finished seed-0 pilot row of `arm` at `lr` whose eval accuracy follows `curve` (every 250 steps)."""
  metrics = [{"step": 250 * (i + 1), "eval_accuracy": a} for i, a in enumerate(curve)]
  return {"_overrides": module.point(arm, module.PILOT_WIDTH, lr, 0), "status": "ok", "accuracy": curve[-1],
          "_metrics": metrics}


def test_mqar_study_learning_rate_from_the_pilot():
  """The better pilot rate; 1e-2 only when 3e-3 wins while still rising; then the main and hard grids."""
  module = sweep.load_study(_path("mqar"))
  flat, rising = [0.2] * 6, [0.1, 0.1, 0.2, 0.3, 0.5, 0.7]
  rows = [_pilot_row(module, "gla", 1e-3, [0.9] * 6), _pilot_row(module, "gla", 3e-3, rising),
          _pilot_row(module, "s4", 1e-3, flat), _pilot_row(module, "s4", 3e-3, rising)]
  assert module.best_lr(rows, "gla") == (1e-3, [])
  assert module.still_rising(rows[3]) and not module.still_rising(rows[2])
  assert not module.still_rising(_pilot_row(module, "s4", 3e-3, [0.1, 0.1, 0.2, 0.5, 0.99, 0.995]))
  lr, todo = module.best_lr(rows, "s4")
  assert lr is None and todo == [module.point("s4", 64, 1e-2, 0)]
  assert module.best_lr(rows, "softmax") == (None, [module.point("softmax", 64, lr, 0) for lr in (1e-3, 3e-3)])
  assert module.get_followup_sweep(rows, "stage=pilot,arms=gla+s4") == todo
  main = module.get_followup_sweep(rows, "stage=main,arms=gla+s4")
  assert main[0] == todo[0] and len(main) == 1 + 9  # s4 waits for its 1e-2 point; gla: 3 widths x 3 seeds
  assert [p["seed"] for p in main[1:]] == [0] * 3 + [1] * 3 + [2] * 3  # seed-major
  assert all(p["train.learning_rate"] == 1e-3 and p["model.mixer"] == "gla" for p in main[1:])
  rows.append(_pilot_row(module, "s4", 1e-2, [0.1, 0.2, 0.4, 0.6, 0.8, 0.85]))
  assert module.best_lr(rows, "s4") == (1e-2, [])
  hard = module.get_followup_sweep(rows, "stage=hard,arms=gla+s4")
  assert len(hard) == 2 * 2 * 2 and all(p["data.seq_len"] == 128 and p["model.max_len"] == 128 and
                                        p["train.num_steps"] == module.HARD_STEPS for p in hard)
  # the plots keep each arm's chosen rate: gla's 3e-3 and s4's 1e-3 / 3e-3 pilot points are left out
  kept = module.chosen(rows)
  assert [(module.arm_of(r), r["_overrides"]["train.learning_rate"]) for r in kept] == [("gla", 1e-3), ("s4", 1e-2)]
  assert [module.arm_of(r) for r in module.chosen(rows[:4])] == ["gla"]  # s4's rate undecided: not drawn
  assert [p["seed"] for p in module.get_followup_sweep(rows, "stage=main,arms=gla+s4,seeds=1+2")] == [1] * 6 + [2] * 6
  hard64 = module.get_followup_sweep(rows, "stage=hard,arms=gla+s4,seeds=0,widths=64")
  assert [(p["model.mixer"], p["model.d_model"], p["seed"]) for p in hard64] == [("gla", 64, 0), ("s4", 64, 0)]
  assert {p["model.d_model"] for p in module.get_followup_sweep(rows, "stage=main,arms=gla,widths=32+128")} == {32, 128}
  with pytest.raises(ValueError, match="widths=32: stage hard runs widths 64"):
    module.get_sweep("stage=hard,widths=32")
  with pytest.raises(ValueError, match="seeds=2: stage hard runs seeds 0"):
    module.get_sweep("stage=hard,seeds=2")
  with pytest.raises(ValueError, match="unknown stage 'mian'; valid: pilot, main, hard, lrcheck"):
    module.get_sweep("stage=mian")


def test_mqar_lrcheck_reruns_a_width_32_collapse_at_the_other_rates():
  """lrcheck: an arm below 0.5 at width 32 and >= 0.9 at width 64 (seed 0, its pilot rate) gets width 32 at the
  other two rates; an arm that does not collapse, or whose rate is undecided, gets no check."""
  module = sweep.load_study(_path("mqar"))
  rows = [_pilot_row(module, "gla", 1e-3, [0.9] * 6), _pilot_row(module, "gla", 3e-3, [0.5] * 6),
          _pilot_row(module, "s4", 1e-3, [0.2] * 6)]
  small = {"_overrides": module.point("gla", 32, 1e-3, 0), "status": "ok", "accuracy": 0.2, "_metrics": []}
  base = [module.point("gla", w, 1e-3, 0) for w in (32, 64)]
  assert module.get_followup_sweep(rows, "stage=lrcheck,arms=gla") == base   # width 32 not run yet
  assert module.LRCHECK.collapses(rows + [small], "gla", 1e-3)
  assert module.get_followup_sweep(rows + [small], "stage=lrcheck,arms=gla+s4") == (
      [module.point("s4", 64, 3e-3, 0)] + base + [module.point("gla", 32, lr, 0) for lr in (3e-3, 1e-2)])
  assert not module.LRCHECK.collapses(rows + [{**small, "accuracy": 0.6}], "gla", 1e-3)
  assert not module.LRCHECK.collapses(rows + [{**small, "status": "failed"}], "gla", 1e-3)


def test_mqar_seedcheck_reruns_the_failing_seed_of_a_split_cell_at_the_other_rates():
  """seedcheck: a cell with one seed >= 0.9 and another below 0.5 (at the arm's pilot rate) reruns the failing
  seed at the other two rates and at its rate for twice the steps; a cell whose seeds agree, or that has one
  seed, gets no check; none of the checks reaches the grid's plots."""
  module = sweep.load_study(_path("mqar"))
  pilot = [_pilot_row(module, "gla", 1e-3, [0.9] * 6), _pilot_row(module, "gla", 3e-3, [0.5] * 6)]

  def main(width, seed, acc):
    return {"_overrides": module.point("gla", width, 1e-3, seed), "status": "ok", "accuracy": acc, "_metrics": []}

  rows = pilot + [main(32, 0, 0.92), main(32, 1, 0.25), main(128, 0, 0.3), main(128, 1, 0.4)]
  failing = module.SEEDCHECK[False].failing
  assert failing(rows, "gla", 32, 1e-3, module.SEEDS) == [1]
  assert failing(rows, "gla", 128, 1e-3, module.SEEDS) == []          # both fail: a capacity or budget limit
  assert failing(rows, "gla", 64, 1e-3, module.SEEDS) == []           # the pilot point alone (one seed)
  assert failing(rows, "gla", 32, 1e-3, (1,)) == []
  got = module.get_followup_sweep(rows, "stage=seedcheck,arms=gla,seeds=0+1")
  grid = [module.point("gla", w, 1e-3, s) for s in (0, 1) for w in (32, 64, 128)]
  longer = module.point("gla", 32, 1e-3, 1, **{"train.num_steps": 3000})
  assert got == grid + [module.point("gla", 32, lr, 1) for lr in (3e-3, 1e-2)] + [longer]
  assert module.chosen(rows + [main(32, 1, 0.9) | {"_overrides": got[-2]}]) == module.chosen(rows)  # off-rate
  for spec in module.get_plots("")[:2]:   # the longer run is at the chosen rate: the plots' budget keeps it out
    grid_rows = [r | {"_config": {"data.seq_len": 64, "train.num_steps": 1500}} for r in rows]
    long_row = main(32, 1, 0.99) | {"_overrides": longer, "_config": {"data.seq_len": 64, "train.num_steps": 3000}}
    assert plots._select(grid_rows + [long_row], spec["where"]) == grid_rows  # pylint: disable=protected-access


def test_mqar_seedcheck_hard_checks_the_hard_grid():
  """seedcheck with hard=True: the split is read from the hard grid's points (T=128, 8 pairs, HARD_STEPS), and
  the checks are hard points too (the other rates at HARD_STEPS, the chosen rate at SEEDCHECK_STEPS); a main-grid
  point with the same width, rate and seed does not count; hard=True outside seedcheck is refused."""
  module = sweep.load_study(_path("mqar"))
  pilot = [_pilot_row(module, "gla", 1e-3, [0.9] * 6), _pilot_row(module, "gla", 3e-3, [0.5] * 6)]
  extra = module.grid_extra(True)
  assert extra == {**module.HARD, "train.num_steps": module.HARD_STEPS}

  def row(seed, acc, **more):
    return {"_overrides": module.point("gla", 64, 1e-3, seed, **more), "status": "ok", "accuracy": acc,
            "_metrics": []}

  main_split = pilot + [row(1, 0.1)]                   # main grid: seed 0 (the pilot point) 0.9, seed 1 0.1
  assert module.SEEDCHECK[False].failing(main_split, "gla", 64, 1e-3, module.SEEDS) == [1]
  assert module.SEEDCHECK[True].failing(main_split, "gla", 64, 1e-3, (0, 1)) == []
  rows = pilot + [row(0, 0.99, **extra), row(1, 0.03, **extra)]
  assert module.SEEDCHECK[True].failing(rows, "gla", 64, 1e-3, (0, 1)) == [1]
  got = module.get_followup_sweep(rows, "stage=seedcheck,hard=True,arms=gla,widths=64")
  grid = [module.point("gla", 64, 1e-3, s, **extra) for s in (0, 1)]
  checks = [module.point("gla", 64, lr, 1, **extra) for lr in (3e-3, 1e-2)]
  longer = module.point("gla", 64, 1e-3, 1, **{**extra, "train.num_steps": module.SEEDCHECK_STEPS})
  assert got == grid + checks + [longer]
  assert module.get_followup_sweep(rows, "stage=seedcheck,arms=gla,widths=64")[-1] == module.point(
      "gla", 64, 1e-3, 2)                               # without hard=True: the main grid's seeds, no checks
  with pytest.raises(ValueError, match="hard=True is a seedcheck option"):
    module.get_sweep("stage=main,hard=True")
  with pytest.raises(ValueError, match="seeds=2: stage seedcheck runs seeds 0"):
    module.get_sweep("stage=seedcheck,hard=True,seeds=2")


def test_lm_study_rows_by_evaluation_length():
  """by_length: one row per evaluation length, the training length's bits/byte from eval.json."""
  module = sweep.load_study(_path("lm"))
  row = {"name": "p", "bits_per_byte": 2.5, "bits_per_byte@T512": 2.6, "bits_per_byte@T8192": None,
         "eval_loss": 1.7, "_config": {"data.seq_len": 128}, "_overrides": {"model.mixer": "gla"}}
  got = [(r["eval_seq_len"], r["bits_per_byte"]) for r in tables.by_length([row])]
  assert got == [(128, 2.5), (512, 2.6)]  # a missing evaluation (None) is left out
  assert module.label({"_overrides": {"model.mixer": "deltanet", "model.delta_gate": "scalar"}}) == "deltanet-scalar"
  assert module.label({"_overrides": {"model.mixer": "linear", "model.conv_width": 4}}) == "linear-conv4"


def test_lm_study_learning_rate_from_the_pilot():
  """Lowest seed-0 bits/byte over the pilot rates; one more rate out when the best is at an edge; a failed
  (diverged) point loses; then every seed at the chosen rate, seed-major, seed 0 being the pilot point."""
  module = sweep.load_study(_path("lm"))
  arg = "arms=gla+softmax"
  pilot = module.get_sweep(arg)
  assert [(p["model.mixer"], p["train.learning_rate"]) for p in pilot] == [
      ("gla", 1e-3), ("gla", 3e-3), ("gla", 1e-2), ("softmax", 1e-3), ("softmax", 3e-3), ("softmax", 1e-2)]
  bits = {("gla", 1e-3): 2.6, ("gla", 3e-3): 2.4, ("gla", 1e-2): 2.5,       # gla: inside the bracket
          ("softmax", 1e-3): 2.7, ("softmax", 3e-3): 2.6, ("softmax", 1e-2): 2.5}   # softmax: at the top edge
  rows = [{"_overrides": p, "status": "ok", "bits_per_byte": bits[p["model.mixer"], p["train.learning_rate"]]}
          for p in pilot]
  gla_width, sm_width = pilot[0]["model.d_model"], pilot[3]["model.d_model"]
  assert module.best_lr(rows, "gla", gla_width) == (3e-3, [])
  lr, todo = module.best_lr(rows, "softmax", sm_width)
  assert lr is None and todo == [module.point("softmax", sm_width, 3e-2, 0)]
  assert module.get_followup_sweep(rows, "stage=pilot," + arg) == todo
  main = module.get_followup_sweep(rows, "stage=main," + arg)
  assert main[0] == todo[0] and [(p["model.mixer"], p["seed"]) for p in main[1:]] == [("gla", s) for s in range(3)]
  assert main[1] == pilot[1]   # seed 0 at the chosen rate is the pilot point itself
  # the edge rate diverged (a failed point, no bits/byte): 1e-2 stays the choice
  rows.append({"_overrides": todo[0], "status": "failed"})
  assert module.best_lr(rows, "softmax", sm_width) == (1e-2, [])
  assert [(module.label(r), r["_overrides"]["train.learning_rate"]) for r in module.chosen(rows)] == [
      ("gla", 3e-3), ("softmax", 1e-2)]
  with pytest.raises(ValueError, match="unknown stage 'mian'; valid: pilot, main"):
    module.get_sweep("stage=mian")


def _new_followups(module, rows, arg, **more):
  """The follow-ups the sweep would run: those not among the rows' points (seed 0's is its pilot point)."""
  return protocol.new_points(module.get_followup_sweep(rows, arg, **more), [r["_overrides"] for r in rows])


def test_hybrids_learning_rate_steps_past_the_grid_edge():
  """A best rate at the grid's edge runs seed 0 once more one ladder step further out (3e-4 below 1e-3, 1e-2
  above 3e-3); the step wins only when strictly better, and the seeds wait for it; an inner best does not step."""
  module = sweep.load_study(_path("hybrids"))   # the rule itself: tests/studies/test_protocol.py
  rates = lambda arg: module.tuning(arg).rule.rates()
  assert rates("task=mqar") == [3e-4, 1e-3, 3e-3, 1e-2] and rates("task=lm,edge=False") == [3e-3, 1e-2]
  arg = "task=mqar,arms=gla-softmax+softmax2,seeds=2"
  first = module.get_sweep(arg)
  width = first[0]["model.d_model"]
  rows = [{"_overrides": p, "status": "ok", "accuracy": a} for p, a in zip(first, [0.4, 0.9, 0.8, 0.7])]
  follow = module.get_followup_sweep(rows, arg)   # gla,softmax best at 3e-3 -> 1e-2; softmax x2 at 1e-3 -> 3e-4
  assert [(p["model.layer_mixers"], p["train.learning_rate"], p["seed"]) for p in follow] == [
      ("gla,softmax", 1e-2, 0), ("softmax,softmax", 3e-4, 0)]
  assert module.tuning(arg).lr(rows, "gla-softmax", width) is None
  assert module.tuning(arg).lr(rows, "gla-softmax", width, provisional=True) == 3e-3   # the grid's best, for tables
  assert [(p["train.learning_rate"], p["seed"]) for p in _new_followups(module, rows, arg, provisional=True)] == [
      (1e-2, 0), (3e-4, 0), (3e-3, 1), (1e-3, 1)]
  rows += [{"_overrides": follow[0], "status": "ok", "accuracy": 0.95},   # the step wins
           {"_overrides": follow[1], "status": "ok", "accuracy": 0.8}]    # a tie: the grid's rate stays
  assert [module.tuning(arg).lr(rows, a, width) for a in ("gla-softmax", "softmax2")] == [1e-2, 1e-3]
  assert [(p["model.layer_mixers"], p["train.learning_rate"], p["seed"]) for p in _new_followups(module, rows, arg)
          ] == [("gla,softmax", 1e-2, 1), ("softmax,softmax", 1e-3, 1)]
  assert [r["_overrides"]["train.learning_rate"] for r in module.chosen(rows, arg)] == [1e-2, 1e-3]   # ARMS' order


def test_hybrids_learning_rate_per_arm():
  """Seed 0 of each arm at every rate; the other seeds at the arm's best seed-0 rate (highest accuracy on MQAR,
  lowest bits/byte on the LM, a failed point losing, ties to the smaller rate), only once all its rates ran."""
  module = sweep.load_study(_path("hybrids"))
  arg = "task=mqar,arms=gla-softmax+softmax2,seeds=3,edge=False"
  first = module.get_sweep(arg)
  assert [(p["model.layer_mixers"], p["train.learning_rate"], p["seed"]) for p in first] == [
      ("gla,softmax", 1e-3, 0), ("gla,softmax", 3e-3, 0), ("softmax,softmax", 1e-3, 0), ("softmax,softmax", 3e-3, 0)]
  acc = [0.4, 0.9, 0.8, 0.8]   # gla,softmax: 3e-3; softmax x2: a tie, so 1e-3
  rows = [{"_overrides": p, "status": "ok", "accuracy": a} for p, a in zip(first, acc)]
  follow = _new_followups(module, rows, arg)
  assert [(p["model.layer_mixers"], p["train.learning_rate"], p["seed"]) for p in follow] == [
      ("gla,softmax", 3e-3, 1), ("softmax,softmax", 1e-3, 1), ("gla,softmax", 3e-3, 2), ("softmax,softmax", 1e-3, 2)]
  assert _new_followups(module, rows[:3], arg) == [p for p in follow if p["model.layer_mixers"] == "gla,softmax"]
  rows[1] = {**rows[1], "status": "failed", "accuracy": None}   # a diverged point loses
  assert module.tuning(arg).lr(rows, "gla-softmax", first[0]["model.d_model"]) == 1e-3
  assert [r["_overrides"]["train.learning_rate"] for r in module.chosen(rows, arg)] == [1e-3, 1e-3]
  lm = "task=lm,arms=softmax2"
  pts = module.get_sweep(lm)
  rows = [{"_overrides": p, "status": "ok", "bits_per_byte": b} for p, b in zip(pts, [2.40, 2.45])]
  assert module.tuning(lm + ",edge=False").lr(rows, "softmax2", pts[0]["model.d_model"]) == 3e-3   # lower bits/byte
  with pytest.raises(ValueError, match="edge must be True or False"):
    module.get_sweep("task=lm,edge=1")
  with pytest.raises(ValueError, match="widths must be positive numbers"):
    module.get_sweep("task=mqar,widths=32+x")
