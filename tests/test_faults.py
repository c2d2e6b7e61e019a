"""Fault injection: kills, flipped bits, deleted checkpoints, a second writer, interrupted evaluations, bad input.

Each fault must either be recovered from exactly (bitwise the same run as without it) or refused with one
clear line; none may pass silently. Tiny configs (tests/helpers.py's mqar(), compiled once per process and
kept in the persistent compilation cache); the command-line cases start their subprocesses together.
"""
import glob
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

from linear_seq import checkpoint
from linear_seq import integrity
from linear_seq import metrics
from linear_seq import restored
from linear_seq import train
from linear_seq import validation
from linear_seq import workdir as workdir_lib
from linear_seq.data import local_text
from tests.helpers import REPO
from tests.helpers import TEXT
from tests.helpers import cli_env
from tests.helpers import mqar
from tests.helpers import mqar_flags
from tests.helpers import tiny

# A checkpoint every step (mqar()'s 4 steps, evals at 2 and 4): the same compiled steps as mqar(), so the
# killed runs' subprocesses load them from the persistent cache instead of compiling another schedule.
EVERY_STEP = {"train.checkpoint_every": 1}


def strip(records):
  return [{k: v for k, v in r.items() if k not in ("tokens_per_sec", "wall_time")} for r in records]


def params_at(workdir, step):
  return jax.tree.leaves(jax.device_get(restored.restore(workdir, step=step).state))


def assert_same_run(workdir, reference, step):
  assert strip(metrics.read_metrics(workdir)) == strip(metrics.read_metrics(reference))
  for a, b in zip(params_at(workdir, step), params_at(reference, step)):
    np.testing.assert_array_equal(a, b)


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
  """mqar() 4 steps (checkpoints and evals at 2 and 4)."""
  workdir = str(tmp_path_factory.mktemp("straight"))
  train.train_and_evaluate(mqar(), workdir)
  return workdir


@pytest.fixture(scope="module")
def straight_every_step(tmp_path_factory):
  """mqar() 4 steps with a checkpoint every step."""
  workdir = str(tmp_path_factory.mktemp("straight_every_step"))
  train.train_and_evaluate(mqar(**EVERY_STEP), workdir)
  return workdir


def copy(src, tmp_path, name="run"):
  dst = str(tmp_path / name)
  shutil.copytree(src, dst)
  return dst


def start(module, *args, cwd=REPO):
  env = {**cli_env(), "JAX_DEFAULT_MATMUL_PRECISION": "highest"}  # as conftest.py, so runs match bitwise
  return subprocess.Popen([sys.executable, "-m", f"linear_seq.{module}", *args], cwd=cwd, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def every_step_args(workdir):
  return [*mqar_flags(**EVERY_STEP), f"--workdir={workdir}"]


def test_sigkill_at_a_random_step_then_resume_is_bitwise_the_same_run(straight_every_step, tmp_path):
  """SIGKILL once metrics.jsonl reaches a random step (so mid-training, mid-save or mid-eval; before the first
  save committed or after), rerun: the metrics and the final parameters equal the uninterrupted run's bit for bit.
  (experiments/faults/measure.py does 10 such kills on a 20-step run.)"""
  rng = random.Random()
  kill_at = rng.randint(1, 3)
  workdir = str(tmp_path / "killed")
  proc = start("main", *every_step_args(workdir))
  path = os.path.join(workdir, metrics.METRICS_FILE)
  while proc.poll() is None:
    steps = [r["step"] for r in metrics.read_metrics(workdir, quiet=True)] if os.path.exists(path) else []
    if steps and max(steps) >= kill_at:
      proc.send_signal(signal.SIGKILL)
      break
    time.sleep(0.01)
  proc.communicate()
  code, err = finish(start("main", *every_step_args(workdir)))
  assert code == 0, f"killed at step {kill_at}: {err[-3000:]}"
  assert_same_run(workdir, straight_every_step, 4)


def test_flipped_bit_in_latest_checkpoint_is_detected_and_the_previous_one_used(straight, tmp_path, caplog):
  workdir = copy(straight, tmp_path)
  files = sorted(glob.glob(os.path.join(workdir, "checkpoints", "4", "state", "**", "d", "*"), recursive=True))
  victim = random.Random(0).choice(files)
  data = bytearray(open(victim, "rb").read())
  data[len(data) // 3] ^= 0x01
  open(victim, "wb").write(bytes(data))
  with pytest.raises(checkpoint.CheckpointError, match="step 4 is damaged: .* does not match its sha256"):
    restored.evaluate(workdir)  # evaluate refuses it (unless given --step)
  with caplog.at_level("WARNING"):
    final = train.train_and_evaluate(mqar(), workdir)
  assert "step 4 is damaged" in caplog.text and "restored the older checkpoint of step 2" in caplog.text
  assert final["step"] == 4 and os.path.isdir(os.path.join(workdir, "checkpoints", "4.corrupt"))
  assert_same_run(workdir, straight, 4)


def test_all_checkpoints_damaged_is_one_line_per_step_and_nothing_trained(straight, tmp_path):
  workdir = copy(straight, tmp_path)
  for f in glob.glob(os.path.join(workdir, "checkpoints", "*", "state", "_METADATA")):
    open(f, "a").write(" ")
  before = open(os.path.join(workdir, metrics.METRICS_FILE)).read()
  with pytest.raises(checkpoint.CheckpointError) as e:
    train.train_and_evaluate(mqar(), workdir)
  lines = str(e.value).splitlines()
  assert lines[0].startswith("no readable checkpoint in") and "tried 2" in lines[0]
  assert "step 4 is damaged" in lines[1] and "step 2 is damaged" in lines[2] and "--restart" in lines[3]
  assert len(lines) == 4 and open(os.path.join(workdir, metrics.METRICS_FILE)).read() == before


def test_progress_without_checkpoints_is_refused_until_restart(straight, tmp_path):
  """checkpoints/ deleted, then emptied (one workdir, one restart for both: a refusal keeps the history)."""
  workdir = copy(straight, tmp_path)
  shutil.rmtree(os.path.join(workdir, "checkpoints"))
  before = open(os.path.join(workdir, metrics.METRICS_FILE)).read()
  for how, where in (("deleted", "is missing"), ("emptied", "holds no checkpoint")):
    if how == "emptied":
      shutil.rmtree(os.path.join(workdir, "checkpoints"), ignore_errors=True)
      os.mkdir(os.path.join(workdir, "checkpoints"))
    with pytest.raises(workdir_lib.WorkdirError, match=r"shows progress \(checkpointed.json \(step 4 was "
                       rf"checkpointed\)\) but checkpoints/ {where}: refusing .* --restart"):
      train.train_and_evaluate(mqar(), workdir)
    assert open(os.path.join(workdir, metrics.METRICS_FILE)).read() == before, how  # history kept
    with pytest.raises(checkpoint.CheckpointError, match="no readable checkpoint in .*shows progress"):
      restored.evaluate(workdir)
  final = train.train_and_evaluate(mqar(), workdir, restart=True)
  assert final["step"] == 4
  assert_same_run(workdir, straight, 4)


def test_kill_during_the_first_save_is_not_progress(tmp_path):
  """Killed while the first checkpoint was written (only orbax's tmp directory exists): nothing restorable was
  lost, so the rerun trains from step 0 without --restart."""
  workdir = tmp_path / "run"
  os.makedirs(workdir / "checkpoints" / "2.orbax-checkpoint-tmp-123")
  (workdir / metrics.METRICS_FILE).write_text('{"step": 1, "train_loss": 4.0}\n{"step": 2, "train_loss": 3.9}\n')
  assert workdir_lib.progress(str(workdir)) == []
  os.makedirs(workdir / "checkpoints" / "2.corrupt")
  assert workdir_lib.progress(str(workdir)) == ["checkpoint directories 2.corrupt"]


def test_second_writer_on_a_locked_workdir_fails_at_once(straight, tmp_path):
  workdir = copy(straight, tmp_path)
  before = open(os.path.join(workdir, metrics.METRICS_FILE)).read()
  with workdir_lib.lock(workdir):
    t0 = time.perf_counter()
    with pytest.raises(workdir_lib.WorkdirError, match=f"in use by another run \\(pid {os.getpid()} on "):
      train.train_and_evaluate(mqar(), workdir)
    assert time.perf_counter() - t0 < 5
  assert open(os.path.join(workdir, metrics.METRICS_FILE)).read() == before
  assert train.train_and_evaluate(mqar(), workdir)["step"] == 4  # released


def test_kill_before_the_final_evaluation_is_completed_by_the_rerun(straight, tmp_path, monkeypatch):
  """The final checkpoint is saved, then the process dies in the evaluation: the rerun evaluates step 4."""
  workdir = str(tmp_path / "run")
  real, calls = train.eval_lib.run_eval, []
  def dies_at_the_second_eval(*args, **kwargs):
    calls.append(1)
    if len(calls) == 2:
      raise KeyboardInterrupt  # as a kill: nothing after it runs
    return real(*args, **kwargs)
  monkeypatch.setattr(train.eval_lib, "run_eval", dies_at_the_second_eval)
  with pytest.raises(KeyboardInterrupt):
    train.train_and_evaluate(mqar(), workdir)
  assert sorted(os.listdir(os.path.join(workdir, "checkpoints"))) == ["2", "4"]
  assert [r["step"] for r in metrics.read_metrics(workdir) if "eval_loss" in r] == [2]
  final = train.train_and_evaluate(mqar(), workdir)
  assert final["eval_loss"] == metrics.read_metrics(straight)[-1]["eval_loss"]
  assert_same_run(workdir, straight, 4)


@pytest.mark.parametrize("field, value, message", [
    ("data.batch_size", 0, "data.batch_size must be > 0, got 0"),
    ("eval.batch_size", 0, "eval.batch_size must be > 0, got 0"),
    ("data.seq_len", 0, "data.seq_len must be > 0, got 0"),
    ("train.warmup_steps", -1, "train.warmup_steps must be >= 0, got -1"),
    ("train.b2", 1.0, r"train.b2 must be in \[0, 1\), got 1.0"),
])
def test_bad_values_are_refused(tmp_path, field, value, message):
  with pytest.raises(validation.ConfigError, match=message):
    train.train_and_evaluate(mqar(**{field: value}), str(tmp_path))
  assert not os.path.exists(tmp_path / "checkpoints")


def test_corpus_changed_since_the_start_is_refused_another_spelling_accepted(tmp_path, monkeypatch):
  corpus = tmp_path / "corpus"
  corpus.mkdir()
  (corpus / "a.txt").write_text(TEXT * 60)
  os.symlink(corpus, tmp_path / "link")
  workdir = str(tmp_path / "run")
  config = lambda path: tiny("default", **{"data.dataset": "local_text", "data.path": path,
                                           "data.data_dir": str(tmp_path / "tfds"), "train.num_steps": 2})
  train.train_and_evaluate(config(str(tmp_path / "link")), workdir)
  monkeypatch.chdir(tmp_path)
  assert train.train_and_evaluate(config("corpus"), workdir)["step"] == 2  # relative, no symlink: same folder
  with open(corpus / "a.txt", "a") as f:
    f.write("an edit\n")
  with pytest.raises(workdir_lib.WorkdirError, match=r"the corpus .*corpus changed since this run started"):
    train.train_and_evaluate(config("corpus"), workdir)


def test_binary_corpus_warns_empty_corpus_is_refused(tmp_path, caplog):
  junk = tmp_path / "junk"
  junk.mkdir()
  (junk / "a.txt").write_bytes(np.random.default_rng(0).integers(0, 256, 8192, dtype=np.uint8).tobytes())
  with caplog.at_level("WARNING"):
    local_text.check_folder(str(junk))
  assert "sampled bytes of" in caplog.text and "are not text" in caplog.text
  caplog.clear()
  prose = tmp_path / "prose"
  prose.mkdir()
  (prose / "a.txt").write_text("Ünïcödé prose, ok.\n" * 100)
  with caplog.at_level("WARNING"):
    local_text.check_folder(str(prose))
  assert "not text" not in caplog.text
  empty = tmp_path / "empty"
  empty.mkdir()
  (empty / "a.txt").touch()
  (empty / "b.txt").touch()
  with pytest.raises(ValueError, match="the 2 .txt file.s. under .* are all empty"):
    local_text.check_folder(str(empty))


def finish(proc, timeout=600):
  try:
    _, err = proc.communicate(timeout=timeout)
  except subprocess.TimeoutExpired:
    proc.kill()   # a run that did not stop does not outlive its test
    proc.communicate()
    raise
  return proc.returncode, err


def assert_one_line(code, err, message):
  errors = [line for line in err.splitlines() if line.startswith("error: ")]
  assert code == 1 and "Traceback" not in err and len(errors) == 1 and message in errors[0], err[-3000:]


def test_command_line_mistakes_are_one_line(straight, tmp_path):
  """Exit code 1, one `error:` line, no traceback; started together (each only imports and fails)."""
  (tmp_path / "file").write_text("")
  garbled = copy(straight, tmp_path, "garbled")
  with open(os.path.join(garbled, "config.json"), "w") as f:
    f.write("{not json")
  empty = tmp_path / "empty_corpus"
  empty.mkdir()
  (empty / "a.txt").touch()
  locked = copy(straight, tmp_path, "locked")
  base = ["--config=configs/mqar.py:tiny=True"]
  with workdir_lib.lock(locked):
    procs = {
        "no config file": (start("main", "--config=configs/nope.py", f"--workdir={tmp_path / 'a'}"),
                           "the config file 'configs/nope.py' does not exist"),
        "workdir is a file": (start("main", *base, f"--workdir={tmp_path / 'file'}"), "is a file, not a folder"),
        "bad config.json": (start("main", *base, f"--workdir={garbled}"), "config.json is not valid JSON"),
        "empty corpus": (start("main", "--config=configs/default.py:tiny=True", f"--workdir={tmp_path / 'b'}",
                               "--config.data.dataset=local_text", f"--config.data.path={empty}"),
                         "are all empty"),
        "bad step": (start("evaluate", f"--workdir={straight}", "--step=abc"), "flag --step=abc"),
        "locked": (start("main", *base, f"--workdir={locked}"), f"in use by another run (pid {os.getpid()} on"),
        "batch 0, verbose": (start("main", *base, f"--workdir={tmp_path / 'c'}", "--config.data.batch_size=0",
                                   "--verbose"), None),
    }
    results = {name: (finish(proc), message) for name, (proc, message) in procs.items()}
  for name, ((code, err), message) in results.items():
    if message is None:  # --verbose: the traceback, then the same line
      assert code == 1 and "Traceback" in err and "error: data.batch_size must be > 0" in err, err[-3000:]
    else:
      assert_one_line(code, err, message)


def test_partial_last_metrics_line_is_skipped(straight, tmp_path, caplog):
  workdir = copy(straight, tmp_path)
  with open(os.path.join(workdir, metrics.METRICS_FILE), "a") as f:
    f.write('{"step": 5, "train_lo')
  with caplog.at_level("WARNING"):
    assert restored.evaluate(workdir)["step"] == 4
  assert "skipped 1 unparsable line(s) (line 7" in caplog.text


def test_checkpoints_without_config_json_and_model_overrides_at_evaluation_are_refused(straight, tmp_path):
  """config.json deleted: training (even with a changed non-shape model field) and evaluation refuse the workdir;
  an evaluation override that changes the trained model is refused, eval.* is legal."""
  with pytest.raises(validation.ConfigError, match=r"--config.model.gate_temperature=2.0 differs from the trained "
                     r"model's 16.0 \(config.json\): that would evaluate another model"):
    restored.restore(straight, config_overrides={"model.gate_temperature": "2.0"})
  with pytest.raises(validation.ConfigError, match=r"model.mixer='linear' differs .* \(also model.num_layers\)"):
    restored.restore(straight, config_overrides={"model.num_layers": "3", "model.mixer": "linear"})
  assert restored.restore(straight, config_overrides={"eval.seq_len": "32", "model.chunk_size": "4"}).step == 4
  workdir = copy(straight, tmp_path)
  os.remove(os.path.join(workdir, "config.json"))
  before = open(os.path.join(workdir, metrics.METRICS_FILE)).read()
  with pytest.raises(validation.ConfigError, match=r"holds checkpoints but no config.json .*: restore it, or start "
                     "over with --restart"):
    train.train_and_evaluate(mqar(**{"model.gate_temperature": 4.0}), workdir)
  with pytest.raises(validation.ConfigError, match=r"holds checkpoints but no config.json .*: restore it"):
    restored.restore(workdir)
  assert open(os.path.join(workdir, metrics.METRICS_FILE)).read() == before
  assert not os.path.exists(os.path.join(workdir, "config.json"))


def test_corpus_fingerprint_is_by_content(tmp_path, caplog):
  """An edit that keeps the size and the mtime (rsync -a, cp -p) changes the fingerprint; touching does not.
  A corpus.json of the older size+mtime rule is recorded again (by content) instead of refusing the resume."""
  corpus = tmp_path / "corpus"
  corpus.mkdir()
  (corpus / "a.txt").write_text("To be, or not to be\n" * 50)
  before = local_text.fingerprint(str(corpus))
  st = os.stat(corpus / "a.txt")
  (corpus / "a.txt").write_text("To be, or NOT to be\n" * 50)
  os.utime(corpus / "a.txt", ns=(st.st_atime_ns, st.st_mtime_ns))
  assert os.stat(corpus / "a.txt").st_size == st.st_size and local_text.fingerprint(str(corpus)) != before
  edited = local_text.fingerprint(str(corpus))
  os.utime(corpus / "a.txt")
  assert local_text.fingerprint(str(corpus)) == edited
  workdir = tmp_path / "run"
  workdir.mkdir()
  (workdir / workdir_lib.CORPUS_FILE).write_text('{"fingerprint": "0123", "corpus": "x"}\n')  # the older rule
  with caplog.at_level("WARNING"):
    workdir_lib.check_corpus(str(workdir), edited, "x", resuming=True)
  assert "older size+mtime rule" in caplog.text
  workdir_lib.check_corpus(str(workdir), edited, "x", resuming=True)
  with pytest.raises(workdir_lib.WorkdirError, match="changed since this run started"):
    workdir_lib.check_corpus(str(workdir), before, "x", resuming=True)


def signal_at_step(monkeypatch, step, signum=signal.SIGTERM):
  """Sends `signum` to this process just before step `step` is dispatched (from inside the training loop)."""
  real, calls = train.validation.check_loss_positions, []
  def check(*args):
    calls.append(1)
    if len(calls) == step:
      os.kill(os.getpid(), signum)
    return real(*args)
  monkeypatch.setattr(train.validation, "check_loss_positions", check)


def no_stop_lines(workdir):
  return [r for r in metrics.read_metrics(workdir) if "stopped" not in r]


def test_sigterm_finishes_the_step_saves_and_the_rerun_is_the_same_run(straight, tmp_path, monkeypatch):
  workdir = str(tmp_path / "run")
  signal_at_step(monkeypatch, 3)
  with pytest.raises(train.Preempted, match=r"stopped by SIGTERM after step 3: its checkpoint is saved in "
                     r".*checkpoints/3; rerun the same command to resume"):
    train.train_and_evaluate(mqar(), workdir)
  assert sorted(os.listdir(os.path.join(workdir, "checkpoints"))) == ["2", "3"]
  assert metrics.read_metrics(workdir)[-1] == {"step": 3, "stopped": "SIGTERM"}
  assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handlers are restored
  monkeypatch.undo()
  assert train.train_and_evaluate(mqar(), workdir)["step"] == 4  # the lock was released
  assert strip(no_stop_lines(workdir)) == strip(metrics.read_metrics(straight))
  for a, b in zip(params_at(workdir, 4), params_at(straight, 4)):
    np.testing.assert_array_equal(a, b)


def test_a_second_signal_during_the_save_abandons_it_and_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
  workdir = str(tmp_path / "run")
  signal_at_step(monkeypatch, 3, signal.SIGINT)
  real_save = checkpoint.Checkpointer.save
  def save(self, step, *args):
    if step == 3:
      os.kill(os.getpid(), signal.SIGINT)  # the second signal arrives inside the preemption save
    return real_save(self, step, *args)
  monkeypatch.setattr(checkpoint.Checkpointer, "save", save)
  real_manifest = integrity.write_manifest
  def slow_manifest(path):  # step 2's background commit is still running when the signals come
    time.sleep(1.0)
    return real_manifest(path)
  monkeypatch.setattr(integrity, "write_manifest", slow_manifest)
  with pytest.raises(train.SaveAborted, match="SIGINT received again while saving the checkpoint"):
    train.train_and_evaluate(mqar(), workdir)
  assert sorted(os.listdir(os.path.join(workdir, "checkpoints"))) == ["2"]
  assert integrity.verify_manifest(os.path.join(workdir, "checkpoints", "2"))
  with workdir_lib.lock(workdir):  # released
    pass


# Long enough that only the signal (or the full disk) ends the run: a 100-step tiny run could finish before a
# loaded test process sent its signal (CI saw the SIGTERM run end normally at step 100).
LONG_RUN = {"train.num_steps": 100_000, "train.checkpoint_every": 50, "train.eval_every": 100}


def long_run_args(workdir):
  return ["--config=configs/mqar.py:tiny=True", f"--workdir={workdir}", "--config.train.log_every=1",
          *(f"--config.{k}={v}" for k, v in LONG_RUN.items())]


def wait_for_step(proc, workdir, step, timeout=300):
  t0 = time.time()
  while proc.poll() is None and time.time() - t0 < timeout:
    if any(r["step"] >= step for r in metrics.read_metrics(workdir, quiet=True)):
      return True
    time.sleep(0.02)
  return False


# The trainer with a full disk from the commit of step 8's checkpoint on (the fault measure.py measures too).
DISK_FULL_AT_STEP_8 = os.path.join(REPO, "experiments", "faults", "disk_full_at_step_8.py")


def test_real_signals_and_a_full_disk_stop_with_one_line(tmp_path):
  """Real subprocesses (started together): SIGTERM mid-run -> the step's checkpoint, a metrics line, the lock
  released, exit 1 with one line; SIGINT twice in a row -> no hang, no traceback, every checkpoint intact;
  ENOSPC at step 8's save (a checkpoint every 4) -> one line naming step 8, its path and the free space, as
  soon as its background commit fails (at the latest at the next save, which is not made); step 4 kept."""
  term, twice, full = str(tmp_path / "term"), str(tmp_path / "twice"), str(tmp_path / "full")
  env = {**cli_env(), "JAX_DEFAULT_MATMUL_PRECISION": "highest"}
  disk_full = subprocess.Popen([sys.executable, DISK_FULL_AT_STEP_8, *long_run_args(full),
                                "--config.train.checkpoint_every=4"], cwd=REPO, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
  procs = {term: start("main", *long_run_args(term)), twice: start("main", *long_run_args(twice))}
  for workdir, proc in procs.items():
    assert wait_for_step(proc, workdir, 3), proc.communicate()[1][-3000:]
  procs[term].send_signal(signal.SIGTERM)
  procs[twice].send_signal(signal.SIGINT)
  time.sleep(0.05)
  procs[twice].send_signal(signal.SIGINT)
  (code, err), (code2, err2) = (finish(procs[term], timeout=120), finish(procs[twice], timeout=120))
  last = metrics.read_metrics(term)[-1]
  assert last.get("stopped") == "SIGTERM" and 3 <= last["step"] < LONG_RUN["train.num_steps"], last
  assert_one_line(code, err, f"stopped by SIGTERM after step {last['step']}: its checkpoint is saved in")
  assert sorted(os.listdir(os.path.join(term, "checkpoints")), key=int)[-1] == str(last["step"])
  assert integrity.verify_manifest(os.path.join(term, "checkpoints", str(last["step"])))
  assert code2 == 1 and "Traceback" not in err2 and len([l for l in err2.splitlines() if l.startswith("error: ")]) == 1
  committed = [n for n in os.listdir(os.path.join(twice, "checkpoints")) if n.isdigit()]  # (not an abandoned tmp)
  for name in committed:
    assert integrity.verify_manifest(os.path.join(twice, "checkpoints", name)), name
  code, err = finish(disk_full, timeout=300)
  assert_one_line(code, err, f"saving the checkpoint of step 8 to {full}/checkpoints/8 failed: no space left on "
                  "device (")
  assert "free there); the previous checkpoint (step 4) is kept; training stopped" in err
  assert [n for n in os.listdir(os.path.join(full, "checkpoints")) if n.isdigit()] == ["4"]
  assert integrity.verify_manifest(os.path.join(full, "checkpoints", "4"))
  assert max(r["step"] for r in metrics.read_metrics(full)) <= 12  # stopped at the latest at the next save
  for workdir in (term, twice, full):
    with workdir_lib.lock(workdir):  # released
      pass
