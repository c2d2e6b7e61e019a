"""Smoke test of the benchmark (tiny sizes, one repeat) and its ratio / argument logic."""
import json
import math
import os
import subprocess
import sys

from absl import flags
import pytest

from linear_seq.studies import bench

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY_SSM = ["--ssm_batch=2", "--ssm_channels=3", "--ssm_states=8", "--ssm_T=64"]


def parse(argv: list[str]) -> flags.FlagValues:
  """The benchmark's flags parsed from `argv` (into fresh FlagValues: no global flag state)."""
  flag_values = flags.FlagValues()
  bench.define_flags(flag_values)
  flag_values(["bench", *argv])
  return flag_values


def run(argv: list[str]) -> dict:
  return bench.run_flags(parse(argv))


def test_tiny_run_prints_table_and_ratios(tmp_path, capsys):
  out = tmp_path / "bench.json"
  forms = "softmax,recurrent,chunk,chunk_vector,delta_chunk,ssm_fft,ssm_scan"
  argv = ["--T=64", "--repeats=1", f"--forms={forms}", "--markdown", f"--json={out}"]
  res = run(argv + TINY_SSM)
  text = capsys.readouterr().out
  for word in ["fwd+bwd ms", "tokens/s", "causal", "chunk+vector gate", "| op | form |", "jax: "]:
    assert word in text
  saved = json.loads(out.read_text())
  assert saved["ratios"] == json.loads(json.dumps(res["ratios"]))
  assert [c["form"] for c in saved["cases"]] == forms.split(",")
  for c in saved["cases"]:
    assert c["skip"] is None, c
    assert len(c["fwd_s"]) == len(c["fwd_bwd_s"]) == 1 and c["fwd_bwd_s"][0] > 0
    assert c["fwd_bwd_bytes"] > 0
  assert len(saved["ratios"]) == sum(
      {t.slow, t.fast} <= set(forms.split(",")) for t in bench.TARGETS)
  for r in saved["ratios"]:
    assert math.isfinite(r["ratio"]) and r["ratio"] > 0, r
    assert r["status"] == "n/a (not the target size)"  # targets stated at the full sizes only
    assert f"{r['ratio']:.2f}×" in text and r["ratio_cpu"] > 0


def test_bfloat16_inputs_and_shape_flags(capsys):
  res = run(["--T=32", "--repeats=1", "--forms=chunk,delta_chunk", "--dtype=bfloat16", "--batch=2", "--heads=3",
             "--dk=8", "--dv=4"])
  assert "B=2 H=3 K=8 V=4 bfloat16" in capsys.readouterr().out
  assert res["args"]["dtype"] == "bfloat16"
  for c in res["cases"]:
    assert c["skip"] is None and c["fwd_bwd_s"][0] > 0, c


def test_quadratic_form_skipped_over_memory_cap(capsys):
  res = run(["--T=256", "--forms=parallel_vector", "--max_gib=0.01"])
  (case,) = res["cases"]
  assert case["skip"].startswith("skipped (O(T²K) memory: ~0.188 GiB > --max_gib=0.01")
  assert "parallel+vector gate" in capsys.readouterr().out


def _timed(form, T, fwd_bwd_s):
  case = bench.Case(form, "op", "mode", T, T)
  case.result = {"fwd_s": [fwd_bwd_s / 3], "fwd_bwd_s": [fwd_bwd_s, 2 * fwd_bwd_s],
                 "fwd_bwd_cpu_s": [4 * fwd_bwd_s]}
  return case


def test_ratios_pass_and_miss_at_target_sizes():
  cases = [_timed("softmax", 8192, 1.0), _timed("recurrent", 8192, 0.1),
           _timed("chunk", 8192, 0.02), _timed("chunk_vector", 8192, 0.06),
           _timed("chunk", 512, 0.01), _timed("chunk_vector", 512, 0.02),
           _timed("ssm_scan", 4096, 0.5), _timed("ssm_fft", 4096, 0.1)]
  ratios = bench.compute_ratios(cases, True)
  assert all(r["ratio_cpu"] == pytest.approx(r["ratio"]) == r["ratio_min"] for r in ratios)
  got = {(r["name"], r["T"]): (round(r["ratio"], 6), r["status"]) for r in ratios}
  assert got == {
      ("chunk speedup vs softmax_attention", 8192): (50.0, "PASS"),
      ("chunk speedup vs recurrent", 8192): (5.0, "MISS"),
      ("GLA (vector-gated) chunk / ungated chunk", 512): (2.0, "n/a (not the target size)"),  # README: T=8192
      ("GLA (vector-gated) chunk / ungated chunk", 8192): (3.0, "MISS"),
      ("ssm fft speedup vs scan (S4D shape)", 4096): (5.0, "PASS"),
  }
  (ssm,) = [r for r in bench.compute_ratios(cases, False) if r["T"] == 4096 and "ssm" in r["name"]]
  assert ssm["status"] == "n/a (not the target size)"


def test_memory_ratio_compares_compiled_bytes():
  delta, chunk = _timed("delta_chunk", 8192, 0.05), _timed("chunk", 8192, 0.02)
  delta.result["fwd_bwd_bytes"], chunk.result["fwd_bwd_bytes"] = 3 * 2 ** 20, 2 * 2 ** 20
  got = {r["name"]: (round(r["ratio"], 6), r["status"]) for r in bench.compute_ratios([delta, chunk], True)}
  assert got == {"delta chunk / ungated linear chunk": (2.5, "PASS"),
                 "delta chunk / linear chunk, compiled memory": (1.5, "PASS")}


def test_ratio_with_a_skipped_form_reports_why():
  why = "skipped (O(T²) memory: ~3 GiB > --max_gib=1)"
  skipped = bench.Case("softmax", "op", "mode", 8192, 8192, skip=why)
  ratios = bench.compute_ratios([skipped, _timed("chunk", 8192, 0.02)], True)
  (r,) = [r for r in ratios if "softmax" in r["name"]]
  assert r["ratio"] is None and r["status"] == why


@pytest.mark.parametrize("argv, message", [
    (["--forms=chunk,bogus"], "unknown form(s) bogus; valid: softmax, recurrent, parallel, chunk"),
    (["--T=64,x"], "expected comma-separated positive integers, got '64,x'"),
    (["--T=0"], "expected comma-separated positive integers, got '0'"),
    (["--repeats=0"], "--repeats must be ≥ 1"),
    (["--ssm_path=loop"], "value should be one of <channels|vmap>"),
])
def test_bad_flags_fail_with_message(argv, message):
  with pytest.raises(flags.IllegalFlagValueError) as e:
    parse(argv)
  assert message in str(e.value)


def test_json_folder_checked_before_the_run(tmp_path):
  with pytest.raises(flags.IllegalFlagValueError, match="--json: its folder does not exist"):
    parse([f"--json={tmp_path}/missing/bench.json"])
  assert parse([f"--json={tmp_path}/bench.json"]).json == f"{tmp_path}/bench.json"


def test_command_line_errors_are_one_line(tmp_path):
  """python -m linear_seq.studies.bench with a bad flag: `error: ...` on one line, exit 1, no traceback."""
  proc = subprocess.run([sys.executable, "-m", "linear_seq.studies.bench", "--forms=chunk,bogus"],
                        capture_output=True, text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": REPO})
  assert proc.returncode == 1 and proc.stderr.startswith("error: flag --forms="), proc.stderr
  assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_saved_args_are_the_flags():
  res = run(["--T=32", "--forms=chunk", "--repeats=1"])
  assert res["args"]["T"] == [32] and res["args"]["forms"] == ["chunk"] and res["args"]["ssm_path"] == "channels"
  assert set(res["args"]) == {"T", "forms", "repeats", "budget_s", "max_gib", "batch", "heads", "dk", "dv",
                              "dtype", "chunk_size", "ssm_batch", "ssm_channels", "ssm_states", "ssm_T", "ssm_path",
                              "json", "markdown"}
