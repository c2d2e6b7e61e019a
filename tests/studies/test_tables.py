"""linear_seq.studies.tables: the shared formatting of a study's tables, the separation verdict and Welch's test
beside it, the pilot table from a rule, the CSV, and the CLI on a study's table script."""
import math
import os
import subprocess
import sys

import pytest
from scipy import stats

from linear_seq.studies import archive
from linear_seq.studies import protocol
from linear_seq.studies import sweep
from linear_seq.studies import tables
from tests.helpers import REPO

ARMS = {"a": {"model.mixer": "softmax"}, "b": {"model.mixer": "gla"}}


def test_numbers_means_and_seeds():
  assert tables.fmt(None) == tables.fmt(math.nan) == "…" and tables.fmt(0.91234) == "0.912"
  assert tables.mean_std([]) == "…" and tables.mean_std([1.0], one=" (1 seed)") == "1.000 (1 seed)"
  assert tables.mean_std([1.0, 2.0]) == "1.500 ± 0.707"          # the sample std (n - 1)
  assert tables.mean_std([1.0, 2.0], digits=1, std=False) == "1.5"
  assert tables.per_seed([0.5, 0.25], planned=3) == "0.500 / 0.250 / …"


def test_separated_means_every_seed_of_one_beyond_every_seed_of_the_other():
  assert tables.separated([1.0, 1.1], [1.2, 1.3]) and tables.separated([1.2, 1.3], [1.0, 1.1])
  assert not tables.separated([1.0, 1.25], [1.2, 1.3])               # overlapping seeds
  assert not tables.separated([1.0], [2.0, 2.1])                      # under 2 seeds on a side
  assert [tables.verdict(*ab) for ab in (([1, 2], [3, 4]), ([1, 3], [2, 4]), ([1], [3, 4]))] == [
      "yes", "no", "under 2 seeds"]


def test_first_step_from_the_curve_or_the_carried_value():
  row = {"_metrics": [{"step": 250, "eval_accuracy": 0.5}, {"step": 500, "eval_accuracy": 0.95}]}
  assert tables.first_step(row, 0.9) == 500 and tables.first_step(row, 0.99) is None
  assert tables.first_step({"_metrics": [], "first_step_0.9": 750}, 0.9) == 750


def test_pilot_table_from_the_rule(tmp_path):
  rule = protocol.LrRule((1e-3, 3e-3), metric="accuracy", direction="max", edge="up")
  tuning = protocol.Tuning(rule, lambda arm, cell, lr: protocol.point(ARMS, arm, {}, lr, 0))
  row = lambda arm, lr, acc, status="ok": {"_overrides": dict(protocol.point(ARMS, arm, {}, lr, 0)), "status": status,
                                           "accuracy": acc}
  rows = [row("a", 1e-3, 0.9), row("a", 3e-3, 0.5), row("b", 1e-3, 0.2), row("b", 3e-3, 0.8),
          row("b", 1e-2, None, "no eval.json")]
  text = tables.pilot_table(tuning, rows, [("a", None), ("b", None)], lambda r: f"{r['accuracy']:.2f}")
  assert text.splitlines() == ["| arm | lr 0.001 | lr 0.003 | lr 0.01 | chosen |", "|---|---|---|---|---|",
                               "| a | 0.90 | 0.50 |  | 0.001 |", "| b | 0.20 | 0.80 |  | … |"]
  provisional = tables.pilot_table(tuning, rows, [("b", None)], str, provisional=True)
  assert provisional.splitlines()[-1].endswith("| 0.003 † |")
  path = tables.write_csv(tables.csv_beside(str(tmp_path / "study.md")), ["x", "y"], [[1, None]])
  assert path.endswith("study.csv") and open(path, newline="").read() == "x,y\r\n1,\r\n"


def test_the_cli_runs_a_studys_table_script(tmp_path):
  script = tmp_path / "table.py"
  script.write_text("ARCHIVE = 'unused'\ndef write(workdir, archive_dir, out):\n"
                    "  open(out, 'w').write(f'{workdir} {archive_dir}')\n")
  out = tmp_path / "study.md"
  cmd = [sys.executable, "-m", "linear_seq.studies.tables", f"--table={script}", "--workdir=W", "--archive=",
         f"--out={out}"]
  subprocess.run(cmd, check=True, cwd=REPO, env={**os.environ, "PYTHONPATH": REPO})
  assert out.read_text() == "W "
  bad = subprocess.run(cmd[:3] + ["--table=/nonexistent.py", "--workdir=W"], capture_output=True, text=True, cwd=REPO,
                       env={**os.environ, "PYTHONPATH": REPO})
  assert bad.returncode == 1 and bad.stderr.strip().startswith("error:")


def test_a_table_script_run_as_a_program_exits_0(tmp_path):
  """run_script: the flags (with --arg when asked) reach write(); its returned text is not an exit status."""
  script = tmp_path / "table.py"
  script.write_text("from linear_seq.studies import tables\n"
                    "def write(workdir, archive_dir, out, arg):\n"
                    "  open(out, 'w').write(f'{workdir} {archive_dir} {arg}')\n  return 'the markdown'\n"
                    "if __name__ == '__main__':\n  tables.run_script(write, 'W', 'A', arg='x=1')\n")
  out = tmp_path / "study.md"
  done = subprocess.run([sys.executable, str(script), f"--out={out}", "--arg=seeds=2"], cwd=REPO, text=True,
                        capture_output=True, env={**os.environ, "PYTHONPATH": REPO})
  assert done.returncode == 0 and "the markdown" not in done.stderr, done.stderr
  assert out.read_text() == "W A seeds=2"


def test_welch_one_sided_against_the_closed_form_and_scipy():
  """a = 3, 4, 5 against b = 1, 2, 3: s² = 1 on each side, so t = 2 / sqrt(2/3) = sqrt(6) and df = 4 exactly;
  Student's t with 4 degrees of freedom has the CDF 1/2 + (3/8) u (1 − t² / (12 (1 + t²/4))), u = t / sqrt(1 +
  t²/4), so p = 0.0352..."""
  a, b = [3.0, 4.0, 5.0], [1.0, 2.0, 3.0]
  t, df, p = tables.welch(a, b, "max")
  u = t / math.sqrt(1 + t * t / 4)
  assert math.isclose(t, math.sqrt(6), rel_tol=1e-12) and math.isclose(df, 4.0, rel_tol=1e-12)
  assert math.isclose(p, 0.5 - 0.375 * u * (1 - t * t / (12 * (1 + t * t / 4))), rel_tol=1e-10)
  assert math.isclose(p, 0.035242, abs_tol=5e-7)
  t_min, _, p_min = tables.welch(a, b, "min")             # lower is better: A is the worse arm
  assert t_min == -t and math.isclose(p_min, 1 - p, rel_tol=1e-12)
  # unequal sizes and spreads, against scipy's own Welch test
  a, b = [0.9, 0.95, 0.97], [0.5, 0.7]
  want = stats.ttest_ind(a, b, equal_var=False, alternative="greater")
  t, df, p = tables.welch(a, b, "max")
  assert math.isclose(t, want.statistic, rel_tol=1e-12) and math.isclose(df, want.df, rel_tol=1e-12)
  assert math.isclose(p, want.pvalue, rel_tol=1e-10)
  want = stats.ttest_ind(a, b, equal_var=False, alternative="less")
  assert math.isclose(tables.welch(a, b, "min")[2], want.pvalue, rel_tol=1e-10)


def test_welch_where_the_seeds_do_not_allow_it():
  assert tables.welch([1.0], [2.0, 3.0]) is None and tables.welch([1.0, 1.0], [2.0, 2.0]) is None
  assert tables.welch_text([1.0], [2.0, 3.0]) == "no test (under 2 seeds)"
  assert tables.welch_text([1.0, 1.0], [2.0, 2.0], "min") == "no test (no spread)"
  assert tables.welch_text([3.0, 4.0, 5.0], [1.0, 2.0, 3.0]) == "p = 0.035 (Welch, one-sided, n = 3, 3)"
  assert tables.verdict([3.0, 4.0, 5.0], [1.0, 2.0, 3.0], "max") == "no; p = 0.035 (Welch, one-sided, n = 3, 3)"
  # t = 1 / sqrt(0.005) = 14.14, df = 2: p = 1/2 − t / (2 sqrt(2 + t²)) = 0.0025
  assert tables.verdict([1.0, 1.1], [2.0, 2.1], "min") == "yes; p = 0.002 (Welch, one-sided, n = 2, 2)"
  assert tables.verdict([1.0], [2.0, 2.1], "min") == "under 2 seeds"       # no test to add
  with pytest.raises(ValueError, match="direction must be one of max, min"):
    tables.welch([1.0, 2.0], [1.0, 2.0], "up")


def test_the_cli_restores_several_points_folders_and_passes_plots_dir(tmp_path):
  """A study with several sweep directories (ARCHIVE = {sub-directory: points folder}, as hybrids'): each folder
  that exists is restored under --workdir; --plots_dir reaches a write() that takes it, and is refused by one
  that does not."""
  sub = tmp_path / "runs_a" / "p"
  sub.mkdir(parents=True)
  (sub / "eval.json").write_text('{"accuracy": 0.5, "step": 1}')
  archive.save(str(tmp_path / "points_a"), str(sub), "p", {"seed": 0})
  script = tmp_path / "study.py"
  script.write_text(f"ARCHIVE = {{'a': {str(tmp_path / 'points_a')!r}, 'b': {str(tmp_path / 'none')!r}}}\n"
                    "import os\ndef write(workdir, archive_dir, out, plots_dir=''):\n"
                    "  found = os.path.isfile(os.path.join(workdir, 'a', 'p', 'eval.json'))\n"
                    "  open(out, 'w').write(f\"{' '.join(sorted(os.listdir(workdir)))} {plots_dir} {found}\")\n")
  out, work = tmp_path / "study.md", tmp_path / "work"
  cmd = [sys.executable, "-m", "linear_seq.studies.tables", f"--table={script}", f"--workdir={work}", f"--out={out}",
         "--plots_dir=PLOTS"]
  env = {**os.environ, "PYTHONPATH": REPO}
  subprocess.run(cmd, check=True, cwd=REPO, env=env)
  assert out.read_text() == "a PLOTS True"   # 'b' has no points folder: nothing made for it
  script.write_text("def write(workdir, archive_dir, out):\n  pass\n")
  bad = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=env)
  assert bad.returncode == 1 and "takes no plots_dir" in bad.stderr


def _tuned_rows():
  """Two arms' seeds at width 64, their rates tuned by seed 0 on a two-rate grid: a at 1e-3, b at 3e-3."""
  tuning = protocol.Tuning(protocol.LrRule((1e-3, 3e-3)), lambda arm, w, lr: protocol.point(ARMS, arm, {"w": w}, lr, 0))
  make = lambda arm, w, lr, seed: protocol.point(ARMS, arm, {"w": w}, lr, seed)
  acc = {("a", 1e-3, 0): 0.9, ("a", 3e-3, 0): 0.5, ("a", 1e-3, 1): 0.8, ("a", 3e-3, 1): 0.99,
         ("b", 1e-3, 0): 0.2, ("b", 3e-3, 0): 0.3, ("b", 3e-3, 1): 0.1, ("b", 3e-3, 2): 0.25}
  rows = [{"_overrides": dict(make(a, 64, lr, s)), "status": "ok", "accuracy": v, "name": f"{a}{lr}{s}"}
          for (a, lr, s), v in acc.items()]
  return tuning, make, rows


def test_cells_and_their_columns():
  tuning, make, rows = _tuned_rows()
  cells = tables.cells(tuning, rows, [("a", 64), ("b", 64), ("b", 32)], "accuracy", make)
  assert [(c.arm, c.key, c.lr, [r["accuracy"] for r in c.rows]) for c in cells] == [
      ("a", 64, 1e-3, [0.9, 0.8]), ("b", 64, 3e-3, [0.3, 0.1, 0.25])]      # (b, 32): no pilot, no rate
  per_arm = tables.cells(tuning, rows, [("a", 32), ("a", 64)], "accuracy", make, rate_key=lambda w: 64)
  assert [(c.key, len(c.rows)) for c in per_arm] == [(32, 0), (64, 2)]    # the rate chosen at 64 serves 32
  spec = [("arm", lambda c: c.arm), *tables.seed_columns(lambda c: tables.values(c.rows, "accuracy"), 3, "accuracy",
                                                         threshold=0.5, one=" (1 seed)")]
  assert tables.columns(cells, spec).splitlines() == [
      "| arm | accuracy per seed | mean ± std | seeds ≥ 0.5 |", "|---|---|---|---|",
      "| a | 0.900 / 0.800 / … | 0.850 ± 0.071 | 2/2 |", "| b | 0.300 / 0.100 / 0.250 | 0.217 ± 0.104 | 0/3 |"]
  assert tables.unique_ok(rows + rows[:1] + [{"name": "x", "status": "failed"}]) == rows


def test_seed_columns_with_the_first_step_each_seed_reached_the_threshold():
  reached = {"_metrics": [{"step": 250, "eval_accuracy": 0.5}, {"step": 500, "eval_accuracy": 0.95}], "accuracy": 0.95}
  never = {"_metrics": [{"step": 250, "eval_accuracy": 0.2}], "accuracy": 0.2}
  cell = tables.Cell("gla", 64, 1e-3, [reached, never])
  spec = tables.seed_columns(lambda c: tables.values(c.rows, "accuracy"), 2, "accuracy", 0.9, steps=lambda c: c.rows)
  assert tables.columns([cell], spec).splitlines()[2] == "| 0.950 / 0.200 | 0.575 ± 0.530 | 1/2 | 500 / — |"


def test_rate_and_seed_check_tables():
  arms = {"gla": {"model.mixer": "gla"}}
  point = lambda arm, width, lr, seed: protocol.point(arms, arm, {"model.d_model": width}, lr, seed)
  row = lambda w, lr, s, acc, **more: {"_overrides": {**point("gla", w, lr, s), **more}, "status": "ok",
                                       "accuracy": acc}
  rule = protocol.LrRule((1e-3, 3e-3), edge="up")
  cell = lambda r: tables.MISSING if r is None else tables.fmt(r["accuracy"])
  rows = [row(32, 1e-3, 0, 0.2), row(64, 1e-3, 0, 0.95), row(32, 3e-3, 0, 0.7)]
  rates = tables.rate_check_table(protocol.RateCheck(rule, point, 32, 64), rows, {"gla": 1e-3}, cell, "chosen")
  assert rates.splitlines() == ["| arm | chosen | lr 0.001 | lr 0.003 | lr 0.01 |", "|---|---|---|---|---|",
                                "| gla | 0.001 | 0.200 | 0.700 | … |"]
  check = protocol.SeedCheck(rule, point, {"train.num_steps": 3000})
  rows = [row(64, 1e-3, 0, 0.95), row(64, 1e-3, 1, 0.1), row(64, 1e-3, 2, 0.92), row(64, 1e-2, 1, 0.3),
          row(64, 1e-3, 1, 0.97, **{"train.num_steps": 3000})]
  seeds = tables.seed_check_table(check, rows, [("gla", 64, 1e-3)], (0, 1, 2), cell, longer_header="3,000 steps")
  assert seeds.splitlines()[0] == ("| arm | width | chosen lr | other seeds at it | seed | lr 0.001 | lr 0.003 | lr 0.01 "
                                   "| 3,000 steps |")
  assert seeds.splitlines()[2:] == ["| gla | 64 | 0.001 | 0: 0.950, 2: 0.920 | 1 | 0.100 | … | 0.300 | 0.970 |"]


def test_matched_columns_name_the_cell_and_mark_a_provisional_rate():
  row = {"num_params": 428160, "state_size": 2048}
  cells = [tables.Cell("gla", 120, 3e-3, [{"num_params": None}, row]), tables.Cell("softmax", 128, 1e-2, [], True)]
  kv = lambda c: " (KV)" if c.arm == "softmax" else ""
  assert tables.columns(cells, tables.matched_columns(lead=[("layers", lambda c: 2)], state=kv)).splitlines() == [
      "| arm | layers | width | params | state (floats/seq) | lr |", "|---|---|---|---|---|---|",
      "| gla | 2 | 120 | 428,160 | 2,048 | 0.003 |", "| softmax | 2 | 128 | … | … (KV) | 0.01 † |"]


def test_spread_gap_and_rate_tables():
  cells = {"a": [1.0, 1.1], "b": [1.2, 1.3], "c": [1.05, 1.25], "d": [2.0]}
  spread = tables.spread_table(cells, "min").splitlines()
  assert spread[2] == "| a | 1.050 | b (-0.200) | c (-0.100) | d (-0.950) |"   # lower is better: a beats b
  assert spread[3] == "| b | 1.250 | — | c (+0.100) | d (-0.750) |"
  assert tables.spread_table(cells, "max").splitlines()[3].startswith("| b | 1.250 | a (+0.200) |")
  gap = tables.gap_table({"a": ("b", "d", "e")}, cells, "min", ["arm", "1", "2", "3"]).splitlines()
  assert gap[2] == "| a | b: +0.200 (yes) | d: +0.950 (under 2 seeds) | e: … |"   # + = a better (lower)
  assert tables.gap_table({"a": ("b",)}, cells, "max", ["arm", "1"]).splitlines()[2] == "| a | b: -0.200 (yes) |"
  assert tables.rate_table({("x", 1e-3): 0.5, ("y", 3e-3): -0.25}, ["y", "x", "z"]).splitlines() == [
      "| arm | lr 0.001 | lr 0.003 |", "|---|---|---|", "| y |  | -0.250 |", "| x | +0.500 |  |"]


def test_curves_lengths_and_position_loss(tmp_path):
  metrics = [{"step": 500, "eval_accuracy": 0.25}, {"step": 1000, "eval_accuracy": 0.5}]
  rows = [{"name": "p", "_metrics": metrics}]
  assert tables.curve_table(rows, (500, 1500), [("name", lambda r: r["name"])]).splitlines()[2] == "| p | 0.250 |  |"
  row = lambda seed, at128, at512: {"_overrides": {"seed": seed}, "_config": {"data.seq_len": 128},
                                    "bits_per_byte": at128, "bits_per_byte@T512": at512, "bits_per_byte@T2048": None}
  assert [(r["eval_seq_len"], r["bits_per_byte"]) for r in tables.by_length([row(0, 2.0, 2.5)])] == [(128, 2.0),
                                                                                                      (512, 2.5)]
  assert tables.length_table({"a": [row(0, 2.0, 2.5), row(1, 2.2, 2.5)]}).splitlines() == [
      "| arm | T=128 | T=512 | T=512 − T=128 |", "|---|---|---|---|",
      "| a | 2.100 ± 0.141 | 2.500 ± 0.000 | +0.400 |"]
  (tmp_path / "position_loss.json").write_text('{"position": [1, 2, 3, 4], "position_loss": [4.0, 2.0, 1.0, 3.0]}')
  assert tables.position_loss({"_workdir": str(tmp_path)}, (2, 3)) == 1.5
  assert tables.position_loss({"_workdir": str(tmp_path / "none")}, (2, 3)) is None


def test_rows_csv_beside_the_markdown(tmp_path):
  rows = [{"a": 1, "b": None}, {"a": 2}]
  assert tables.rows_csv("", [("a", lambda r: r["a"])], rows) is None
  path = tables.rows_csv(str(tmp_path / "study.md"), [("a", lambda r: r["a"]), ("b", lambda r: r.get("b"))], rows)
  assert open(path, newline="").read() == "a,b\r\n1,\r\n2,\r\n"


def test_length_change_by_rate_from_the_pilot_points():
  rule = protocol.LrRule((1e-3, 3e-3), metric="bits_per_byte", direction="min")
  tuning = protocol.Tuning(rule, lambda arm, width, lr: protocol.point(ARMS, arm, {"model.d_model": width}, lr, 0))
  row = lambda arm, lr, seed, at128, at512: {
      "_overrides": dict(protocol.point(ARMS, arm, {"model.d_model": 8}, lr, seed)), "status": "ok",
      "_config": {"data.seq_len": 128}, "bits_per_byte": at128, "bits_per_byte@T512": at512}
  rows = [row("a", 1e-3, 0, 2.0, 2.5), row("a", 3e-3, 0, 1.5, 1.25), row("a", 1e-3, 1, 2.0, 9.0),  # seed 1: not
          row("b", 3e-3, 0, 2.0, None)]                                                        # b: no T=512
  assert tables.length_change_by_rate(tuning, rows, [("b", 8), ("a", 8)]).splitlines() == [
      "| arm | lr 0.001 | lr 0.003 |", "|---|---|---|", "| a | +0.500 | -0.250 |"]
  assert tables.length_change_by_rate(tuning, rows[-1:], [("b", 8)]).startswith("(no evaluation past")


def test_report_joins_the_sections_and_writes_the_csv(tmp_path, capsys):
  out = str(tmp_path / "study.md")
  text = tables.report(out, [("One", "| x |\n"), ("Two", "t\n")], [{"a": 1}], [("a", lambda r: r["a"])])
  assert text == "### One\n\n| x |\n\n### Two\n\nt\n" == open(out).read() and text in capsys.readouterr().out
  assert open(tmp_path / "study.csv", newline="").read() == "a\r\n1\r\n"
  assert tables.report("", [("One", "x\n")]) == "### One\n\nx\n"
  assert tables.sections([("A", "a\n"), ("B", "b\n")], level=2) == "## A\n\na\n\n## B\n\nb\n"


def test_first_count_and_early_to_late(tmp_path):
  assert tables.first_count([{"n": None}, {"n": 1234.0}], "n") == "1,234" and tables.first_count([], "n") == "…"
  for name, losses in (("a", [4.0, 2.0, 1.0, 3.0]), ("b", [2.0, 2.0, 3.0, 1.0])):
    (tmp_path / name).mkdir()
    (tmp_path / name / "position_loss.json").write_text(f'{{"position": [1, 2, 3, 4], "position_loss": {losses}}}')
  rows = [{"_workdir": str(tmp_path / "a")}, {"_workdir": str(tmp_path / "b")}]
  assert tables.early_to_late(rows, (1, 2), (3, 4)) == "2.500 → 2.000"
  assert tables.early_to_late(rows, (1, 2), (5, 6)) == "…"      # no loss at positions 5-6


def test_borrowed_rows_are_another_studys_points_as_this_studys(tmp_path):
  """borrowed_rows: the other study's points that have a sub-workdir, with this study's overrides and arm, the
  source named and their own overrides kept; a point that has not run is left out."""
  other = tmp_path / "other.py"
  other.write_text("from linear_seq.studies import protocol\n"
                   "def get_config(arg=''):\n  return protocol.task('mqar.py', tiny=True)\n")
  theirs = [{"model.d_model": 16, "seed": s} for s in (0, 1)]
  mine = [protocol.point({"x": {"model.num_layers": 2}}, "x", {"model.d_model": 16}, None, s) for s in (0, 1)]
  ran = tmp_path / "runs" / sweep.point_name(theirs[0])
  ran.mkdir(parents=True)
  (ran / "eval.json").write_text('{"accuracy": 0.5, "step": 1}')
  rows = tables.borrowed_rows(str(other), str(tmp_path / "runs"), list(zip(theirs, mine)), "the other study")
  assert [(r["_overrides"], r["_arm"], r["_from"], r["_source_overrides"], r["accuracy"]) for r in rows] == [
      (mine[0], "x", "the other study", theirs[0], 0.5)]
