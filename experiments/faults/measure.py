"""Re-measures issue 14's fault figures (tries / detected / lost) on a tiny MQAR run, every try sequential.

  PYTHONPATH=$PWD python experiments/faults/measure.py --out=/tmp/faults [--tries=10]

Every run is `python -m linear_seq.main` as a user runs it (20 steps, a checkpoint every 4, evals at 10 and 20,
a metrics line every step). "bitwise" = metrics.jsonl (less timings) and the final parameters equal to one
uninterrupted reference run. Cases:
  flip      one random bit of one random array-data file of the latest checkpoint, then rerun the trainer:
            detected = the damage is reported (step and file named) and the run resumes from the previous
            checkpoint and ends bitwise equal to the reference.
  missing   checkpoints/ deleted after the run (metrics and config.json show 20 steps): refused = exit 1 with
            one line, metrics.jsonl unchanged; evaluate says "no readable checkpoint"; then --restart trains.
  lock      a second trainer started at a random step of a first one's run (the first is SIGSTOPped meanwhile, so
            it still holds the lock when the second gets past its imports; SIGCONT after): refused = exit 1 with
            one line naming the holder's PID; nothing lost = the first run ends bitwise equal to the reference.
  evalkill  SIGKILL inside the final evaluation (after the final checkpoint): the rerun writes that evaluation.
  sigkill   SIGKILL once metrics.jsonl reaches a random step, rerun: bitwise.
  savekill  SIGKILL while a checkpoint is being written (its orbax tmp directory exists), rerun: bitwise.
Issue 34's cases:
  sigterm   SIGTERM once metrics.jsonl reaches a random step: held = exit 1 with one line, a metrics line
            {step: N, stopped: SIGTERM}, checkpoint N committed with its manifest, the lock free; lost = steps
            the rerun trains again (0 when it resumes at N); the rerun is bitwise (the stop lines left out).
  sigint2   SIGINT twice 50 ms apart at a random step: held = exit 1 within 120 s, one line, no traceback, every
            committed checkpoint verifies; the rerun is bitwise.
  diskfull  ENOSPC injected into step 8's commit (a checkpoint every 4): held = one line naming step 8, its path
            and the free space, step 4 kept; lost = steps past 4 the run got to before it stopped.
  extra     a .DS_Store in the final checkpoint, then evaluate: held = evaluated (not called damaged).
"""
import argparse
import glob
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ARGS = ["--config=configs/mqar.py:tiny=True", "--config.train.num_steps=20", "--config.train.checkpoint_every=4",
        "--config.train.eval_every=10", "--config.train.log_every=1"]
# SIGKILL inside the final evaluation (a real kill at that point, injected through eval_lib.run_eval).
KILL_IN_FINAL_EVAL = """
import os, signal, sys
from absl import app
from linear_seq import eval_lib, main
real = eval_lib.run_eval
def run_eval(state, *args, **kwargs):
  if int(state["step"]) == 20:
    os.kill(os.getpid(), signal.SIGKILL)
  return real(state, *args, **kwargs)
eval_lib.run_eval = run_eval
app.run(main.main)
"""

# ENOSPC in the commit of step 8's checkpoint (the trainer run by that file, which the tests run too).
DISK_FULL_AT_STEP_8 = os.path.join(REPO, "experiments", "faults", "disk_full_at_step_8.py")


def env():
  e = dict(os.environ)
  e["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO, e.get("PYTHONPATH", "")]))
  e.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(REPO, ".jax_cache"))
  e.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.5")
  return e


def start(workdir, *extra, script=None, path=None):
  """The trainer's subprocess: `python -c script`, else `python path`, else `python -m linear_seq.main`."""
  cmd = ([sys.executable, "-c", script] if script else [sys.executable, path] if path else
         [sys.executable, "-m", "linear_seq.main"])
  return subprocess.Popen([*cmd, *ARGS, f"--workdir={workdir}", *extra], cwd=REPO, env=env(),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def run(workdir, *extra, script=None, path=None):
  proc = start(workdir, *extra, script=script, path=path)
  _, err = proc.communicate()
  return proc.returncode, err


def read_metrics(workdir):
  path = os.path.join(workdir, "metrics.jsonl")
  out = []
  if os.path.exists(path):
    for line in open(path):
      try:
        out.append(json.loads(line))
      except ValueError:
        pass
  return out


def strip(records):
  """Timings and preemption lines left out (a stop adds {step, stopped} to the run's history)."""
  return [{k: v for k, v in r.items() if k not in ("tokens_per_sec", "wall_time")} for r in records
          if "stopped" not in r]


def params(workdir):
  """The final checkpoint's arrays, read in a subprocess-free way through linear_seq.restored.restore."""
  import jax  # pylint: disable=g-import-not-at-top
  from linear_seq import restored  # pylint: disable=g-import-not-at-top
  return [jax.device_get(x) for x in jax.tree.leaves(restored.restore(workdir, step=20).state)]


def same_run(workdir, reference):
  import numpy as np  # pylint: disable=g-import-not-at-top
  if strip(read_metrics(workdir)) != strip(read_metrics(reference)):
    return False
  return all(np.array_equal(a, b) for a, b in zip(params(workdir), params(reference)))


def error_lines(err):
  return [l for l in err.splitlines() if l.startswith("error: ")]


def kill_when(proc, condition, poll=0.002):
  """SIGKILLs proc once condition() holds; False if the process ended first."""
  while proc.poll() is None:
    if condition():
      proc.send_signal(signal.SIGKILL)
      proc.communicate()
      return True
    time.sleep(poll)
  proc.communicate()
  return False


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--out", required=True)
  parser.add_argument("--tries", type=int, default=10)
  parser.add_argument("--cases", default="flip,missing,lock,evalkill,sigkill,savekill")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--lock_tries", type=int, default=5)
  parser.add_argument("--save_index", type=int, default=-1, help="savekill: which save to hit (-1: random 0-4)")
  parser.add_argument("--reference", default="", help="reuse this finished reference run (same ARGS)")
  a = parser.parse_args()
  rng = random.Random(a.seed)
  shutil.rmtree(a.out, ignore_errors=True)
  os.makedirs(a.out)
  results = {}
  t0 = time.time()
  ref = a.reference or os.path.join(a.out, "reference")
  if not a.reference:
    code, err = run(ref)
    assert code == 0, err[-3000:]
  print(f"reference: {time.time() - t0:.0f}s", flush=True)

  def note(case, i, **what):
    print(f"  {case} try {i}: {what}  ({time.time() - t0:.0f}s)", flush=True)

  def report(case, **counts):
    results[case] = counts
    print(f"{case}: {counts}  ({time.time() - t0:.0f}s)", flush=True)

  cases = a.cases.split(",")
  if "flip" in cases:
    detected = lost = 0
    for i in range(a.tries):
      w = os.path.join(a.out, f"flip{i}")
      shutil.copytree(ref, w)
      files = sorted(glob.glob(os.path.join(w, "checkpoints", "20", "state", "**", "d", "*"), recursive=True))
      sizes = [os.path.getsize(f) for f in files]
      victim = rng.choices(files, weights=sizes)[0]
      data = bytearray(open(victim, "rb").read())
      offset = rng.randrange(len(data) * 8)
      data[offset // 8] ^= 1 << (offset % 8)
      open(victim, "wb").write(bytes(data))
      code, err = run(w)
      named = f"step 20 is damaged: {victim}" in err
      same = code == 0 and same_run(w, ref)
      detected += named and "restored the older checkpoint of step 16" in err
      lost += not same
      note("flip", i, file=os.path.relpath(victim, w), bit=offset, named=named, same=same)
    report("flip", tries=a.tries, detected=detected, lost=lost)

  if "missing" in cases:
    w = os.path.join(a.out, "missing")
    shutil.copytree(ref, w)
    shutil.rmtree(os.path.join(w, "checkpoints"))
    os.remove(os.path.join(w, "checkpointed.json"))  # only metrics.jsonl and config.json show the progress
    before = open(os.path.join(w, "metrics.jsonl")).read()
    code, err = run(w)
    refused = code == 1 and len(error_lines(err)) == 1 and "shows progress" in err and "Traceback" not in err
    kept = open(os.path.join(w, "metrics.jsonl")).read() == before
    ev = subprocess.run([sys.executable, "-m", "linear_seq.evaluate", f"--workdir={w}"], cwd=REPO, env=env(),
                        capture_output=True, text=True)
    ev_ok = ev.returncode == 1 and "no readable checkpoint" in ev.stderr
    code2, _ = run(w, "--restart")
    report("missing", tries=1, refused=int(refused), metrics_kept=int(kept), evaluate_says_no_readable=int(ev_ok),
           restart_trains_bitwise=int(code2 == 0 and same_run(w, ref)), message=error_lines(err)[:1])

  if "lock" in cases:
    refused = lost = 0
    seconds = []
    for i in range(a.lock_tries):
      w = os.path.join(a.out, f"lock{i}")
      first = start(w)
      at = rng.randint(1, 19)
      while first.poll() is None and not any(r["step"] >= at for r in read_metrics(w)):
        time.sleep(0.01)
      first.send_signal(signal.SIGSTOP)  # the holder stays mid-run (lock held) while the second one starts
      tic = time.time()
      code, err = run(w)
      seconds.append(time.time() - tic)
      first.send_signal(signal.SIGCONT)
      first.communicate()
      refused += code == 1 and len(error_lines(err)) == 1 and f"(pid {first.pid} on" in err
      lost += not (first.returncode == 0 and same_run(w, ref))
      note("lock", i, second_started_at_step=at, second_rc=code, seconds=round(seconds[-1], 1),
           message=error_lines(err)[:1])
    report("lock", tries=a.lock_tries, refused=refused, lost=lost, max_seconds_to_refuse=round(max(seconds), 1))

  if "evalkill" in cases:
    completed = 0
    for i in range(2):
      w = os.path.join(a.out, f"evalkill{i}")
      code, _ = run(w, script=KILL_IN_FINAL_EVAL)
      killed = code == -signal.SIGKILL and not any(r["step"] == 20 and "eval_loss" in r for r in read_metrics(w))
      code, err = run(w)
      completed += killed and code == 0 and same_run(w, ref)
      note("evalkill", i, killed_before_eval=killed, rerun_rc=code)
    report("evalkill", tries=2, completed=completed)

  for case in ("sigkill", "savekill"):
    if case not in cases:
      continue
    bitwise = missed = 0
    where = []
    for i in range(a.tries):
      w = os.path.join(a.out, f"{case}{i}")
      for attempt in range(5):  # savekill: retried when the run finished before a save was caught
        shutil.rmtree(w, ignore_errors=True)
        proc = start(w)
        if case == "sigkill":
          at = rng.randint(1, 19)
          cond = lambda: any(r["step"] >= at for r in read_metrics(w))
        else:
          skip = rng.randint(0, 4) if a.save_index < 0 else a.save_index  # which save to hit
          seen = set()
          def cond():
            tmp = glob.glob(os.path.join(w, "checkpoints", "*orbax-checkpoint-tmp*"))
            seen.update(tmp)
            return bool(tmp) and len(seen) > skip
        if kill_when(proc, cond):
          break
        missed += 1
      steps = [r["step"] for r in read_metrics(w)]
      where.append(max(steps) if steps else 0)
      code, err = run(w)
      same = code == 0 and same_run(w, ref)
      bitwise += same
      note(case, i, killed_after_metrics_step=where[-1], bitwise=same)
    report(case, tries=a.tries, bitwise=bitwise, killed_after_metrics_step=where, missed_attempts=missed)

  def lock_free(w):
    import fcntl  # pylint: disable=g-import-not-at-top
    with open(os.path.join(w, ".lock"), "a") as f:
      try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
      except OSError:
        return False

  def committed_verify(w):
    sys.path.insert(0, REPO)
    from linear_seq import integrity  # pylint: disable=g-import-not-at-top
    names = [n for n in os.listdir(os.path.join(w, "checkpoints")) if n.isdigit()]
    return all(integrity.verify_manifest(os.path.join(w, "checkpoints", n)) for n in names)

  for case in ("sigterm", "sigint2"):
    if case not in cases:
      continue
    held = lost = bitwise = 0
    for i in range(a.tries):
      w = os.path.join(a.out, f"{case}{i}")
      proc = start(w)
      at = rng.randint(1, 17)  # (a signal after the last step's check ends the run normally)
      while proc.poll() is None and not any(r["step"] >= at for r in read_metrics(w)):
        time.sleep(0.002)
      sig = signal.SIGTERM if case == "sigterm" else signal.SIGINT
      proc.send_signal(sig)
      if case == "sigint2":
        time.sleep(0.05)
        proc.send_signal(sig)
      try:
        _, err = proc.communicate(timeout=120)
        hung = False
      except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        hung = True
      records = read_metrics(w)
      stop = [r["step"] for r in records if r.get("stopped")]
      ok = (not hung and proc.returncode == 1 and len(error_lines(err)) == 1 and "Traceback" not in err
            and lock_free(w) and committed_verify(w))
      if case == "sigterm":
        ok = ok and bool(stop) and os.path.isdir(os.path.join(w, "checkpoints", str(stop[-1])))
      steps = [int(n) for n in os.listdir(os.path.join(w, "checkpoints")) if n.isdigit()]
      reached = max([r["step"] for r in records] or [0])
      resumed_at = max(steps or [0])
      code, _ = run(w)
      same = code == 0 and same_run(w, ref)
      held += ok
      lost += reached - resumed_at
      bitwise += same
      note(case, i, signal_at_metrics_step=at, stopped_at=stop, rc=proc.returncode, hung=hung, held=ok,
           message=error_lines(err)[:1], resumed_at=resumed_at, bitwise=same)
    report(case, tries=a.tries, held=held, steps_lost=lost, bitwise=bitwise)

  if "diskfull" in cases:
    w = os.path.join(a.out, "diskfull")
    code, err = run(w, path=DISK_FULL_AT_STEP_8)
    lines = error_lines(err)
    named = len(lines) == 1 and "step 8 to" in lines[0] and "no space left on device (" in lines[0]
    kept = sorted(int(n) for n in os.listdir(os.path.join(w, "checkpoints")) if n.isdigit())
    reached = max(r["step"] for r in read_metrics(w))
    report("diskfull", tries=1, held=int(code == 1 and named and kept == [4] and "Traceback" not in err),
           steps_lost=reached - 4, stopped_after_metrics_step=reached, message=lines[:1])

  if "extra" in cases:
    w = os.path.join(a.out, "extra")
    shutil.copytree(ref, w)
    open(os.path.join(w, "checkpoints", "20", ".DS_Store"), "w").write("junk")
    ev = subprocess.run([sys.executable, "-m", "linear_seq.evaluate", f"--workdir={w}", "--overwrite"], cwd=REPO,
                        env=env(), capture_output=True, text=True)
    report("extra", tries=1, held=int(ev.returncode == 0 and "damaged" not in ev.stderr
                                      and '"step": 20' in ev.stdout))

  with open(os.path.join(a.out, "results.json"), "w") as f:
    json.dump(results, f, indent=1)
  print(json.dumps(results, indent=1))


if __name__ == "__main__":
  main()
