"""The environment the code sets for its processes on any host: XLA flags added to a user's (never replacing
them), accepted by a CPU process (an unknown XLA flag aborts it), single-threaded pinned sweep points on CPU
only, no GPU memory preallocation where processes share a device, the CPU backend forced for fake devices."""
import os
import subprocess
import sys

import pytest

from linear_seq import xla_env
from linear_seq.studies import sweep
from tests import helpers


def test_merge_keeps_the_users_flags_and_values():
  assert xla_env.merge_flags("", ["--a=1"]) == "--a=1"
  assert xla_env.merge_flags("--user=2 --a=0", ["--a=1", "--b=3"]) == "--user=2 --a=0 --b=3"
  env = {"XLA_FLAGS": "--xla_dump_to=/tmp/d"}
  xla_env.add_flags(xla_env.DETERMINISTIC_FLAGS, env)
  assert env["XLA_FLAGS"] == "--xla_dump_to=/tmp/d --xla_gpu_deterministic_ops=true"


def test_platform_hint_from_the_environment():
  assert xla_env.platform_hint({"JAX_PLATFORMS": "cpu"}) == "cpu"
  assert xla_env.platform_hint({"JAX_PLATFORMS": "cuda,cpu"}) == "gpu"
  assert xla_env.platform_hint({"JAX_PLATFORMS": "tpu"}) == "tpu"
  assert xla_env.platform_hint({}) in ("cpu", "gpu", "tpu")


def test_parallel_point_env_per_platform():
  base = {"XLA_FLAGS": "--xla_dump_to=/tmp/d", "PATH": "/bin"}
  cpu = xla_env.parallel_point_env(base, "cpu")
  assert cpu["XLA_FLAGS"] == "--xla_dump_to=/tmp/d --xla_cpu_multi_thread_eigen=false"
  assert cpu["OMP_NUM_THREADS"] == "1" and cpu["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false" and cpu["PATH"] == "/bin"
  gpu = xla_env.parallel_point_env(base, "gpu")
  assert gpu == {**base, "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
  assert base == {"XLA_FLAGS": "--xla_dump_to=/tmp/d", "PATH": "/bin"}   # not modified


@pytest.mark.parametrize("platform, pinned", [("cpu", True), ("cuda", False)])
def test_sweep_points_env_and_pinning(tmp_path, monkeypatch, platform, pinned):
  """The concrete env and CPU slot each point of a --parallel=2 sweep gets."""
  seen = []

  def fake_run(point, env, cpu):
    seen.append((env, cpu))
    return {"name": point.name, "status": "ok", "wall_time": 0.0}

  monkeypatch.setattr(sweep, "_run_point", fake_run)
  points = [sweep.Point({"seed": i}, f"seed={i}", str(tmp_path / f"p{i}"), 1, []) for i in range(2)]
  env = {"XLA_FLAGS": "--xla_dump_to=/tmp/d", "JAX_PLATFORMS": platform}
  sweep.run_points(points, parallel=2, env=env, log=lambda _: None)
  for point_env, cpu in seen:
    assert point_env["XLA_FLAGS"].startswith("--xla_dump_to=/tmp/d")
    assert point_env["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    assert ("--xla_cpu_multi_thread_eigen=false" in point_env["XLA_FLAGS"]) == pinned
    assert (cpu is not None) == pinned


def test_fake_devices_env_forces_the_cpu_backend(monkeypatch):
  monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/d --xla_force_host_platform_device_count=2")
  env = helpers.fake_devices_env(4)
  assert env["JAX_PLATFORMS"] == "cpu" and env["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
  assert env["XLA_FLAGS"].split() == ["--xla_dump_to=/tmp/d", "--xla_force_host_platform_device_count=4",
                                      helpers.FAST_COMPILE_XLA_FLAG]


def _start_cpu_backend(xla_flags: str) -> subprocess.CompletedProcess:
  env = {**os.environ, "XLA_FLAGS": xla_flags, "JAX_PLATFORMS": "cpu"}
  return subprocess.run([sys.executable, "-c", "import jax; print(jax.devices())"], env=env, capture_output=True,
                        text=True, timeout=120, check=False)


def test_a_cpu_process_accepts_every_flag_the_code_adds():
  flags = [*xla_env.DETERMINISTIC_FLAGS, *xla_env.SINGLE_THREAD_XLA_FLAGS, helpers.FAST_COMPILE_XLA_FLAG,
           "--xla_force_host_platform_device_count=4"]
  proc = _start_cpu_backend(" ".join(flags))
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert proc.stdout.count("CpuDevice") == 4
  bad = _start_cpu_backend("--xla_no_such_flag_here=true")   # what the check above would catch
  assert bad.returncode != 0 and "no_such_flag" in bad.stderr
