"""Multi-process training for real: 2 local processes × 2 fake CPU devices (jax.distributed, gloo collectives).

Launched through the trainer's CLI (`--coordinator_address=127.0.0.1:<free port> --num_processes=2
--process_id=i --distributed_timeout=...`), each process a fresh interpreter (not a fork) with XLA_FLAGS set
before jax is imported. Checked: data-parallel and data × seq runs give the losses of one process with 4
devices; the checkpoint both processes wrote restores in one process and continues with the same losses; the
two processes read disjoint parts of the data (a plug-in dataset, tests/recorded_dataset.py, records every
example index each process reads; the equal losses then show the two halves form the global batch); a process
killed mid-run makes the other exit with an
error within the timeout, and rerunning both resumes from the last checkpoint.

Cost (the suite's budget): one GLA layer and a constant learning rate after warmup (train.end_lr_fraction=1), so
a run's losses do not depend on train.num_steps: the 1-process reference trains 6 steps once and serves both
the 4-step comparisons and the restored continuation. The killed run is the data-parallel run itself (same
flags, so the same compiled programs, from the persistent cache when test 1 ran first), its process 1 stalled
by the plug-in ($HOLD_AFTER) after the examples of 2 steps, so the kill lands mid-run deterministically.
"""
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from linear_seq import config_lib
from linear_seq import metrics
from tests import helpers

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
CONFIG = "--config=" + os.path.join(ROOT, "configs", "default.py") + ":tiny=True"
COMMON = ["--config.train.log_every=1", "--config.eval.max_batches=1", "--config.eval.batch_size=8",
          "--config.model.num_layers=1", "--config.train.end_lr_fraction=1.0"]
TIMEOUT_S = 15  # jax.distributed initialization / heartbeat / shutdown
# Shakespeare through a plug-in that records which examples each process reads (into $RECORD_DIR).
RECORDED = ["--config.imports=" + os.path.join(ROOT, "tests", "recorded_dataset.py"),
            "--config.data.dataset=recorded_shakespeare", "--config.data.vocab_size=258"]


def _env(devices: int, record_dir: str = "", hold_after: str = "") -> dict:
  return {**helpers.fake_devices_env(devices), "RECORD_DIR": record_dir, "HOLD_AFTER": hold_after}


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _start(workdir: str, flags: list[str], record_dir: str = "", hold_after: str = "") -> list[subprocess.Popen]:
  """Both processes; with hold_after, process 1 stalls after that many train examples (recorded_dataset.py)."""
  port = _free_port()
  return [subprocess.Popen([sys.executable, "-m", "linear_seq.main", CONFIG, f"--workdir={workdir}", *COMMON, *flags,
                            f"--coordinator_address=127.0.0.1:{port}", "--num_processes=2", f"--process_id={i}",
                            f"--distributed_timeout={TIMEOUT_S}"],
                           env=_env(2, record_dir, hold_after if i == 1 else ""), cwd=ROOT,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
          for i in range(2)]


def _wait(procs, timeout: float = 300) -> list[tuple[int, str]]:
  out = []
  for p in procs:
    try:
      _, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
      for q in procs:
        q.kill()
      raise
    out.append((p.returncode, err))
  return out


def _one_process(workdir: str, flags: list[str]) -> None:
  proc = subprocess.run([sys.executable, "-m", "linear_seq.main", CONFIG, f"--workdir={workdir}", *COMMON, *flags],
                        env=_env(4), cwd=ROOT, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]


def _losses(workdir: str) -> list[float]:
  return [r["train_loss"] for r in metrics.read_metrics(workdir) if "train_loss" in r]


def test_two_processes_match_one_and_restore(tmp_path):
  ref = str(tmp_path / "ref")
  batch = config_lib.load_sibling(os.path.join(ROOT, "configs", "default.py"), "default").get_config(
      "tiny=True").data.batch_size
  _one_process(ref, RECORDED + ["--config.train.num_steps=6"])   # constant lr: its first 4 steps = a 4-step run
  assert len(_losses(ref)) == 6
  runs = {"dp": RECORDED, "dataxseq": RECORDED + ["--config.mesh.seq=2"]}
  for name, flags in runs.items():
    records = tmp_path / f"records_{name}"
    records.mkdir()
    procs = _start(str(tmp_path / name), flags, str(records))
    results = _wait(procs)
    for rc, err in results:
      assert rc == 0, err[-3000:]
    assert len(_losses(str(tmp_path / name))) == 4, name
    np.testing.assert_allclose(_losses(str(tmp_path / name)), _losses(ref)[:4], rtol=1e-5, err_msg=name)
    # Each process read its own examples: disjoint index sets, each at least its half of the 4 steps' rows.
    read = [set(np.loadtxt(records / f"train-{p.pid}.txt", dtype=int, ndmin=1).tolist()) for p in procs]
    assert not read[0] & read[1], (name, sorted(read[0] & read[1])[:10])
    assert min(map(len, read)) >= 4 * batch // 2, (name, [len(r) for r in read])
  # The 2-process checkpoint restores in one process (4 devices) and continues like the 1-process run does.
  _one_process(str(tmp_path / "dp"), RECORDED + ["--config.train.num_steps=6"])
  assert len(_losses(str(tmp_path / "dp"))) == 6
  np.testing.assert_allclose(_losses(str(tmp_path / "dp")), _losses(ref), rtol=1e-5)


def test_killed_process_stops_the_other_and_rerun_resumes(tmp_path):
  """The data-parallel run of test 1 (4 steps, checkpoints at 2 and 4), process 1 stalled after the examples of
  its first 2 steps (HOLD_AFTER: the 2 global batches' stream positions): once checkpoint 2 is written,
  process 1 is killed while process 0 waits in step 3's collectives."""
  workdir, records = str(tmp_path / "kill"), tmp_path / "records"
  records.mkdir()
  batch = config_lib.load_sibling(os.path.join(ROOT, "configs", "default.py"), "default").get_config(
      "tiny=True").data.batch_size
  procs = _start(workdir, RECORDED, str(records), hold_after=str(2 * batch))
  ckpt_dir = os.path.join(workdir, "checkpoints")
  deadline = time.time() + 240
  while time.time() < deadline and not _steps(ckpt_dir):
    assert all(p.poll() is None for p in procs), [p.communicate()[1][-2000:] for p in procs]
    time.sleep(1)
  assert _steps(ckpt_dir) == [2], _steps(ckpt_dir)
  time.sleep(1)
  assert all(p.poll() is None for p in procs), [p.communicate()[1][-2000:] for p in procs]   # stalled, not done
  procs[1].send_signal(signal.SIGKILL)
  t0 = time.time()
  try:
    _, err = procs[0].communicate(timeout=6 * TIMEOUT_S)
  except subprocess.TimeoutExpired:
    procs[0].kill()
    pytest.fail(f"process 0 still running {6 * TIMEOUT_S} s after process 1 was killed")
  procs[1].communicate()
  assert procs[0].returncode != 0
  print(f"process 0 exited {time.time() - t0:.1f} s after the kill: {err.strip().splitlines()[-1:]}")
  assert _steps(ckpt_dir) == [2]
  results = _wait(_start(workdir, RECORDED, str(records)))
  for rc, err in results:
    assert rc == 0, err[-3000:]
    assert "resumed from" in err and "at step 2" in err and "steps 3..4" in err, err[-3000:]   # not restarted
  assert sorted(_steps(ckpt_dir)) == [2, 4]
  assert [r["step"] for r in metrics.read_metrics(workdir) if "train_loss" in r] == [1, 2, 3, 4]


def _steps(ckpt_dir: str) -> list[int]:
  if not os.path.isdir(ckpt_dir):
    return []
  return [int(d) for d in os.listdir(ckpt_dir) if d.isdigit()]
