"""linear_seq.studies.protocol: the learning-rate rule (edges, condition, ties, failures, directions), the point
that carries its arm, seeds' one spec, the bounded replay of follow-up rounds, and a task from a preset."""
import dataclasses
import math
import os

import pytest

from linear_seq import config_lib
from linear_seq.studies import protocol
from linear_seq.studies import sweep

ARMS = {"softmax": {"model.mixer": "softmax"}, "gla": {"model.mixer": "gla", "model.conv_width": 4}}


def _row(value, metric="accuracy", status="ok", **more):
  return {"status": status, metric: value, **more}


GRID = (1e-3, 3e-3)


def test_the_best_of_the_grid_wins_in_the_metric_direction():
  up = protocol.LrRule(GRID, metric="accuracy", direction="max")
  down = protocol.LrRule(GRID, metric="bits_per_byte", direction="min")
  assert up.decide({1e-3: _row(0.9), 3e-3: _row(0.8)}) == protocol.Decision(1e-3, (), 1e-3)
  assert up.decide({1e-3: _row(0.8), 3e-3: _row(0.9)}).lr == 3e-3
  bits = lambda v: _row(v, "bits_per_byte")
  assert down.decide({1e-3: bits(2.0), 3e-3: bits(2.1)}).lr == 1e-3
  assert down.decide({1e-3: bits(2.1), 3e-3: bits(2.0)}).lr == 3e-3


def test_ties_go_to_the_smaller_rate():
  for direction in ("max", "min"):
    rule = protocol.LrRule((1e-2, 1e-3, 3e-3), metric="m", direction=direction)
    assert rule.decide({lr: _row(0.5, "m") for lr in rule.grid}).lr == 1e-3


@pytest.mark.parametrize("bad", [_row(0.0, status="failed"), _row(math.nan), _row(None), {"status": "ok"}])
def test_a_failed_or_nan_point_loses(bad):
  for direction, worse in (("max", -1.0), ("min", 99.0)):
    rule = protocol.LrRule(GRID, metric="accuracy", direction=direction)
    assert rule.decide({1e-3: bad, 3e-3: _row(worse)}).lr == 3e-3
    assert rule.score(bad) == math.inf


def test_a_grid_point_not_yet_run_or_unfinished_leaves_the_rate_unknown():
  rule = protocol.LrRule(GRID)
  assert rule.decide({1e-3: _row(0.9)}) == protocol.Decision(None, (3e-3,), None)
  assert rule.decide({1e-3: _row(0.9), 3e-3: {"status": "no eval.json"}}).todo == (3e-3,)
  assert rule.decide({}).todo == GRID


def test_edge_none_never_steps_and_up_steps_past_the_largest_rate_only():
  assert protocol.LrRule(GRID, edge="none").decide({1e-3: _row(0.1), 3e-3: _row(0.9)}) == protocol.Decision(
      3e-3, (), 3e-3)
  up = protocol.LrRule(GRID, edge="up")
  assert up.rates() == [1e-3, 3e-3, 1e-2]
  assert up.decide({1e-3: _row(0.9), 3e-3: _row(0.1)}).lr == 1e-3          # the lower edge: no step down
  assert up.decide({1e-3: _row(0.1), 3e-3: _row(0.9)}) == protocol.Decision(None, (1e-2,), 3e-3)
  assert up.decide({1e-3: _row(0.1), 3e-3: _row(0.9), 1e-2: _row(0.95)}).lr == 1e-2
  assert up.decide({1e-3: _row(0.1), 3e-3: _row(0.9), 1e-2: _row(0.9)}).lr == 3e-3   # a tie: not strictly better
  assert up.decide({1e-3: _row(0.1), 3e-3: _row(0.9), 1e-2: _row(0.0, status="failed")}).lr == 3e-3


def test_edge_both_steps_down_and_up_on_the_ladder_once():
  rule = protocol.LrRule((1e-3, 3e-3, 1e-2), metric="bits_per_byte", direction="min", edge="both")
  bits = lambda v: _row(v, "bits_per_byte")
  assert rule.rates() == [3e-4, 1e-3, 3e-3, 1e-2, 3e-2]
  assert rule.decide({1e-3: bits(2.0), 3e-3: bits(2.1), 1e-2: bits(2.2)}).todo == (3e-4,)
  assert rule.decide({1e-3: bits(2.2), 3e-3: bits(2.1), 1e-2: bits(2.0)}).todo == (3e-2,)
  assert rule.decide({1e-3: bits(2.2), 3e-3: bits(2.0), 1e-2: bits(2.1)}) == protocol.Decision(3e-3, (), 3e-3)
  done = {1e-3: bits(2.2), 3e-3: bits(2.1), 1e-2: bits(2.0), 3e-2: bits(1.9)}
  assert rule.decide(done) == protocol.Decision(3e-2, (), 1e-2)    # wins, and is not extended further
  assert rule.decide({**done, 3e-2: _row(1.0, "bits_per_byte", status="failed")}).lr == 1e-2


def test_a_one_rate_grid_never_steps():
  rule = protocol.LrRule((3e-3,), edge="both")
  assert rule.rates() == [3e-3] and rule.decide({3e-3: _row(0.5)}) == protocol.Decision(3e-3, (), 3e-3)


def test_the_stated_condition_gates_the_step():
  rule = protocol.LrRule(GRID, edge="up", condition=lambda r: r.get("rising", False), condition_text="rising")
  assert rule.decide({1e-3: _row(0.1), 3e-3: _row(0.9)}).lr == 3e-3
  assert rule.decide({1e-3: _row(0.1), 3e-3: _row(0.9, rising=True)}).todo == (1e-2,)


def test_provisional_is_the_grid_best_while_the_step_is_pending():
  d = protocol.LrRule(GRID, edge="up").decide({1e-3: _row(0.1), 3e-3: _row(0.9)})
  assert (d.lr, d.provisional()) == (None, 3e-3)
  assert protocol.Decision(None, GRID, None).provisional() is None


def test_ladder_steps_and_off_ladder_rates():
  assert protocol.ladder_step(3e-3, up=True) == 1e-2 and protocol.ladder_step(1e-3, up=False) == 3e-4
  assert protocol.ladder_step(2e-3, up=True) == pytest.approx(6e-3)
  assert protocol.ladder_step(1.0, up=True) == 3.0


def test_a_rule_rejects_a_bad_declaration():
  for kw in ({"grid": ()}, {"grid": (0.0,)}, {"grid": GRID, "edge": "down"}, {"grid": GRID, "direction": "up"}):
    with pytest.raises(ValueError):
      protocol.LrRule(**kw)


def test_points_carry_their_arm_and_keep_the_sweeps_names():
  p = protocol.point(ARMS, "gla", {"model.d_model": 64}, 1e-3, 1, {"train.num_steps": 3000})
  assert p.arm == "gla" and list(p) == ["model.mixer", "model.conv_width", "model.d_model",
                                       "train.learning_rate", "seed", "train.num_steps"]
  assert sweep.point_name(p) == sweep.point_name(dict(p))
  assert "train.learning_rate" not in protocol.point(ARMS, "softmax", {}, None, 0)
  assert sweep.get_points(type("M", (), {"get_sweep": staticmethod(lambda: [p])}))[0].arm == "gla"


def test_tuning_decides_from_the_rows_of_its_pilot_points():
  rule = protocol.LrRule(GRID, edge="up")
  tuning = protocol.Tuning(rule, lambda arm, width, lr: protocol.point(ARMS, arm, {"model.d_model": width}, lr, 0))
  row = lambda arm, lr, acc, seed=0: {"_overrides": dict(protocol.point(ARMS, arm, {"model.d_model": 64}, lr, seed)),
                                      "status": "ok", "accuracy": acc}
  rows = [row("gla", 1e-3, 0.5), row("gla", 3e-3, 0.9), row("softmax", 1e-3, 0.9), row("softmax", 1e-3, 0.1, seed=1)]
  lrs, todo = tuning.plan(rows, [("gla", 64), ("softmax", 64)])
  assert lrs == {("gla", 64): None, ("softmax", 64): None}
  assert [(p.arm, p["train.learning_rate"]) for p in todo] == [("gla", 1e-2)]   # not softmax's grid point 3e-3
  assert tuning.plan(rows, [("gla", 64)], provisional=True)[0] == {("gla", 64): 3e-3}
  assert tuning.lr(rows + [row("gla", 1e-2, 0.8)], "gla", 64) == 3e-3


def test_seeds_one_spec():
  assert protocol.seeds(3) == protocol.seeds("3") == (0, 1, 2)
  assert protocol.seeds("0+2") == protocol.seeds([0, 2]) == (0, 2)
  assert protocol.seeds("1", within=(0, 1)) == (1,) and protocol.seeds("1+0", within=(0, 1, 2)) == (1, 0)
  for bad, within in (("0", None), ("1+1", None), ("-1+2", None), ("3", (0, 1))):
    with pytest.raises(ValueError):
      protocol.seeds(bad, within)
  for bad in ("x", 2.5, True, "1+x", "", None, [0, 1.5]):
    with pytest.raises(ValueError, match=r"seeds must be a count \(3: seeds 0, 1, 2\) or '\+'-joined seeds"):
      protocol.seeds(bad)


def test_seed_major_and_new_points():
  assert protocol.seed_major((0, 1), "ab", lambda s, k: None if (s, k) == (1, "a") else f"{k}{s}") == ["a0", "b0",
                                                                                                        "b1"]
  assert protocol.new_points([{"a": 1}, {"a": 2}, {"a": 1}], [{"a": 2}]) == [{"a": 1}]


def test_replay_is_bounded_and_stops_when_nothing_new_has_run():
  ran = {1, 2, 3}
  rows_of = lambda points: [{"n": p["n"]} for p in points if p["n"] in ran]
  chain = lambda rows: [{"n": max(r["n"] for r in rows) + 1}]    # each round asks for the next point
  points, rows = protocol.replay([{"n": 1}], chain, rows_of)
  assert [p["n"] for p in points] == [1, 2, 3, 4] and [r["n"] for r in rows] == [1, 2, 3]   # 4 has not run
  ran = set(range(100))
  points, _ = protocol.replay([{"n": 1}], chain, rows_of, rounds=5)
  assert len(points) == 6


def test_arms_pick_the_usual_mixers_in_the_studys_order_and_rows_name_their_arm():
  picked = protocol.arms("gla", "deltanet")
  assert list(picked) == ["gla", "deltanet"] and picked["deltanet"] == {"model.mixer": "deltanet",
                                                                        "model.delta_gate": "none"}
  picked["gla"]["model.init"] = "x"   # a copy: extending a study's arm leaves MIXER_ARMS alone
  assert protocol.MIXER_ARMS["gla"] == {"model.mixer": "gla"}
  arms = {"mamba2": {"model.mixer": "mamba2"}, "mamba2-init": {"model.mixer": "mamba2", "model.init": "x"}}
  assert protocol.arm_of({"_overrides": {"model.mixer": "mamba2", "model.init": "x", "seed": 0}}, arms) == "mamba2-init"
  assert protocol.arm_of({"_arm": "mamba2", "_overrides": {"model.mixer": "mamba2", "model.init": "x"}}, arms) == "mamba2"
  with pytest.raises(ValueError, match="unknown stage 'x'; valid: a, b"):
    protocol.choice({"stage": "x"}, "stage", ("a", "b"), "a")


def test_a_task_is_a_preset_with_the_studys_overrides_and_tiny_its_smoke_test():
  block_conv = config_lib.load_config(os.path.join(protocol.CONFIGS, "mqar.py:setup=block-conv"))
  config = protocol.task("mqar.py:setup=block-conv", {"eval.batch_size": 250})
  assert config.eval.batch_size == 250 != block_conv.eval.batch_size
  assert config_lib.to_dict(config) == config_lib.to_dict(config_lib.apply_overrides(block_conv, {"eval.batch_size": 250}))
  tiny = protocol.task("mqar.py:setup=block-conv", {"eval.batch_size": 250}, tiny=True)   # the overrides left out
  assert config_lib.to_dict(tiny) == config_lib.to_dict(
      config_lib.load_config(os.path.join(protocol.CONFIGS, "mqar.py:setup=block-conv,tiny=True")))
  small = protocol.task("shakespeare_small.py")
  assert (small.data.seq_len, small.train.num_steps, small.model.conv_width) == (256, 1000, 4)
  assert protocol.task("shakespeare_small.py", tiny=True).model.conv_width == 4


def test_tuning_best_lists_the_points_still_to_run_and_chosen_keeps_the_rows_at_the_rate():
  tuning = protocol.Tuning(protocol.LrRule(GRID, edge="up"),
                           lambda arm, width, lr: protocol.point(ARMS, arm, {"model.d_model": width}, lr, 0))
  row = lambda arm, lr, acc, seed=0, width=64: {"_overrides": dict(protocol.point(ARMS, arm, {"model.d_model": width},
                                                                                 lr, seed)),
                                                "status": "ok", "accuracy": acc, "_arm": arm}
  rows = [row("gla", 1e-3, 0.9), row("gla", 3e-3, 0.5), row("gla", 1e-3, 0.8, seed=1), row("gla", 3e-3, 0.7, seed=1),
          row("softmax", 1e-3, 0.1), row("softmax", 3e-3, 0.9), row("softmax", 3e-3, 0.95, seed=1)]
  assert tuning.best(rows, "gla", 64) == (1e-3, [])
  assert tuning.best(rows[:1], "gla", 64) == (None, [tuning.pilot("gla", 64, 3e-3)])   # the grid's other rate
  assert tuning.best(rows, "softmax", 64) == (None, [tuning.pilot("softmax", 64, 1e-2)])   # the step past the edge
  arm_of, width_of = (lambda r: r["_arm"]), (lambda r: r["_overrides"]["model.d_model"])
  kept = lambda **kw: [(r["_arm"], r["_overrides"].get("train.learning_rate"), r["_overrides"]["seed"])
                       for r in tuning.chosen(rows + [{"_overrides": {"seed": 0}, "_arm": "tiny"}], arm_of, width_of,
                                              **kw)]
  assert kept() == [("gla", 1e-3, 0), ("gla", 1e-3, 1), ("tiny", None, 0)]      # softmax undecided; no rate: kept
  assert kept(provisional=True) == [("gla", 1e-3, 0), ("gla", 1e-3, 1), ("softmax", 3e-3, 0), ("softmax", 3e-3, 1),
                                    ("tiny", None, 0)]
  assert kept(arms=("softmax",), provisional=True)[:2] == [("softmax", 3e-3, 0), ("softmax", 3e-3, 1)]


def test_layer_arms_name_each_run_of_a_mixer():
  arms = protocol.layer_arms("gla,softmax", "gla,gla,gla,softmax", "softmax,softmax", "softmax,gla,gla")
  assert list(arms) == ["gla-softmax", "gla3-softmax", "softmax2", "softmax-gla2"]
  assert arms["gla3-softmax"] == {"model.layer_mixers": "gla,gla,gla,softmax", "model.num_layers": 4}
  assert list(arms["softmax2"]) == ["model.layer_mixers", "model.num_layers"]   # the order names a point's workdir
  assert protocol.arm_of({"_overrides": {**arms["softmax-gla2"], "seed": 0}}, arms) == "softmax-gla2"


def test_still_rising_reads_the_curve_or_the_carried_mark():
  rising = protocol.still_rising(window=500, delta=0.01, below=0.99)
  curve = lambda *accs: {"_metrics": [{"step": 250 * (i + 1), "eval_accuracy": a} for i, a in enumerate(accs)]}
  assert rising(curve(0.5, 0.6, 0.7))              # up 0.2 over the last 500 steps
  assert not rising(curve(0.5, 0.6, 0.505))        # up 0.005: flat
  assert not rising(curve(0.9, 0.95, 0.995))       # at the ceiling
  assert not rising(curve(0.5, 0.7))               # no point 500 steps back
  assert rising({"still_rising": True}) and not rising({}) and not rising({"_metrics": [], "still_rising": False})
  assert protocol.still_rising(key="eval_loss", below=9.0)({"_metrics": [{"step": s, "eval_loss": v} for s, v in
                                                                          ((0, 1.0), (500, 2.0))]})


def _check_rows(values):
  """Finished rows {(arm, width, lr, seed): accuracy} of ARMS' points."""
  return [{"_overrides": dict(protocol.point(ARMS, a, {"model.d_model": w}, lr, s)), "status": "ok", "accuracy": v}
          for (a, w, lr, s), v in values.items()]


def test_a_rate_check_reruns_a_collapse_at_the_other_rates():
  point = lambda arm, width, lr, seed: protocol.point(ARMS, arm, {"model.d_model": width}, lr, seed)
  check = protocol.RateCheck(protocol.LrRule(GRID, edge="up"), point, cell=32, tuned_at=64)
  rows = _check_rows({("gla", 32, 1e-3, 0): 0.2, ("gla", 64, 1e-3, 0): 0.95, ("softmax", 32, 3e-3, 0): 0.6,
                      ("softmax", 64, 3e-3, 0): 0.95})
  assert check.collapses(rows, "gla", 1e-3) and not check.collapses(rows, "softmax", 3e-3)   # 0.6: no collapse
  assert not check.collapses(rows[1:], "gla", 1e-3)                                         # not run at 32 yet
  # the rule's other rates, its step past the edge too
  assert check.points(rows, {"gla": 1e-3, "softmax": 3e-3}) == [
      point("gla", 32, 1e-3, 0), point("gla", 64, 1e-3, 0), point("softmax", 32, 3e-3, 0),
      point("softmax", 64, 3e-3, 0), point("gla", 32, 3e-3, 0), point("gla", 32, 1e-2, 0)]


def test_a_seed_check_reruns_a_split_cells_failing_seed_at_the_other_rates_and_longer():
  point = lambda arm, width, lr, seed: protocol.point(ARMS, arm, {"model.d_model": width}, lr, seed)
  check = protocol.SeedCheck(protocol.LrRule(GRID), point, {"train.num_steps": 3000})
  rows = _check_rows({("gla", 32, 1e-3, 0): 0.95, ("gla", 32, 1e-3, 1): 0.1, ("gla", 32, 1e-3, 2): 0.3,
                      ("gla", 64, 1e-3, 0): 0.4, ("gla", 64, 1e-3, 1): 0.1})
  assert check.failing(rows, "gla", 32, 1e-3, (0, 1, 2)) == [1, 2]
  assert check.failing(rows, "gla", 32, 1e-3, (1, 2)) == []      # no seed reaches 0.9
  assert check.failing(rows, "gla", 64, 1e-3, (0, 1)) == []      # both fail: not a split
  longer = check.longer_point("gla", 32, 1e-3, 1)
  assert longer == {**point("gla", 32, 1e-3, 1), "train.num_steps": 3000} and longer.arm == "gla"
  assert check.points(rows, [("gla", 32, 1e-3), ("gla", 64, 1e-3)], (0, 1)) == [point("gla", 32, 3e-3, 1), longer]


def test_numbers_found_and_curve():
  assert protocol.numbers({}, "widths", (32, 64)) == (32, 64)
  assert protocol.numbers({"widths": "128+64"}, "widths", ()) == (128, 64)
  assert protocol.numbers({"widths": "128+64"}, "widths", (), allowed=(32, 64, 128)) == (64, 128)   # its order
  assert protocol.numbers({"lrs": "1e-3+3e-3"}, "lrs", (), float) == (1e-3, 3e-3)
  for opts, match in (({"widths": "32+x"}, "widths must be positive numbers joined by"),
                      ({"widths": "0"}, "widths must be positive"), ({"widths": 16}, "widths=16: stage main runs")):
    with pytest.raises(ValueError, match=match):
      protocol.numbers(opts, "widths", (), allowed=(32, 64), where="stage main")
  rows = [{"_overrides": {"seed": 0}, "status": "failed"}, {"_overrides": {"seed": 0}, "status": "ok", "n": 1},
          {"_overrides": {"seed": 0}, "status": "ok", "n": 2}]
  assert protocol.found(rows, {"seed": 0})["n"] == 1 and protocol.found(rows, {"seed": 1}) is None
  row = {"_metrics": [{"step": 1, "train_loss": 2.0}, {"step": 250, "eval_accuracy": 0.5}]}
  assert protocol.curve(row) == [(250, 0.5)] and protocol.curve({}) == []


def _study(**more):
  """A two-arm study at widths 32 and 64 (each tuned at its own width), seeds and stage from its options."""
  point = lambda arm, width, lr, seed: protocol.point(ARMS, arm, {"model.d_model": width}, lr, seed)
  def options(arg):
    opts = config_lib.parse_options(arg, ("tiny", "stage", "seeds"))
    return {**opts, "arms": ["softmax", "gla"], "seeds": protocol.seeds(opts.get("seeds", 2)),
            "stage": protocol.choice(opts, "stage", ("pilot", "main", "check"), "main")}
  tuning = protocol.Tuning(protocol.LrRule(GRID, edge="up"), lambda arm, width, lr: point(arm, width, lr, 0))
  return protocol.Study(options, tuning, keys=lambda opts: [(a, w) for a in opts["arms"] for w in (32, 64)],
                        tiny=lambda arm: {**ARMS[arm], "seed": 0}, **{"point": point, **more}), point


def test_a_study_declaration_is_the_sweeps_hooks():
  study, point = _study(stages={"pilot": None, "check": lambda rows, opts, lrs: [point("gla", 16, 1e-3, 9)]})
  assert study.get_sweep("tiny=True") == [{**ARMS["softmax"], "seed": 0}, {**ARMS["gla"], "seed": 0}]
  assert study.get_followup_sweep([], "tiny=True") == []
  assert study.tuning_for("seeds=1").rule.rates() == [1e-3, 3e-3, 1e-2]   # the Tuning under these options
  first = study.get_sweep()
  assert [(p.arm, p["model.d_model"], p["train.learning_rate"], p["seed"]) for p in first] == [
      (a, w, lr, 0) for a in ("softmax", "gla") for w in (32, 64) for lr in GRID]   # arm-major, rates inner
  # softmax: 1e-3 wins at both widths; gla at 32: 3e-3 wins at the top edge, so 1e-2 is still to run; gla at 64
  # has not finished its grid. pilot: only the step; main: the step, then every seed at the known rates.
  acc = {("softmax", 1e-3): 0.9, ("softmax", 3e-3): 0.5, ("gla", 1e-3): 0.5, ("gla", 3e-3): 0.8}
  rows = [{"_overrides": dict(p), "status": "ok", "accuracy": acc[p.arm, p["train.learning_rate"]]}
          for p in first if (p.arm, p["model.d_model"]) != ("gla", 64)]
  step = [point("gla", 32, 1e-2, 0)]
  assert study.get_followup_sweep(rows, "stage=pilot") == step
  assert study.get_followup_sweep(rows, "stage=main,seeds=0+1") == step + [
      point("softmax", w, 1e-3, s) for s in (0, 1) for w in (32, 64)]
  assert study.get_followup_sweep(rows, "stage=check") == step + [point("gla", 16, 1e-3, 9)]
  provisional = study.get_followup_sweep(rows, "seeds=1", provisional=True)
  assert provisional == step + [point("softmax", 32, 1e-3, 0), point("softmax", 64, 1e-3, 0), point("gla", 32, 3e-3, 0)]
  # pilot_todo: the grid's own points still to run are listed too (before the step); at_rates' rate_key maps a
  # cell to the (arm, cell) its rate was tuned at.
  reseeded, _ = _study(point=None)   # without a point: the pilot point, reseeded
  assert reseeded.get_followup_sweep(rows, "seeds=0+1") == study.get_followup_sweep(rows, "seeds=0+1")
  assert all(p.arm for p in reseeded.get_followup_sweep(rows, "seeds=0+1"))
  todo, _ = _study(stages={"pilot": None}, pilot_todo=True)
  assert todo.get_followup_sweep(rows, "stage=pilot") == step + [point("gla", 64, lr, 0) for lr in GRID]
  lrs = {("softmax", 64): 1e-3, ("gla", 64): None}
  assert protocol.at_rates((0,), [("softmax", 32), ("gla", 32)], lrs, point, lambda arm, w: (arm, 64)) == [
      point("softmax", 32, 1e-3, 0)]


def test_a_studys_chosen_rows_use_its_arm_and_cell():
  study, point = _study(arm_of=lambda r: r["_arm"], cell_of=lambda r: r["_overrides"]["model.d_model"])
  acc = {("softmax", 1e-3): 0.9, ("softmax", 3e-3): 0.5, ("gla", 1e-3): 0.5, ("gla", 3e-3): 0.8}
  row = lambda p, value: {"_overrides": dict(p), "status": "ok", "accuracy": value, "_arm": p.arm}
  rows = [row(p, acc[p.arm, p["train.learning_rate"]]) for p in study.get_sweep() if p["model.d_model"] == 32]
  rows += [row(point("softmax", 32, 1e-3, 1), 0.8), row(point("softmax", 64, 1e-3, 1), 0.8)]   # 64: no pilot
  kept = lambda *a, **kw: [(r["_arm"], r["_overrides"]["train.learning_rate"], r["_overrides"]["seed"])
                           for r in study.chosen(rows, *a, **kw)]
  assert kept() == [("softmax", 1e-3, 0), ("softmax", 1e-3, 1)]     # gla's step past the edge is pending
  assert kept(provisional=True) == [("softmax", 1e-3, 0), ("gla", 3e-3, 0), ("softmax", 1e-3, 1)]
  assert kept(provisional=True, arms=("gla",)) == [("gla", 3e-3, 0)]
  by_label, _ = _study()     # default arm_of: the point's '_arm'; default cell: one rate per arm (none tuned)
  assert by_label.chosen(rows) == []


def test_length_eval_is_the_evaluate_command_at_a_length():
  assert protocol.length_eval(512, 8192) == (
      ["-m", "linear_seq.evaluate", "--workdir={workdir}", "--config.eval.seq_len=512", "--config.eval.batch_size=16",
       "--overwrite"], "eval_validation_T512.json")
  command, out = protocol.length_eval(16384, 8192, False, "--position_loss")
  assert command[-3:] == ["--config.eval.batch_size=1", "--position_loss", "--overwrite"]    # at least 1
  assert protocol.length_eval(64, 8192, True)[0][4] == "--config.eval.batch_size=8" and out.endswith("T16384.json")


def test_a_study_without_tiny_points_runs_tiny_through_its_rule():
  study, point = _study()
  plain = dataclasses.replace(study, tiny=None)
  assert plain.get_sweep("tiny=True") == study.get_sweep() != study.get_sweep("tiny=True")
  rows = [{"_overrides": dict(p), "status": "ok", "accuracy": 0.5} for p in study.get_sweep()]   # ties: 1e-3
  assert plain.get_followup_sweep(rows, "tiny=True,seeds=1") == [point(a, w, 1e-3, 0) for a in ("softmax", "gla")
                                                                 for w in (32, 64)]
  assert study.get_followup_sweep(rows, "tiny=True,seeds=1") == []


def test_a_studys_common_options():
  opts = protocol.options("arms=gla+softmax,seeds=0+2,stage=pilot", ("arms", "seeds", "stage", "tiny"), ARMS,
                          stages=("pilot", "main"))
  assert (opts["arms"], opts["seeds"], opts["stage"]) == (["gla", "softmax"], (0, 2), "pilot")
  opts = protocol.options("", ("arms", "seeds", "tiny"), ARMS, ["softmax"], default_seeds=3)
  assert (opts["arms"], opts["seeds"], "stage" in opts) == (["softmax"], (0, 1, 2), False)
  assert protocol.options("tiny=True", ("tiny",), ARMS, tiny_arms=("gla",))["arms"] == ["gla"]
  with pytest.raises(ValueError, match="unknown stage 'x'"):
    protocol.options("stage=x", ("stage",), ARMS, stages=("main",))
  flags = {"edge": True, "hard": False}
  assert [protocol.options(a, ("edge", "hard"), ARMS, flags=flags)[k] for a, k in (("", "edge"), ("edge=False", "edge"),
                                                                                  ("", "hard"))] == [True, False, False]
  with pytest.raises(ValueError, match="edge must be True or False, got 1"):
    protocol.options("edge=1", ("edge",), ARMS, flags=flags)
