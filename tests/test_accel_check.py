"""The prepared accelerator check in its CPU smoke mode: every section runs, survives a failing case and
writes its JSON and markdown (the real run is on a lent GPU: experiments/benchmark/)."""
import json

from linear_seq.studies import accel_check


def test_tiny_check_runs_every_section(tmp_path, monkeypatch):
  calls = {"n": 0}
  real = accel_check._timed   # pylint: disable=protected-access

  def flaky(fn, args, repeats):   # the second speed case fails: the check must record it and go on
    calls["n"] += 1
    if calls["n"] == 2:
      raise RuntimeError("injected failure")
    return real(fn, args, repeats)

  monkeypatch.setattr(accel_check, "_timed", flaky)
  out = str(tmp_path / "accel" / "tiny")
  accel_check.run_check(out, tiny=True, budget_s=600, repeats=1)
  with open(out + ".json") as f:
    data = json.load(f)
  sections = data["sections"]
  assert set(sections) >= {"exactness", "speed", "training"}
  for row in sections["exactness"]:
    assert row["status"] == "ok", row
    tol = 1e-5 if row["dtype"] == "float32" else 3e-2
    assert row["value_rel_rms"] < tol and row["grad_rel_rms_max"] < tol, row
  statuses = [r["status"] for r in sections["speed"]]
  assert statuses.count("error: RuntimeError: injected failure") == 1 and statuses.count("ok") == 3
  assert sections["training"][0]["status"] == "ok" and sections["training"][0]["tokens/s"] > 0
  md = open(out + ".md").read()
  assert "## exactness" in md and "## training" in md and data["meta"]["tiny"] is True


def test_an_exhausted_budget_skips_the_rest(tmp_path):
  out = str(tmp_path / "b")
  accel_check.run_check(out, tiny=True, budget_s=0, repeats=1)
  sections = json.load(open(out + ".json"))["sections"]
  assert all(r["status"] == "skipped: time budget spent" for rows in sections.values() for r in rows)
