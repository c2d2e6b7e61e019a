"""The sweep runner end to end on the MQAR study's 2-point tiny sweep (real linear_seq.main / evaluate CLIs):
both points run, results.csv/md and the plots are written, a rerun skips finished points, an interrupted point
resumes from its checkpoint, --dry_run prints the commands; plus the runner's and report's error cases."""
import csv
import json
import os
import subprocess
import sys

import pytest

from linear_seq.studies import collect
from linear_seq.studies import sweep
from tests.helpers import REPO, cli_env

STUDY = os.path.join(REPO, "experiments", "mqar", "config.py")
TINY = f"{STUDY}:tiny=True"


def _tiny_points(workdir):
  module = sweep.load_study(STUDY)
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
  proc = subprocess.run([sys.executable, "-m", "linear_seq.studies.sweep", f"--config={TINY}", f"--workdir={workdir}",
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
  assert "| softmax |" in md and "| gla |" in md and "In every row: model.d_model=16;" in md   # one width
  assert "jax: `0.10.2`" in md and "XLA_FLAGS (points)" in md and "linear_seq.studies.sweep" in md
  for name in ("accuracy_vs_width.png", "accuracy_vs_state_size.png"):
    with open(os.path.join(workdir, name), "rb") as f:
      assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert f"]({name})" in md


def test_interrupted_point_resumes_from_its_checkpoint(swept):
  _, points, _ = swept
  log = open(os.path.join(points[0].workdir, "log.txt")).read()
  assert "resumed from" in log and "at step 2" in log
  steps = [m["step"] for m in collect.read_metrics(points[0].workdir) if "train_loss" in m]
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


def test_a_fresh_workdir_continues_from_the_archive(swept, tmp_path, capsys):
  """--archive: a sweep over a new machine's empty workdir skips the points another machine finished and
  archived, and reports the same results."""
  workdir, points, _ = swept
  base, _ = _tiny_points(workdir)
  arch = str(tmp_path / "points")
  assert sweep.run_sweep(TINY, str(workdir), base_config=base, archive_dir=arch) == 0
  assert sorted(os.listdir(arch)) == sorted(f"{p.name}.json" for p in points)
  capsys.readouterr()
  fresh = tmp_path / "fresh"
  assert sweep.run_sweep(TINY, str(fresh), base_config=base, archive_dir=arch) == 0
  out = capsys.readouterr().out
  assert ": 2 points; archived there: 0" in out and out.count("[skip]") == 2 and "[start]" not in out
  assert "0 ran, 2 skipped, 0 failed" in out
  read = lambda d: [(r["name"], r["accuracy"], r["state_size"]) for r in csv.DictReader(open(d / "results.csv"))]
  assert read(fresh) == read(workdir)


def test_dry_run_prints_commands(tmp_path):
  proc = subprocess.run([sys.executable, "-m", "linear_seq.studies.sweep", f"--config={TINY}", f"--workdir={tmp_path}",
                         "--dry_run", "--config.train.num_steps=3"], env=cli_env(), capture_output=True, text=True,
                        cwd=REPO)
  assert proc.returncode == 0, proc.stderr
  lines = [l for l in proc.stdout.splitlines() if l.startswith("python")]
  assert len(lines) == 2 and not os.listdir(tmp_path)
  for line, mixer in zip(lines, ("softmax", "gla")):
    assert f"--config.model.mixer={mixer}" in line and "--config.train.num_steps=3" in line
    assert line.startswith("python -m linear_seq.main") and "&& python -m linear_seq.evaluate --workdir=" in line


@pytest.mark.parametrize("flag, message", [
    ("--config.model.mixr=gla", "error: unknown config field 'model.mixr'; did you mean 'model.mixer'? valid "
     "fields at model:"),
    ("--config.train.num_steps=many", "error: train.num_steps expects int, got 'many'"),
    ("--parallel=0", "error: --parallel must be >= 1, got 0"),
    ("--parallel=x", "error: flag --parallel=x: invalid literal for int()"),
])
def test_bad_global_override_fails_before_any_point(tmp_path, flag, message):
  proc = subprocess.run([sys.executable, "-m", "linear_seq.studies.sweep", f"--config={TINY}",
                         f"--workdir={tmp_path}", flag], env=cli_env(), capture_output=True, text=True, cwd=REPO)
  assert proc.returncode == 1 and message in proc.stderr, proc.stderr[-2000:]
  assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
  assert not os.listdir(tmp_path)


def test_failed_point_is_reported_and_sweep_continues(tmp_path, capsys):
  config = tmp_path / "bad.py"
  config.write_text(
      "from linear_seq import config_lib\n"
      f"_study = config_lib.load_module({STUDY!r})\n"
      "def get_config(arg=''):\n  return _study.get_config('tiny=True')\n"
      "def get_sweep():\n  return [{'model.mixer': 'nope'}]\n"
      "def get_plots():\n  return []\n")
  base = sweep.load_study(str(config)).get_config()
  code = sweep.run_sweep(str(config), str(tmp_path / "run"), base_config=base, log=print)
  out = capsys.readouterr().out
  assert code == 1 and "FAILED model.mixer=nope" in out and "[1/1] failed model.mixer=nope in " in out
  assert "nope" in open(tmp_path / "run" / "model.mixer=nope" / "log.txt").read()
  md = open(tmp_path / "run" / "results.md").read()
  assert "## Not finished" in md and "failed" in md


def test_progress_line_per_finished_point(tmp_path):
  """index/total, status, overrides, the point's metric, its time, the sweep's elapsed time and the ETA."""
  now = [100.0]
  progress = sweep.Progress(5, parallel=2, clock=lambda: now[0])
  points = [sweep.Point({"model.mixer": m, "seed": 0}, m, str(tmp_path / m), 10, []) for m in ("gla", "s4")]
  os.makedirs(points[0].workdir)
  with open(os.path.join(points[0].workdir, "eval.json"), "w") as f:
    json.dump({"step": 10, "accuracy": 0.91234, "eval_loss": 0.3}, f)
  now[0] = 160.0
  assert progress.line(points[0], {"status": "ok", "wall_time": 50.0}) == (
      "[1/5] ok model.mixer=gla, seed=0: accuracy=0.9123 in 50s; elapsed 1m00s, ETA 1m40s")  # 50 s × ⌈4/2⌉
  now[0] = 3800.0
  assert progress.line(points[1], {"status": "failed", "wall_time": 70.0}) == (
      f"[2/5] failed model.mixer=s4, seed=0 in 1m10s (see {points[1].workdir}/log.txt); elapsed 1h01m, "
      "ETA 2m00s")  # mean 60 s × ⌈3/2⌉
  for _ in range(3):
    last = progress.line(points[0], {"status": "ok", "wall_time": 1.0})
  assert last.startswith("[5/5] ok") and last.endswith("done")


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
  with pytest.raises(ValueError, match="sweep point .*: model.d_model expects int, got 'wide'"):
    sweep.make_points(TINY, "/tmp/x", [{"model.d_model": "wide"}], base_config=base)
  with pytest.raises(ValueError, match="same sub-workdir"):
    sweep.make_points(TINY, "/tmp/x", [{"model.mixer": "a/b"}, {"model.mixer": "a b"}], base_config=base)
  with pytest.raises(ValueError, match="config file not found"):
    sweep.load_study("/nonexistent/config.py")
  with pytest.raises(ValueError, match="--parallel must be >= 1"):
    sweep.run_points([], parallel=0)
  with pytest.raises(ValueError, match="unknown arm"):
    sweep.load_study(STUDY).get_sweep("arms=softmax+lstm")
  with pytest.raises(ValueError, match="unknown config option"):
    sweep.load_study(STUDY).get_config("tiny=True,widht=3")


@pytest.mark.parametrize("source, message", [
    ("OPTIONS = ()\n", r"config file '.*config.py' defines no get_config\(arg\)"),
    ("def get_config(arg=''):\n  return None\n\ndef get_sweep(arg=''):\n  return []\n",
     r"get_sweep\(\) returned no points"),
])
def test_config_module_errors(tmp_path, source, message):
  path = tmp_path / "config.py"
  path.write_text(source)
  with pytest.raises(ValueError, match=message):
    sweep.get_points(sweep.load_study(str(path)))


FOLLOWUP_STUDY = '''
import ml_collections

def get_config(arg=""):
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.train = ml_collections.ConfigDict({"num_steps": 4})
  return c

def get_sweep():
  return [{"seed": 0}]

def get_followup_sweep(rows):
  """seed s + 1 once seed s has a row (each choice needs the previous round's result), up to seed 3."""
  have = {r["_overrides"]["seed"] for r in rows if r["status"] == "ok"}
  return [{"seed": s + 1} for s in sorted(have) if s < 3]
'''


def _run_followup_study(tmp_path, monkeypatch):
  """Runs FOLLOWUP_STUDY's sweep with fake point runs; returns (the seeds of each run_points call, the seeds of
  the rows of each collect call)."""
  study = tmp_path / "study.py"
  study.write_text(FOLLOWUP_STUDY)
  ran, seen = [], []

  def fake_run_points(points, **kw):
    ran.append([p.overrides["seed"] for p in points])
    return {p.name: {"name": p.name, "status": "ok"} for p in points}

  def fake_collect(points, statuses=None):
    seen.append(sorted(p.overrides["seed"] for p in points))
    return [{"_overrides": p.overrides, "status": "ok", "name": p.name} for p in points]

  monkeypatch.setattr(sweep, "run_points", fake_run_points)
  monkeypatch.setattr(collect, "collect", fake_collect)
  monkeypatch.setattr(sweep.plots_lib, "draw", lambda specs, rows, workdir: [])
  monkeypatch.setattr(collect, "write_curves", lambda workdir, rows, sources: "curves.json")
  monkeypatch.setattr(sweep.report, "write_report", lambda workdir, rows, **kw: [])
  module = sweep.load_study(str(study))
  assert sweep.run_sweep(str(study), str(tmp_path / "runs"), base_config=module.get_config(), log=lambda m: None) == 0
  return ran, seen


def test_followups_repeat_until_the_hook_adds_no_new_point(tmp_path, monkeypatch):
  """A follow-up chosen from a follow-up's result runs too (rounds until nothing new), each point once."""
  ran, _ = _run_followup_study(tmp_path, monkeypatch)
  assert ran == [[0], [1], [2], [3]]


def test_a_round_runs_every_follow_up_whose_chain_has_finished(tmp_path, monkeypatch):
  """Follow-ups finished by an earlier sweep choose theirs at once: seeds 1 and 2 are on disk, so seed 3 runs in
  round 1 beside them (the skipped ones) instead of a round later on an otherwise idle core."""
  for s in (1, 2):
    sub = tmp_path / "runs" / sweep.point_name({"seed": s})
    sub.mkdir(parents=True)
    (sub / "eval.json").write_text(json.dumps({"step": 4, "eval_loss": 1.0}))
  ran, seen = _run_followup_study(tmp_path, monkeypatch)
  assert ran == [[0], [1, 2, 3]]
  # The hook's rows while round 1 was chosen: seed 3's (not run yet) is not among them; then all four.
  assert seen[:5] == [[0], [0, 1], [0, 1, 2], [0, 1, 2], [0, 1, 2, 3]]


PLOTS_STUDY = '''
import ml_collections

def get_config(arg=""):
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.width = 8
  c.train = ml_collections.ConfigDict({"num_steps": 4})
  return c

def get_sweep():
  return [{"width": 8, "seed": 0}]

def get_followup_sweep(rows):
  return [{"width": 16, "seed": 0}] if rows else []

def get_extra_commands():
  return [(["-m", "nothing"], "decode.json"), (["-m", "nothing"], "eval_validation_T512.json")]

def get_plots():
  return [{"kind": "xy", "x": "width", "y": "decode_ms_per_token", "file": "decode.png"},
          {"kind": "xy", "x": "width", "y": "bits_per_byte@T512", "file": "long.png"}]
'''


def test_plots_only_redraws_from_the_sub_workdirs_with_the_extra_commands_outputs(tmp_path):
  """--plots_only reads the points' (and the follow-ups') sub-workdirs, the extra commands' outputs included
  (decode.json's columns, eval_validation_T512.json's as bits_per_byte@T512), runs nothing, writes no report."""
  study = tmp_path / "study.py"
  study.write_text(PLOTS_STUDY)
  runs = tmp_path / "runs"
  for width, ms in ((8, 0.2), (16, 0.3)):
    sub = runs / sweep.point_name({"width": width, "seed": 0})
    sub.mkdir(parents=True)
    (sub / "eval.json").write_text(json.dumps({"step": 4, "bits_per_byte": 2.0}))
    (sub / "decode.json").write_text(json.dumps({"step": 4, "decode_ms_per_token": ms}))
    (sub / "eval_validation_T512.json").write_text(json.dumps({"step": 4, "bits_per_byte": 2.5}))
  module = sweep.load_study(str(study))
  logged = []
  assert sweep.run_sweep(str(study), str(runs), base_config=module.get_config(), plots_only=True,
                         log=logged.append) == 0
  assert logged[-1] == "sweep: drew decode.png, decode.pdf, long.png, long.pdf", logged
  assert not (runs / "results.csv").exists()
