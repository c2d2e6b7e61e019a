"""Every user mistake of `python -m linear_seq.main` is one `error:` line: exit 1, no traceback, the field or file
named, and no workdir left behind (the config and the data are checked before the workdir is created).

The cases run in one subprocess (this file run as a script): it imports linear_seq.main once, then forks a
child per case that runs `app.run(main)` with that case's argv, as `python -m linear_seq.main ARGS` does, and
collects its exit code and output. Nothing compiles: every case fails before the first step.
"""
import json
import os
import pathlib
import resource
import shutil
import signal
import subprocess
import sys
import tempfile

import pytest

from tests import helpers

MQAR = "--config=configs/mqar.py:tiny=True"
TINY = "--config=configs/default.py:tiny=True"
CASE_SECONDS = 120  # each case fails within a few seconds; a regression (a hang, a training run) is cut here
CASE_MEMORY = 16 * 2**30  # and one that allocates a huge batch gets a MemoryError, not the machine's memory
NOBODY = 65534  # the read-only case drops root's rights in its child (root writes in a read-only folder)

# (name, arguments after --workdir (FILES/... is the fixture's folder), what the error line must contain)
CASES = [
    ("read-only workdir", ["--workdir=RO", MQAR], "cannot write in --workdir=RO (Permission denied: RO/.lock)"),
    (".lock is a folder", ["--workdir=FILES/lockdir", MQAR], "FILES/lockdir/.lock is a folder, not the workdir's lock"),
    ("prepared data truncated", [TINY, "--config.data.dataset=local_text", "--config.data.path=FILES/corpus",
                                 "--config.data.data_dir=FILES/truncated"],
     "the prepared data in FILES/truncated/local_text/"),
    ("prepared data without dataset_info", [TINY, "--config.data.dataset=local_text",
                                            "--config.data.path=FILES/corpus", "--config.data.data_dir=FILES/no_info"],
     "the prepared data in FILES/no_info/local_text/"),
    ("imports: syntax error", [MQAR, "--config.imports=FILES/syntax.py"],
     "config.imports: importing 'FILES/syntax.py' failed: SyntaxError: '(' was never closed (syntax.py, line 1)"),
    ("imports: raises", [MQAR, "--config.imports=FILES/raises.py"],
     "config.imports: importing 'FILES/raises.py' failed: RuntimeError: plug-in boom"),
    ("config file raises", ["--config=FILES/configs/raises.py"],
     "--config: cannot load 'FILES/configs/raises.py': RuntimeError: config boom"),
    ("config file syntax error", ["--config=FILES/configs/syntax.py"],
     "--config: cannot load 'FILES/configs/syntax.py': SyntaxError: invalid syntax (syntax.py, line 1)"),
    ("config option typo", ["--config=configs/default.py:mixr=gla"],
     "unknown config option(s) mixr (did you mean mixer?); valid: mixer, tiny"),
    ("hf_disk without text_column", [TINY, "--config.data.dataset=hf_disk", "--config.data.path=FILES/hf",
                                     "--config.data.data_dir=FILES/tfds"],
     "hf_disk: FILES/hf/train.parquet has no column 'text' (set --config.data.text_column); columns: content"),
    ("vocab_size=1", [MQAR, "--config.data.vocab_size=1"], "mqar: vocab_size=1 is too small"),
    ("num_kv_pairs=0", [MQAR, "--config.data.num_kv_pairs=0"], "mqar: num_kv_pairs must be >= 1, got 0"),
    ("num_kv_pairs=100", [MQAR, "--config.data.num_kv_pairs=100"], "mqar: seq_len must be >= 4 * num_kv_pairs = 400"),
    ("num_train=0", [MQAR, "--config.data.num_train=0"], "the train split needs a positive number of examples "
                                                         "(config.data.num_train / num_eval), got 0"),
    ("num_eval=0", [MQAR, "--config.data.num_eval=0"], "the validation split needs a positive number of examples"),
    ("shuffle_seed=-1", [MQAR, "--config.data.shuffle_seed=-1"], "data.shuffle_seed must be in [0, 2**32), got -1"),
    ("gate_temperature=0", [MQAR, "--config.model.gate_temperature=0"], "model.gate_temperature must be > 0, got 0.0"),
    ("gate_rank=0", [MQAR, "--config.model.gate_rank=0"], "model.gate_rank must be > 0, got 0"),
    ("seq_len too long", [MQAR, "--config.data.seq_len=1000000000"],
     "data.batch_size × data.seq_len = 8 × 1000000000 tokens need at least"),
    ("batch_size too large", [MQAR, "--config.data.batch_size=1000000000"],
     "data.batch_size × data.seq_len = 1000000000 × 16 tokens need at least"),
    ("mixer=mamba", [MQAR, "--config.model.mixer=mamba"], "unknown mixer 'mamba'; valid: softmax, linear, "
                                                          "retention, gla, s4, deltanet, deltaproduct, mamba2 (did you mean 'mamba2'?)"),
    ("empty validation file", [TINY, "--config.data.dataset=local_text", "--config.data.path=FILES/empty_validation",
                               "--config.data.data_dir=FILES/tfds"],
     "the validation split holds no text (data.path='FILES/empty_validation', data.dataset='local_text')"),
]
# The empty-validation case again with --verbose: the traceback, the same line, and the libraries' notices.
VERBOSE = ("--verbose", [*CASES[-1][1], "--verbose"], CASES[-1][2])
# TFDS's and orbax's notices, shown only with --verbose (metrics.quiet_library_logs).
NOTICES = ("Using custom data configuration", "has no dataset_info.json", "Downloading and preparing dataset",
           "Given directory is read only")


def _files(root: str) -> None:
  """The files the cases name, under root."""
  write = lambda name, text: helpers.write_files(pathlib.Path(root), {name: text})
  write("syntax.py", "x = (\n")
  write("raises.py", "raise RuntimeError('plug-in boom')\n")
  write("configs/raises.py", "def get_config():\n  raise RuntimeError('config boom')\n")
  write("configs/syntax.py", "def get_config(:\n")
  os.makedirs(os.path.join(root, "lockdir", ".lock"))
  for i in range(3):
    write(f"corpus/f{i}.txt", f"a few words in file {i} of the corpus\n")
  write("empty_validation/a.txt", "some training text here\n")
  write("empty_validation/b.txt", "")  # the last of < 10 files: the validation split
  import pyarrow as pa  # pylint: disable=g-import-not-at-top
  import pyarrow.parquet as pq  # pylint: disable=g-import-not-at-top
  os.makedirs(os.path.join(root, "hf"))
  pq.write_table(pa.table({"content": [f"row {i}" for i in range(20)]}), os.path.join(root, "hf", "train.parquet"))
  # A prepared local_text corpus, then two damaged copies of it.
  from linear_seq import config_lib, data  # pylint: disable=g-import-not-at-top
  config = config_lib.apply_overrides(helpers.default_data_config(), {
      "dataset": "local_text", "path": os.path.join(root, "corpus"), "data_dir": os.path.join(root, "prepared")})
  data.make_examples(config, "train", seq_len=8, seed=0)
  (version,) = [os.path.join(d, f) for d, _, fs in os.walk(os.path.join(root, "prepared")) for f in fs
                if f == "dataset_info.json"]
  version = os.path.dirname(version)
  for damaged in ("truncated", "no_info"):
    shutil.copytree(os.path.join(root, "prepared"), os.path.join(root, damaged))
  relative = os.path.relpath(version, os.path.join(root, "prepared"))
  truncated = os.path.join(root, "truncated", relative)
  with open(os.path.join(truncated, [f for f in os.listdir(truncated) if "-train.array_record" in f][0]), "r+b") as f:
    f.truncate(100)
  os.remove(os.path.join(root, "no_info", relative, "dataset_info.json"))


@pytest.fixture(scope="module")
def results(tmp_path_factory):
  """{case name: (exit code, output, workdir, entries of the workdir before)} of every case, from one subprocess."""
  root = str(tmp_path_factory.mktemp("one_line"))
  _files(root)
  read_only = tempfile.mkdtemp(prefix="linear_seq_ro_")  # (under /tmp: reachable by the unprivileged child)
  os.chmod(read_only, 0o555)
  runs, before = {}, {}
  for i, (name, args, _) in enumerate([*CASES, VERBOSE]):
    args = [a.replace("FILES", root) if a != "--workdir=RO" else f"--workdir={read_only}" for a in args]
    if not any(a.startswith("--workdir=") for a in args):
      args.insert(0, f"--workdir={root}/work/{i}")
    workdir = next(a.split("=", 1)[1] for a in args if a.startswith("--workdir="))
    before[name] = (workdir, sorted(os.listdir(workdir)) if os.path.isdir(workdir) else None)
    runs[name] = {"args": args, "user": NOBODY if workdir == read_only and os.geteuid() == 0 else None}
  cases = os.path.join(root, "cases.json")
  with open(cases, "w") as f:
    json.dump(runs, f)
  try:
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), cases], cwd=helpers.REPO, env=helpers.cli_env(),
                          capture_output=True, text=True, timeout=600)
  finally:
    os.chmod(read_only, 0o755)
  assert proc.returncode == 0, proc.stderr[-3000:]
  out = json.loads(proc.stdout.splitlines()[-1])
  yield {name: (out[name]["code"], out[name]["output"], *before[name]) for name in runs}, root, read_only
  shutil.rmtree(read_only)


@pytest.mark.parametrize("name, args, message", CASES, ids=[c[0] for c in CASES])
def test_user_mistake_is_one_error_line_and_leaves_no_workdir(results, name, args, message):
  by_name, root, read_only = results
  code, output, workdir, entries = by_name[name]
  errors = [line for line in output.splitlines() if line.startswith("error:")]
  message = message.replace("FILES", root).replace("RO", read_only)
  assert code == 1 and len(errors) == 1 and message in errors[0], output[-3000:]
  assert "Traceback" not in output and not any(n in output for n in NOTICES), output[-3000:]
  assert (sorted(os.listdir(workdir)) if os.path.isdir(workdir) else None) == entries  # nothing created


def test_verbose_shows_the_traceback_and_the_library_notices(results):
  by_name, root, _ = results
  code, output, _, _ = by_name[VERBOSE[0]]
  errors = [line for line in output.splitlines() if line.startswith("error:")]
  assert code == 1 and errors == [f"error: {VERBOSE[2].replace('FILES', root)}: nothing to evaluate"], output[-3000:]
  assert "Traceback" in output and "Using custom data configuration" in output, output[-3000:]


def _run_cases(path: str) -> None:
  """The subprocess: each case in a forked child (fresh absl flags), its output (fds 1 and 2) in a file."""
  from absl import app  # pylint: disable=g-import-not-at-top
  from linear_seq import cli  # pylint: disable=g-import-not-at-top
  from linear_seq import main as main_lib  # pylint: disable=g-import-not-at-top

  with open(path) as f:
    runs = json.load(f)
  results = {}
  for name, run in runs.items():
    with tempfile.TemporaryFile() as captured:
      sys.stdout.flush()
      sys.stderr.flush()
      pid = os.fork()
      if pid == 0:  # the child: `python -m linear_seq.main ARGS`
        code = 2
        try:
          os.dup2(captured.fileno(), 1)
          os.dup2(captured.fileno(), 2)
          signal.alarm(CASE_SECONDS)  # a hang (e.g. building a huge batch) ends this case, not the suite
          resource.setrlimit(resource.RLIMIT_DATA, (CASE_MEMORY, CASE_MEMORY))  # an allocation fails, no OOM
          if run["user"] is not None:
            os.setgid(run["user"])
            os.setuid(run["user"])
          sys.argv = ["linear_seq.main", *run["args"]]
          app.run(main_lib.main, flags_parser=cli.parse_flags)
          code = 0
        except SystemExit as e:
          code = 0 if e.code is None else e.code if isinstance(e.code, int) else 1
        except BaseException:  # pylint: disable=broad-except  (reported as the traceback it is)
          import traceback  # pylint: disable=g-import-not-at-top
          traceback.print_exc()
          code = 3
        finally:
          sys.stdout.flush()
          sys.stderr.flush()
          os._exit(code)  # pylint: disable=protected-access
      _, status = os.waitpid(pid, 0)
      captured.seek(0)
      results[name] = {"code": os.waitstatus_to_exitcode(status), "output": captured.read().decode(errors="replace")}
  print(json.dumps(results))


if __name__ == "__main__":
  _run_cases(sys.argv[1])
