"""The command lines: python -m linear_seq.main / linear_seq.evaluate (subprocesses, as a user runs them)."""
import json
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(__file__), "..")


def env():
  """The test suite's JAX settings (conftest.py) for the subprocesses, so they share its compilation cache."""
  return {**os.environ, "JAX_DEFAULT_MATMUL_PRECISION": "highest",
          "JAX_COMPILATION_CACHE_DIR": os.environ.get("JAX_CACHE_DIR", os.path.join(ROOT, ".jax_cache")),
          "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0.5"}


def start(module: str, *args: str) -> subprocess.Popen:
  return subprocess.Popen([sys.executable, "-m", f"linear_seq.{module}", *args], cwd=ROOT, env=env(),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen) -> tuple[int, str, str]:
  out, err = proc.communicate(timeout=600)
  return proc.returncode, out, err


def test_errors_reach_the_user(tmp_path):
  """A config typo (locked config), an unknown mixer and evaluate on an empty workdir: non-zero exit, a clear
  message, nothing trained. Started together: each only imports and fails."""
  typo = start("main", "--config=configs/mqar.py:tiny=True", f"--workdir={tmp_path / 'a'}",
               "--config.model.mixr=gla")
  mixer = start("main", "--config=configs/mqar.py:tiny=True", f"--workdir={tmp_path / 'b'}",
                "--config.model.mixer=mamba")
  empty = start("evaluate", f"--workdir={tmp_path / 'c'}")
  code, _, err = finish(typo)
  assert code == 1 and "error: unknown config field 'model.mixr'; did you mean 'model.mixer'?" in err, err[-2000:]
  assert "Traceback" not in err, err[-2000:]  # one line, not config_flags' traceback
  code, _, err = finish(mixer)
  assert code == 1 and "error: unknown mixer 'mamba'; valid: softmax, linear, retention, gla, s4" in err, err[-2000:]
  code, _, err = finish(empty)
  assert code == 1 and "error: no checkpoints in" in err and "nothing has been trained there yet" in err, err[-2000:]
  assert not os.path.exists(tmp_path / "b" / "checkpoints")


def test_train_then_evaluate_with_a_sample(tmp_path):
  workdir = str(tmp_path / "run")
  code, _, err = finish(start("main", "--config=configs/mqar.py:tiny=True", f"--workdir={workdir}",
                              "--config.train.num_steps=2"))
  assert code == 0, err[-3000:]
  assert json.load(open(os.path.join(workdir, "config.json")))["train"]["num_steps"] == 2
  code, out, err = finish(start("evaluate", f"--workdir={workdir}", "--generate=4", "--temperature=0", "--top_k=3",
                                "--top_p=0.9"))
  assert code == 0, err[-3000:]
  result = json.load(open(os.path.join(workdir, "eval.json")))
  assert result["step"] == 2 and 0 <= result["accuracy"] <= 1 and result["num_params"] > 0
  assert json.loads(out[:out.index("--- sample")]) == result
  assert "sample:" in out.split("--- sample", 1)[1] and "temperature 0.0, top_k 3, top_p 0.9" in out
