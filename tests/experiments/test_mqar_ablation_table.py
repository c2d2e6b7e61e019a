"""experiments/mqar/ablation_table.py (the MQAR ablation's Δ-accuracy table) on a sweep directory the test
writes: cells from the study's points (a point not run yet is '…'), per-seed accuracy, mean, Δ vs indep, seeds
≥ 0.99 and the first step there, and the CSV beside the markdown."""
import importlib.util
import json
import os

from linear_seq.studies import sweep
from tests.helpers import REPO

ARG = "mixers=gla,variants=ours/indep"


def _load():
  spec = importlib.util.spec_from_file_location("mqar_ablation_table",
                                                os.path.join(REPO, "experiments", "mqar", "ablation_table.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)   # defines no absl flags (only when run as a script)
  return module


def _write_point(workdir, overrides, accuracy, curve):
  sub = os.path.join(workdir, sweep.point_name(overrides))
  os.makedirs(sub)
  with open(os.path.join(sub, "eval.json"), "w") as f:
    json.dump({"step": 1500, "accuracy": accuracy}, f)
  with open(os.path.join(sub, "metrics.jsonl"), "w") as f:
    f.writelines(json.dumps({"step": s, "eval_accuracy": a}) + "\n" for s, a in curve)


def test_ablation_table_from_a_sweep_directory(tmp_path):
  table = _load()
  points = table.ablation.get_sweep(ARG)
  assert [(p.arm, p["seed"]) for p in points] == [("ours", 0), ("indep", 0), ("ours", 1), ("indep", 1)]
  assert [table.ablation.variant_of(dict(p)) for p in points] == ["ours", "indep"] * 2   # without the label too
  wd = str(tmp_path / "runs")
  ours0, indep0, _, indep1 = points     # seed 1 of `ours` has not run
  _write_point(wd, ours0, 0.25, [(750, 0.2)])
  _write_point(wd, indep0, 0.995, [(750, 0.5), (1000, 0.991)])
  _write_point(wd, indep1, 0.985, [(750, 0.6)])
  out = tmp_path / "ablation.md"
  text = table.write(wd, out=str(out), arg=ARG)
  assert text.splitlines() == [
      "| mixer | variant | accuracy per seed | mean | Δ vs indep | seeds ≥ 0.99 | first step ≥ 0.99 |",
      "|---|---|---|---|---|---|---|",
      "| gla | ours | 0.250 / … | 0.250 | -0.740 | 0/1 | — |",
      "| gla | indep | 0.995 / 0.985 | 0.990 |  | 1/2 | 1000 / — |"] and out.read_text() == text
  assert (tmp_path / "ablation.csv").read_text().splitlines() == [
      "mixer,variant,seed,accuracy,first_step_0.99,delta_mean_vs_indep", "gla,ours,0,0.25,,-0.74",
      "gla,indep,0,0.995,1000,0.0", "gla,indep,1,0.985,,0.0"]
