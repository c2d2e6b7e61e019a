"""experiments/decay/tuned.py, the example of experiments/README.md's "How to write a study": the README shows the
file as it is, its points and follow-up rounds follow the protocol's rule, and it runs in tiny mode (a sweep,
then the tables CLI)."""
import os
import re
import subprocess
import sys

from linear_seq.studies import sweep
from tests.helpers import REPO
from tests.helpers import cli_env

EXAMPLE = os.path.join(REPO, "experiments", "decay", "tuned.py")


def test_the_readme_shows_the_whole_example_and_it_fits_a_page():
  with open(os.path.join(REPO, "experiments", "README.md")) as f:
    readme = f.read()
  with open(EXAMPLE) as f:
    example = f.read()
  blocks = re.findall(r"```python\n(.*?)```", readme[readme.index("## How to write a study"):], re.S)
  assert blocks and blocks[0] == example
  assert example.count("\n") <= 100


def test_the_example_tunes_each_arm_then_runs_its_seeds():
  module = sweep.load_study(EXAMPLE)
  first = sweep.get_points(module, "seeds=2")
  assert len(first) == 2 * len(module.ARMS) and all(p.arm for p in first)
  acc = {1e-3: 0.5, 3e-3: 0.9}   # 3e-3 wins everywhere: the step past the edge (1e-2) runs next
  rows = [{"_overrides": dict(p), "status": "ok", "accuracy": acc[p["train.learning_rate"]]} for p in first]
  steps = module.get_followup_sweep(rows, "seeds=2")
  assert [(p.arm, p["train.learning_rate"], p["seed"]) for p in steps] == [(a, 1e-2, 0) for a in module.ARMS]
  rows += [{"_overrides": dict(p), "status": "failed"} for p in steps]   # a failed step loses: 3e-3 stays
  seeds = module.get_followup_sweep(rows, "seeds=2")
  assert [(p.arm, p["train.learning_rate"], p["seed"]) for p in seeds] == [(a, 3e-3, 1) for a in module.ARMS]


def test_the_example_runs_in_tiny_mode(tmp_path):
  """Two tiny points (seed 0 at the one-rate grid, then seed 1 at it), then study.md / study.csv from them."""
  env = cli_env()
  run = lambda *args: subprocess.run([sys.executable, "-m", *args], env=env, capture_output=True, text=True, cwd=REPO)
  proc = run("linear_seq.studies.sweep", f"--config={EXAMPLE}:tiny=True", f"--workdir={tmp_path}")
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  proc = run("linear_seq.studies.tables", f"--table={EXAMPLE}:tiny=True", f"--workdir={tmp_path}",
             f"--out={tmp_path / 'study.md'}")
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  table = (tmp_path / "study.md").read_text()
  assert re.search(r"\| gla-tau4 \| 0\.001 \| \d\.\d{3} / \d\.\d{3} \| \d\.\d{3} ± \d\.\d{3} \| \d/2 \|", table), table
  assert len((tmp_path / "study.csv").read_text().splitlines()) == 3
