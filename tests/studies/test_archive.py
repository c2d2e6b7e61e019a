"""The sweep's point archive (linear_seq.studies.archive): a finished sub-workdir saved as one JSON record and
restored into a fresh workdir gives the same rows and counts as finished; records made with another config are
neither used nor overwritten; a damaged record is reported. Sub-workdirs here are written by hand (no training);
the sweep end to end with --archive is in test_sweep.py."""
import json
import os

import pytest

from linear_seq import config_lib
from linear_seq.studies import archive
from linear_seq.studies import collect
from linear_seq.studies import sweep
from tests.helpers import REPO

STUDY = os.path.join(REPO, "experiments", "mqar", "config.py")
TINY = f"{STUDY}:tiny=True"


def _points(workdir, base=None, extra=()):
  module = sweep.load_study(STUDY)
  base = base or module.get_config("tiny=True")
  return sweep.make_points(TINY, str(workdir), sweep.get_points(module, "tiny=True"), base_config=base,
                           extra_commands=extra)


def _finish(point, accuracy, config=None, step=None):
  """Writes what a finished run leaves besides its checkpoints: config.json, metrics.jsonl, eval.json, ..."""
  os.makedirs(point.workdir, exist_ok=True)
  flat = dict(point.flat_config if config is None else config)
  nested: dict = {}
  for k, v in flat.items():
    d = nested
    *head, last = k.split(".")
    for h in head:
      d = d.setdefault(h, {})
    d[last] = v
  step = point.num_steps if step is None else step
  with open(os.path.join(point.workdir, "config.json"), "w") as f:
    json.dump(nested, f)
  with open(os.path.join(point.workdir, "metrics.jsonl"), "w") as f:
    f.write(json.dumps({"step": 2, "train_loss": 3.5, "tokens_per_sec": 100.0}) + "\n")
    f.write(json.dumps({"step": 2, "eval_accuracy": accuracy / 2}) + "\n")
    f.write(json.dumps({"step": step, "eval_accuracy": accuracy}) + "\n")
    f.write('{"step": 9, "train_lo')   # a line cut off by a kill
  with open(os.path.join(point.workdir, "eval.json"), "w") as f:
    json.dump({"step": step, "accuracy": accuracy, "state_size": 1312}, f)
  with open(os.path.join(point.workdir, "sweep_point.json"), "w") as f:
    json.dump({"name": point.name, "status": "ok", "wall_time": 12.5, "attempts": 1}, f)
  with open(os.path.join(point.workdir, "log.txt"), "w") as f:
    f.write("not archived\n")


def _archived(tmp_path, accuracies=(0.75, 0.75)):
  """The tiny sweep's points finished in tmp_path/run with these accuracies and archived in tmp_path/arch."""
  points = _points(tmp_path / "run")
  for p, acc in zip(points, accuracies):
    _finish(p, acc)
  arch = str(tmp_path / "arch")
  archive.sync(points, arch, sweep.is_finished, print)
  return points, arch


def _strip(rows):
  return [{k: v for k, v in r.items() if k != "_workdir"} for r in rows]


def test_saved_points_restore_into_a_fresh_workdir_with_the_same_rows(tmp_path):
  points = _points(tmp_path / "run")
  for p, acc in zip(points, (0.75, 0.5)):
    _finish(p, acc)
  logs = []
  assert archive.sync(points, str(tmp_path / "arch"), sweep.is_finished, logs.append) == (0, 2)
  assert sorted(os.listdir(tmp_path / "arch")) == sorted(f"{p.name}.json" for p in points)

  fresh = _points(tmp_path / "fresh")
  assert not any(sweep.is_finished(p) for p in fresh)
  assert archive.sync(fresh, str(tmp_path / "arch"), sweep.is_finished, logs.append) == (2, 0)
  assert all(sweep.is_finished(p) for p in fresh)
  assert _strip(collect.collect(fresh)) == _strip(collect.collect(points))
  assert [r["accuracy"] for r in collect.collect(fresh)] == [0.75, 0.5]
  assert not os.path.exists(os.path.join(fresh[0].workdir, "log.txt"))   # only the small result files
  assert len(collect.read_metrics(fresh[0].workdir)) == 3                # the cut-off line is dropped
  assert "restored from" in logs[-1] and ": 2 points; archived there: 0" in logs[-1]


def test_unfinished_points_are_not_archived_and_short_records_not_used(tmp_path):
  points = _points(tmp_path / "run")
  _finish(points[0], 0.9, step=points[0].num_steps - 1)   # eval.json before the final step
  assert archive.sync(points, str(tmp_path / "arch"), sweep.is_finished, print) == (0, 0)
  archive.save(str(tmp_path / "arch"), points[0].workdir, points[0].name, points[0].overrides)
  logs = []
  fresh = _points(tmp_path / "fresh")
  assert archive.sync(fresh, str(tmp_path / "arch"), sweep.is_finished, logs.append) == (0, 0)
  assert f"its eval.json is at step {points[0].num_steps - 1}, not {points[0].num_steps}" in logs[0]
  assert not sweep.is_finished(fresh[0])


def test_a_record_made_with_another_config_is_refused_and_kept(tmp_path):
  _, arch = _archived(tmp_path)
  module = sweep.load_study(STUDY)
  other = config_lib.apply_overrides(module.get_config("tiny=True"), {"train.warmup_steps": 3})
  fresh = _points(tmp_path / "fresh", base=other)
  logs = []
  assert archive.sync(fresh, arch, sweep.is_finished, logs.append) == (0, 0)
  assert "its config differs: train.warmup_steps: 1 vs 3; the point runs" in logs[0], logs
  # the rerun under the other config finishes: the committed record is not replaced by it
  _finish(fresh[0], 0.25)
  assert not archive.save_point(arch, fresh[0], logs.append)
  assert "holds it with another config (train.warmup_steps: 1 vs 3)" in logs[-1]
  assert archive.load(arch, fresh[0].name)["files"]["eval.json"]["accuracy"] == 0.75


def test_extra_outputs_are_required_in_a_record(tmp_path):
  extra = [(["-m", "linear_seq.probe", "--workdir={workdir}"], "probe.json")]
  points = _points(tmp_path / "run", extra=extra)
  for p in points:
    _finish(p, 0.75)
  arch = str(tmp_path / "arch")
  for p in points:   # archived without probe.json (e.g. by a sweep of the study before it had the extra command)
    archive.save(arch, p.workdir, p.name, p.overrides)
  logs = []
  assert archive.sync(_points(tmp_path / "fresh", extra=extra), arch, sweep.is_finished, logs.append) == (0, 0)
  assert "it lacks probe.json" in logs[0]
  with open(os.path.join(points[0].workdir, "probe.json"), "w") as f:
    json.dump({"probe_accuracy": 0.5}, f)
  archive.save(arch, points[0].workdir, points[0].name, points[0].overrides)
  fresh = _points(tmp_path / "fresh2", extra=extra)
  assert archive.sync(fresh, arch, sweep.is_finished, print) == (1, 0)
  assert collect.collect(fresh)[0]["probe_accuracy"] == 0.5


def test_damaged_record_is_reported_not_rerun_over(tmp_path):
  points = _points(tmp_path / "run")
  arch = tmp_path / "arch"
  arch.mkdir()
  (arch / f"{points[0].name}.json").write_text('{"version": 1, "files": {"eval.js')
  with pytest.raises(ValueError, match=r"does not parse .*; fix or delete it"):
    archive.sync(points, str(arch), sweep.is_finished, print)
  (arch / f"{points[0].name}.json").write_text('{"files": {}}')
  with pytest.raises(ValueError, match="is not a version-1 record"):
    archive.load(str(arch), points[0].name)


def test_restore_all_fills_a_workdir_for_tools_that_read_sub_workdirs(tmp_path):
  _, arch = _archived(tmp_path, (0.75, 0.5))
  assert archive.restore_all(arch, str(tmp_path / "fresh"), print) == 2
  assert archive.restore_all(arch, str(tmp_path / "fresh"), print) == 0   # already there
  fresh = _points(tmp_path / "fresh")
  assert [r["accuracy"] for r in collect.collect(fresh)] == [0.75, 0.5]
  with pytest.raises(FileNotFoundError, match="no archive folder"):
    archive.restore_all(str(tmp_path / "none"), str(tmp_path / "fresh"))


def test_a_point_is_archived_when_it_finishes(tmp_path, monkeypatch):
  """run_points' save-on-finish path (the sweep's points run here as a fake that writes a finished sub-workdir)."""
  points = _points(tmp_path / "run")

  def fake_run(point, env, cpu):
    _finish(point, 0.5)
    return {"name": point.name, "status": "ok", "wall_time": 1.0}

  monkeypatch.setattr(sweep, "_run_point", fake_run)
  arch = str(tmp_path / "arch")
  sweep.run_points(points, archive_dir=arch, log=lambda _: None)
  assert [archive.load(arch, p.name)["files"]["eval.json"]["accuracy"] for p in points] == [0.5, 0.5]
  assert not [f for f in os.listdir(arch) if not f.endswith(".json")]   # no temporary files left
  assert "checkpointed.json" not in archive.load(arch, points[0].name)["files"]


def test_a_point_finished_under_another_config_is_not_archived(tmp_path):
  points = _points(tmp_path / "run")
  ran = dict(points[0].flat_config, **{"train.warmup_steps": 3})   # e.g. a sweep run with --config.train.warmup_steps=3
  _finish(points[0], 0.25, config=ran)
  logs = []
  assert archive.sync(points[:1], str(tmp_path / "arch"), sweep.is_finished, logs.append) == (0, 0)
  assert "it finished under another config than the point's (train.warmup_steps: 3 vs 1)" in logs[0]
  assert archive.load(str(tmp_path / "arch"), points[0].name) is None


def test_config_comparison(tmp_path):
  points = _points(tmp_path / "run")
  flat = points[0].flat_config
  record = {"files": {"config.json": {"train": {"keep_checkpoints": 1, "profile_steps": "2,4"},
                                      "mesh": {"data": 2}, "model": {"mixer": flat["model.mixer"]}}}}
  assert archive.config_mismatch(record, flat) == []   # fields that do not change results
  record["files"]["config.json"]["model"]["mixer"] = "gla" if flat["model.mixer"] != "gla" else "softmax"
  assert archive.config_mismatch(record, flat) == [f"model.mixer: {record['files']['config.json']['model']['mixer']!r}"
                                                   f" vs {flat['model.mixer']!r}"]
  nested = {"files": {"config.json": {"x": [[1, 2], [3]]}}}
  assert archive.config_mismatch(nested, {"x": ((1, 2), (3,))}) == []
  assert archive.config_mismatch(nested, {"x": ((1, 2), (4,))}) == ["x: ((1, 2), (3,)) vs ((1, 2), (4,))"]
  _finish(points[0], 0.5)
  no_config = archive.make_record(points[0].workdir, points[0].name, points[0].overrides)
  del no_config["files"]["config.json"]
  assert archive.usable(no_config, points[0].num_steps, (), flat) == (False, "it has no config.json")


def test_restore_all_never_writes_into_an_existing_sub_workdir(tmp_path):
  _, arch = _archived(tmp_path)
  fresh = _points(tmp_path / "fresh")
  os.makedirs(fresh[0].workdir)   # e.g. a point partly trained (or running) under another config
  with open(os.path.join(fresh[0].workdir, "metrics.jsonl"), "w") as f:
    f.write('{"step": 1, "train_loss": 9.0}\n')
  assert archive.restore_all(arch, str(tmp_path / "fresh"), print) == 1
  assert not os.path.exists(os.path.join(fresh[0].workdir, "eval.json"))
  assert sweep.is_finished(fresh[1])
