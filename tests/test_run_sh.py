"""scripts/run.sh hands one workdir to both the trainer and the evaluation, however it is given, and never
evaluates a run it did not train (a preset $PY, here a stub that records its arguments, skips the setup)."""
import os
import subprocess

import pytest

from tests.helpers import REPO


def run_sh(tmp_path, *args, workdir_env=None):
  stub, log = tmp_path / "python", tmp_path / "calls"
  stub.write_text('#!/usr/bin/env bash\necho "$*" >> "$STUB_LOG"\n')
  stub.chmod(0o755)
  env = {k: v for k, v in os.environ.items() if k != "WORKDIR"}
  env.update(PY=str(stub), STUB_LOG=str(log), **({"WORKDIR": workdir_env} if workdir_env else {}))
  proc = subprocess.run(["bash", os.path.join(REPO, "scripts", "run.sh"), *args], env=env, capture_output=True,
                        text=True, timeout=60)
  calls = log.read_text().splitlines() if log.exists() else []
  return proc, calls


def workdirs(calls):
  """{'main': workdir, 'evaluate': workdir} of the recorded calls."""
  out = {}
  for call in calls:
    words = call.split()
    if words[0] != "-m":  # (the default run's expected-value check: "$PY - WORKDIR/eval.json")
      continue
    out[words[1].split(".")[-1]] = next(w.split("=", 1)[1] for w in words if w.startswith("--workdir="))
  return out


@pytest.mark.parametrize("args, env, expected", [
    ((), None, "runs/default"),
    (("--config.model.mixer=retention",), None, "runs/default-model.mixer=retention"),  # README's example
    (("--config.model.mixer=retention", "--config.train.num_steps=100"), None,
     "runs/default-model.mixer=retention,train.num_steps=100"),
    (("--workdir=W1", "--config.model.mixer=retention"), None, "W1"),
    (("--workdir", "W2"), None, "W2"),
    (("--config.model.mixer=retention",), "W3", "W3"),
    (("--workdir=W4",), "W4", "W4"),
])
def test_one_workdir_for_both_steps(tmp_path, args, env, expected):
  proc, calls = run_sh(tmp_path, *args, workdir_env=env)
  assert proc.returncode == 0, proc.stderr
  assert workdirs(calls) == {"main": expected, "evaluate": expected}, calls
  assert f"run.sh: workdir {expected}" in proc.stderr
  main_args = calls[0].split()
  assert [a for a in main_args if a.startswith("--workdir")] == [f"--workdir={expected}"]
  assert [a for a in main_args if a.startswith("--config.")] == [a for a in args if a.startswith("--config.")]


@pytest.mark.parametrize("args, env, message", [
    (("--workdir=A",), "B", "error: --workdir=A and WORKDIR=B name different folders"),
    (("--workdir=",), None, "error: --workdir needs a folder"),
    (("--workdir",), None, "error: --workdir needs a folder"),
])
def test_conflicting_or_empty_workdir_is_one_line_and_runs_nothing(tmp_path, args, env, message):
  proc, calls = run_sh(tmp_path, *args, workdir_env=env)
  assert proc.returncode == 1 and proc.stderr.strip() == message.strip() or message in proc.stderr, proc.stderr
  assert proc.returncode == 1 and calls == []
