"""The docs say what the code does: every README command runs (flags parsed, config loaded: --dry_run), every
path and link in the README resolves, and docs/DESIGN.md names every public op and registered mixer."""
import concurrent.futures
import os
import re
import shlex
import subprocess
import sys

import pytest

from linear_seq import mixers
from linear_seq import ops

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
DESIGN = os.path.join(ROOT, "docs", "DESIGN.md")
ENTRY = re.compile(r"python -m (linear_seq[\w.]*)")
# Placeholders the README writes for values a reader fills in: what the test fills in instead.
PLACEHOLDERS = {"<study>": "decay", "--num_processes=N": "--num_processes=2", "--process_id=I": "--process_id=0",
                "/path/to/txt/folder": "{textdir}"}


def _read(path):
  with open(path, encoding="utf-8") as f:
    return f.read()


def split_fences(text: str) -> tuple[list[tuple[str, str]], str]:
  """([(language, body)] of the fenced code blocks, the text outside them)."""
  blocks, prose, fence = [], [], None
  for line in text.splitlines():
    if line.lstrip().startswith("```"):
      if fence is None:
        fence = (line.strip()[3:].strip(), [])
      else:
        blocks.append((fence[0], "\n".join(fence[1])))
        fence = None
    elif fence is not None:
      fence[1].append(line)
    else:
      prose.append(line)
  return blocks, "\n".join(prose)


def readme_commands(text: str) -> list[str]:
  """Each `python -m linear_seq.*` command of the README: from fenced shell blocks (continuation lines joined,
  comments dropped) and from inline code; `[optional ...]` brackets are kept as their contents."""
  commands = []
  blocks, prose = split_fences(text)
  for language, body in blocks:
    if language not in ("bash", "sh", ""):
      continue
    for line in re.sub(r"\\\n\s*", " ", body).splitlines():
      line = line.split(" # ")[0].split("  # ")[0].strip()
      if ENTRY.search(line):
        commands.append(line)
  for line in prose.splitlines():
    commands += [c for c in re.findall(r"`([^`]+)`", line) if ENTRY.search(c)]
  return list(dict.fromkeys(commands))


def dry_run_argv(command: str, tmp: str) -> tuple[dict[str, str], list[str]]:
  """(extra environment, argv) that run `command` with --dry_run: the part from `python -m` on (a launcher's
  prefix such as srun or gcloud's quoting dropped), optional brackets opened, placeholders filled in, and
  workdirs moved under `tmp` (a dry run writes nothing, but a broken one must not write into the checkout)."""
  env = dict(re.findall(r"(?:^|\s)([A-Z_]+)=(\S+)\s+(?=python )", command))
  command = command[ENTRY.search(command).start():].rstrip('"')
  command = re.sub(r"\[([^\]]*)\]", r"\1", command)
  for placeholder, value in PLACEHOLDERS.items():
    command = command.replace(placeholder, value.format(textdir=os.path.join(tmp, "text")))
  argv = shlex.split(command)
  argv = [f"--workdir={os.path.join(tmp, 'w', a.split('=', 1)[1].replace('gs://', '').lstrip('/'))}"
          if a.startswith("--workdir=") else a for a in argv]
  return env, [sys.executable] + argv[1:] + ["--dry_run"]


def run_dry(command: str, tmp: str) -> subprocess.CompletedProcess:
  env_extra, argv = dry_run_argv(command, tmp)
  env = dict(os.environ, **env_extra)
  if "PYTHONPATH" in env_extra:  # relative to the checkout, as the README means it
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(ROOT, env_extra["PYTHONPATH"]), ROOT])
  env["JAX_PLATFORMS"] = "cpu"
  if "seq_memory" in command:
    env["XLA_FLAGS"] = env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
  return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240, check=False)


@pytest.fixture(scope="module")
def text_folder(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("readme")
  os.makedirs(tmp / "text")
  (tmp / "text" / "a.txt").write_text("To be, or not to be: that is the question.\n" * 50)
  (tmp / "text" / "b.txt").write_text("Whether 'tis nobler in the mind to suffer.\n" * 50)
  return str(tmp)


def test_readme_lists_the_entry_points():
  commands = readme_commands(_read(README))
  entries = {ENTRY.search(c).group(1) for c in commands}
  assert {"linear_seq.main", "linear_seq.evaluate", "linear_seq.studies.sweep"} <= entries, entries
  assert len(commands) >= 10, commands


def test_every_readme_command_runs(text_folder):
  """Each README command with --dry_run exits 0: its flags parse and its config (with the overrides) loads."""
  commands = readme_commands(_read(README))
  with concurrent.futures.ThreadPoolExecutor(2) as pool:
    results = list(pool.map(lambda c: run_dry(c, text_folder), commands))
  failed = [f"{c}\n  -> exit {r.returncode}: {(r.stderr.strip().splitlines() or [''])[-1]}"
            for c, r in zip(commands, results) if r.returncode != 0]
  assert not failed, "README commands that do not run:\n" + "\n".join(failed)
  assert all("dry run" in r.stdout or "python -m linear_seq.main" in r.stdout for r in results)


@pytest.mark.parametrize("broken", [
    "python -m linear_seq.main --config=configs/default.py --workdir=runs/x --config.model.mixr=gla",
    "python -m linear_seq.main --config=configs/default.py:mixer=nope --workdir=runs/x",
    "python -m linear_seq.evaluate --workdir=runs/x --stepp=3",
])
def test_a_broken_command_fails(broken, text_folder):
  result = run_dry(broken, text_folder)
  assert result.returncode == 1, result.stdout + result.stderr
  assert result.stderr.strip().splitlines()[-1].startswith("error:"), result.stderr


def _anchor(heading: str) -> str:
  """GitHub's anchor of a markdown heading."""
  text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
  return text.replace(" ", "-")


def test_readme_links_and_paths_resolve():
  text = _read(README)
  anchors = {_anchor(h) for h in re.findall(r"^#+ (.*)$", split_fences(text)[1], flags=re.M)}
  missing = []
  for target in re.findall(r"\]\(([^)\s]+)\)", text):
    if target.startswith(("http://", "https://")):
      continue
    path, _, anchor = target.partition("#")
    if path and not os.path.exists(os.path.join(ROOT, path)):
      missing.append(target)
    elif not path and anchor not in anchors:
      missing.append(target)
  for path in set(re.findall(r"(?<![\w/.])((?:scripts|configs|experiments|examples|docs)/[\w./-]*\w)", text)):
    if "<" not in path and not os.path.exists(os.path.join(ROOT, path)):
      missing.append(path)
  assert not missing, f"README links or paths that do not resolve: {sorted(set(missing))}"


def test_readme_top_fits_on_a_screen():
  """What it is, install, the two commands, the API, a study command, where results are: before the contents."""
  top = _read(README).split("\n## Contents", 1)[0]
  assert "scripts/run.sh" in top and "scripts/test.sh" in top and "linear_seq.load" in top
  assert len(top.splitlines()) <= 60, len(top.splitlines())


def test_design_names_every_public_op_and_mixer():
  design = _read(DESIGN)
  missing = [name for name in ops.__all__ if f"{name}" not in design]
  missing += [name for name in mixers.MIXERS if f"`{name}`" not in design]
  assert not missing, f"docs/DESIGN.md does not describe: {missing}"
