"""common.py: markdown tables, mean ± std, compiled memory, timing, the environment record and a probe's main."""
import jax
import jax.numpy as jnp
import pytest

from linear_seq import checkpoint
from linear_seq.studies import common


def test_md_table_escapes_pipes():
  assert common.md_table(["a", "b"], [[1, "x|y"], ["", 2.5]]) == [
      "| a | b |", "|---|---|", "| 1 | x\\|y |", "|  | 2.5 |"]


def test_mean_std():
  assert common.mean_std([0.5, 0.7, 0.9]) == (pytest.approx(0.7), pytest.approx(0.2), 3)
  assert common.mean_std([2.0]) == (2.0, 0.0, 1)


def test_compiled_memory_counts_arguments_and_outputs():
  x = jnp.ones((256, 256), jnp.float32)
  compiled = jax.jit(lambda x: (x @ x).sum(0)).lower(x).compile()
  if compiled.memory_analysis() is None:
    pytest.skip("this backend reports no memory analysis")
  assert common.compiled_memory(compiled) >= x.nbytes + 256 * 4


def test_timed_returns_the_ready_output_and_times():
  out, wall, cpu = common.timed(lambda a, b: a + b, jnp.ones(3), 2.0)
  assert out.tolist() == [3.0, 3.0, 3.0] and wall > 0 and cpu >= 0


def test_environment_records_versions_and_xla_flags(monkeypatch):
  monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")
  env = common.environment({"XLA_FLAGS": "--points"})
  assert env["jax"] == jax.__version__ and env["XLA_FLAGS"] == "--xla_cpu_multi_thread_eigen=false"
  assert env["XLA_FLAGS (points)"] == "--points" and "points" in env
  assert set(common.LIBRARIES) <= set(env)
  assert common.versions(["no-such-library-here"]) == {"no-such-library-here": "not installed"}
  assert "points" not in common.environment()


def test_print_probe_prints_each_workdir_and_one_error_line_per_unreadable_one(capsys):
  def rows_of(workdir):
    if workdir == "bad":
      raise checkpoint.CheckpointError("bad: no checkpoint")
    if workdir == "wrong":
      raise ValueError("wrong: not this task")
    return [[workdir, "1"], [workdir, "2"]]

  common.print_probe(["run", "x"], rows_of, ["a", "b"])
  assert capsys.readouterr().out.splitlines() == ["| run | x |", "|---|---|", "| a | 1 |", "| a | 2 |", "| b | 1 |",
                                                  "| b | 2 |"]
  with pytest.raises(SystemExit) as e:
    common.print_probe(["run", "x"], rows_of, ["bad", "a", "wrong"])
  assert e.value.code == 1
  out = capsys.readouterr()
  assert out.out.splitlines()[2:] == ["| a | 1 |", "| a | 2 |"]
  assert out.err.splitlines() == ["error: bad: no checkpoint", "error: wrong: not this task"]
  with pytest.raises(SystemExit, match="^error: give one or more"):
    common.print_probe(["run"], rows_of, [])
