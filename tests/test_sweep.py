"""The sweep runner end to end on the MQAR study's 2-point tiny sweep (real linear_seq.main / evaluate CLIs):
both points run, results.csv/md and the plots are written, a rerun skips finished points, an interrupted point
resumes from its checkpoint, --dry_run prints the commands; plus the runner's and report's error cases."""
import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from linear_seq import plots
from linear_seq import report
from linear_seq import sweep
from tests.helpers import cli_env

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STUDY = os.path.join(REPO, "experiments", "mqar", "config.py")
TINY = f"{STUDY}:tiny=True"


def _tiny_points(workdir):
  module = sweep.load_config_module(STUDY)
  base = module.get_config("tiny=True")
  return base, sweep.make_points(TINY, str(workdir), sweep.get_points(module, "tiny=True"), base_config=base)


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
  """An interrupted point (trained to step 2 of 4, as a killed run leaves it), then the sweep CLI over both."""
  workdir = tmp_path_factory.mktemp("sweep")
  _, points = _tiny_points(workdir)
  first = points[0]
  partial = first.commands[0] + ["--config.train.num_steps=2"]
  subprocess.run(partial, env=cli_env(), check=True, capture_output=True, cwd=REPO)
  assert os.path.isdir(os.path.join(first.workdir, "checkpoints", "2"))
  proc = subprocess.run([sys.executable, "-m", "linear_seq.sweep", f"--config={TINY}", f"--workdir={workdir}",
                         "--parallel=2"], env=cli_env(), capture_output=True, text=True, cwd=REPO)
  return workdir, points, proc


def test_sweep_runs_both_points_and_writes_report(swept):
  workdir, points, proc = swept
  assert proc.returncode == 0, proc.stdout + proc.stderr
  for p in points:
    with open(os.path.join(p.workdir, "eval.json")) as f:
      assert json.load(f)["step"] == p.num_steps == 4
    assert "linear_seq.evaluate" in open(os.path.join(p.workdir, "log.txt")).read()
  with open(os.path.join(workdir, "results.csv")) as f:
    rows = list(csv.DictReader(f))
  assert [r["name"] for r in rows] == [p.name for p in points]
  assert {r["model.mixer"] for r in rows} == {"softmax", "gla"}
  assert all(r["status"] == "ok" and 0.0 <= float(r["accuracy"]) <= 1.0 for r in rows)
  md = open(os.path.join(workdir, "results.md")).read()
  assert "| softmax | 16 |" in md and "| gla | 16 |" in md
  assert "jax: `0.10.2`" in md and "XLA_FLAGS (points)" in md and "linear_seq.sweep" in md
  for name in ("accuracy_vs_width.png", "accuracy_vs_state_size.png"):
    with open(os.path.join(workdir, name), "rb") as f:
      assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert f"]({name})" in md


def test_interrupted_point_resumes_from_its_checkpoint(swept):
  _, points, _ = swept
  log = open(os.path.join(points[0].workdir, "log.txt")).read()
  assert "resumed from" in log and "at step 2" in log
  steps = [m["step"] for m in report.read_metrics(points[0].workdir) if "train_loss" in m]
  assert steps == sorted(set(steps)) and steps[-1] == 4  # one uninterrupted-looking run
  assert "resumed from" not in open(os.path.join(points[1].workdir, "log.txt")).read()


def test_rerun_skips_finished_points(swept, capsys):
  workdir, points, _ = swept
  base, _ = _tiny_points(workdir)
  before = [json.load(open(os.path.join(p.workdir, "sweep_point.json")))["attempts"] for p in points]
  assert sweep.run_sweep(TINY, str(workdir), base_config=base) == 0
  out = capsys.readouterr().out
  assert out.count("[skip]") == 2 and "[start]" not in out and "0 ran, 2 skipped, 0 failed" in out
  after = [json.load(open(os.path.join(p.workdir, "sweep_point.json")))["attempts"] for p in points]
  assert after == before


def test_dry_run_prints_commands(tmp_path):
  proc = subprocess.run([sys.executable, "-m", "linear_seq.sweep", f"--config={TINY}", f"--workdir={tmp_path}",
                         "--dry_run", "--config.train.num_steps=3"], env=cli_env(), capture_output=True, text=True,
                        cwd=REPO)
  assert proc.returncode == 0, proc.stderr
  lines = [l for l in proc.stdout.splitlines() if l.startswith("python")]
  assert len(lines) == 2 and not os.listdir(tmp_path)
  for line, mixer in zip(lines, ("softmax", "gla")):
    assert f"--config.model.mixer={mixer}" in line and "--config.train.num_steps=3" in line
    assert line.startswith("python -m linear_seq.main") and "&& python -m linear_seq.evaluate --workdir=" in line


def test_failed_point_is_reported_and_sweep_continues(tmp_path, capsys):
  config = tmp_path / "bad.py"
  config.write_text(
      "from linear_seq import sweep\n"
      f"_study = sweep.load_config_module({STUDY!r})\n"
      "def get_config(arg=''):\n  return _study.get_config('tiny=True')\n"
      "def get_sweep():\n  return [{'model.mixer': 'nope'}]\n"
      "def get_plots():\n  return []\n")
  base = sweep.load_config_module(str(config)).get_config()
  code = sweep.run_sweep(str(config), str(tmp_path / "run"), base_config=base, log=print)
  out = capsys.readouterr().out
  assert code == 1 and "FAILED model.mixer=nope" in out and "[failed]" in out
  assert "nope" in open(tmp_path / "run" / "model.mixer=nope" / "log.txt").read()
  md = open(tmp_path / "run" / "results.md").read()
  assert "## Not finished" in md and "failed" in md


def test_point_names_are_sanitized_and_deterministic():
  assert sweep.point_name({}) == "base"
  assert sweep.point_name({"model.mixer": "gla", "seed": 0}) == "model.mixer=gla,seed=0"
  assert sweep.point_name({"model.gamma": "0.9,0.99", "x": "a/b c"}) == "model.gamma=0.9,0.99,x=a_b_c"
  long = sweep.point_name({"k": "v" * 300})
  assert len(long) == 120 and long == sweep.point_name({"k": "v" * 300})
  assert sweep.format_value(True) == "True" and sweep.format_value(1e-3) == "0.001"


def test_errors():
  base, _ = _tiny_points("/tmp/unused")
  with pytest.raises(ValueError, match="unknown config field 'model.mixr'"):
    sweep.make_points(TINY, "/tmp/x", [{"model.mixr": "gla"}], base_config=base)
  with pytest.raises(ValueError, match="wrong type"):
    sweep.make_points(TINY, "/tmp/x", [{"model.d_model": "wide"}], base_config=base)
  with pytest.raises(ValueError, match="same sub-workdir"):
    sweep.make_points(TINY, "/tmp/x", [{"model.mixer": "a/b"}, {"model.mixer": "a b"}], base_config=base)
  with pytest.raises(ValueError, match=r"\.py config file"):
    sweep.split_config_arg("experiments/mqar")
  with pytest.raises(ValueError, match="config file not found"):
    sweep.load_config_module("/nonexistent/config.py")
  with pytest.raises(ValueError, match="--parallel must be >= 1"):
    sweep.run_points([], parallel=0)
  with pytest.raises(ValueError, match="unknown arm"):
    sweep.load_config_module(STUDY).get_sweep("arms=softmax+lstm")
  with pytest.raises(ValueError, match="unknown config option"):
    sweep.load_config_module(STUDY).get_config("tiny=True,widht=3")


@pytest.mark.parametrize("source, message", [
    ("OPTIONS = ()\n", r"config file '.*config.py' defines no get_config\(arg\)"),
    ("def get_config(arg=''):\n  return None\n\ndef get_sweep(arg=''):\n  return []\n",
     r"get_sweep\(\) returned no points"),
])
def test_config_module_errors(tmp_path, source, message):
  path = tmp_path / "config.py"
  path.write_text(source)
  with pytest.raises(ValueError, match=message):
    sweep.get_points(sweep.load_config_module(str(path)))


def test_plot_errors_and_best_over(tmp_path):
  rows = [{"name": f"p{i}", "status": "ok", "_overrides": {}, "_config": {}, "m": m, "w": w, "lr": lr, "acc": a}
          for i, (m, w, lr, a) in enumerate([("a", 1, 1, 0.2), ("a", 1, 2, 0.6), ("a", 2, 1, 0.9), ("b", 1, 1, 0.1)])]
  series = plots.xy_points(rows, x="w", y="acc", group="m", best_over=["lr"])
  assert series == {"a": [(1, 0.6, 0.0, 1), (2, 0.9, 0.0, 1)], "b": [(1, 0.1, 0.0, 1)]}
  assert plots.xy_points(rows, x="w", y="acc", group="m", best_over=["lr"], better="min")["a"][0][1] == 0.2
  # Without a group: one series; points with the same x (seeds, other settings) are averaged.
  assert plots.xy_points(rows, x="w", y="acc") == {"": [(1, pytest.approx(0.3), pytest.approx(0.2646, abs=1e-4), 3),
                                                        (2, 0.9, 0.0, 1)]}
  with pytest.raises(ValueError, match="'max' or 'min'"):
    plots.xy_points(rows, x="w", y="acc", better="best")
  with pytest.raises(ValueError, match="unknown plot kind 'pie'; valid kinds: xy, curves, series"):
    plots.draw([{"kind": "pie", "file": "a.png"}], rows, str(tmp_path))
  with pytest.raises(ValueError, match="'file' ending in .png"):
    plots.draw([{"kind": "xy", "x": "w", "y": "acc"}], rows, str(tmp_path))
  # Bars over a categorical x; zoom starts the y axis near the smallest bar instead of 0.
  spec = {"kind": "xy", "x": "m", "y": "acc", "file": "bars.png", "zoom": True}
  bpb = [{"name": m, "status": "ok", "_overrides": {}, "_config": {}, "m": m, "acc": a}
         for m, a in (("a", 2.4), ("b", 2.5))]
  ax = plots.plt.figure().gca()
  assert plots._draw_xy(ax, bpb, spec)  # pylint: disable=protected-access
  np.testing.assert_allclose(ax.get_ylim(), (2.375, 2.525))  # a quarter of the spread either side
  plots.plt.close("all")
  assert plots.draw([spec], bpb, str(tmp_path)) == ["bars.png"] and (tmp_path / "bars.png").stat().st_size > 0


def test_aggregate_mean_std_over_seeds():
  rows = [{"name": f"s{s}", "status": "ok", "_overrides": {"m": "a", "seed": s}, "_config": {}, "m": "a",
           "seed": s, "accuracy": acc, "num_params": 10} for s, acc in enumerate([0.5, 0.7, 0.9])]
  rows.append({"name": "bad", "status": "failed", "_overrides": {"m": "b", "seed": 0}, "_config": {}, "m": "b",
               "seed": 0, "_workdir": "/tmp/bad"})
  (agg,) = report.aggregate(rows)
  assert agg["seeds"] == [0, 1, 2] and agg["accuracy"][2] == 3
  assert agg["accuracy"][0] == pytest.approx(0.7) and agg["accuracy"][1] == pytest.approx(0.2)
  md = report.markdown(rows, study="t", command="cmd", env={})
  assert "0.7 ± 0.2" in md and "mean ± std over seeds 0, 1, 2" in md and "`bad`: failed" in md
