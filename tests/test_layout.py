"""The package and test-suite layout.

Package: the training library never imports linear_seq.studies; plots and report do not import each other (the
sweep composes collect -> plots -> report); the import graph of the package's modules is acyclic; no module
imports a command line (main.py, evaluate.py: api.py uses their libraries train.py, restored.py); and the
import rule of docs/DESIGN.md: imports sit at the top of the module. A function imports only what LAZY_IMPORTS
lists for its module (a lazy import of a linear_seq module would hide a cycle; the listed ones are optional or
slow third-party modules, and linear_seq/__init__.py's module `__getattr__` that keeps `import linear_seq` cheap).
Tests: test files never import each other (shared code lives in tests/helpers.py); tests/studies/test_<m>.py
tests linear_seq/studies/<m>.py (the study configs and scripts of experiments/ are tested in tests/experiments/).
"""
import ast
import os

import pytest

from tests.helpers import REPO

PACKAGE = os.path.join(REPO, "linear_seq")
TESTS = os.path.join(REPO, "tests")

# The only imports inside functions, per module (exactly these: a stale entry fails too).
LAZY_IMPORTS = {
    "linear_seq/__init__.py": ["linear_seq.api", "linear_seq.api.load"],  # `linear_seq.load` on first use
    "linear_seq/data/bpe.py": ["tokenizers"],  # only the bpe tokenizer needs it (an install hint if missing)
    "linear_seq/convert.py": ["tokenizers"],
    # the accelerator image has no ml_collections: only the training section imports it and what needs it
    "linear_seq/studies/accel_check.py": ["linear_seq", "linear_seq", "linear_seq.config_lib",
                                          "linear_seq.config_lib", "linear_seq.sharding", "linear_seq.sharding",
                                          "linear_seq.steps", "linear_seq.steps", "ml_collections"],
    # check_mixer accepts a ModelConfig, and model imports the mixers package that exports check_mixer
    "linear_seq/mixers/contract.py": ["linear_seq", "linear_seq.mixers", "linear_seq.model"],
    "linear_seq/data/hf_disk.py": ["datasets", "pyarrow.parquet"],  # the optional `hf` extra
    "linear_seq/metrics.py": ["tensorboardX", "tqdm"],  # slow imports, only where metrics are written
    "linear_seq/studies/tables.py": ["scipy", "scipy.stats"],  # ~1 s, only Welch's test needs it
}


def _trees(folder):
  for root, _, files in os.walk(folder):
    for name in sorted(files):
      if name.endswith(".py"):
        path = os.path.join(root, name)
        with open(path) as f:
          yield os.path.relpath(path, REPO), ast.parse(f.read())


def _imports(tree, *, nested_only: bool = False) -> list[str]:
  """Imported module names ('from a import b' gives 'a' and 'a.b'); nested_only: only inside functions."""
  nodes = ast.walk(tree)
  if nested_only:
    nodes = (n for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
             for n in ast.walk(f))
  out = []
  for node in nodes:
    if isinstance(node, ast.Import):
      out += [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom) and node.module:
      out += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
  return out


def _module_name(path: str) -> str:
  name = path[:-len(".py")].replace(os.sep, ".")
  return name[:-len(".__init__")] if name.endswith(".__init__") else name


MODULES = dict(_trees(PACKAGE))
TEST_FILES = dict(_trees(TESTS))


def test_the_studies_package_exists():
  assert {f"linear_seq/studies/{m}.py" for m in ("sweep", "collect", "report", "plots", "speed", "bench",
                                                 "common", "params")} <= set(MODULES)


@pytest.mark.parametrize("path", sorted(p for p in MODULES if not p.startswith("linear_seq/studies/")))
def test_the_training_library_does_not_import_studies(path):
  assert not [m for m in _imports(MODULES[path]) if m.startswith("linear_seq.studies")], path


def test_plots_and_report_do_not_import_each_other():
  assert "linear_seq.studies.report" not in _imports(MODULES["linear_seq/studies/plots.py"])
  assert "linear_seq.studies.plots" not in _imports(MODULES["linear_seq/studies/report.py"])


def test_imports_inside_functions_only_where_listed():
  for path, tree in MODULES.items():
    assert sorted(_imports(tree, nested_only=True)) == LAZY_IMPORTS.get(path, []), path


def test_lazy_import_list_names_existing_modules():
  assert set(LAZY_IMPORTS) <= set(MODULES)


def _package_imports(tree, names) -> set[str]:
  """The linear_seq modules a module imports at its top level (outside functions); 'from a import b' is a.b
  when that is a module, else a."""
  out = set()
  todo = list(ast.iter_child_nodes(tree))
  while todo:
    node = todo.pop()
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
      continue
    if isinstance(node, ast.Import):
      out |= {a.name for a in node.names if a.name in names}
    elif isinstance(node, ast.ImportFrom) and node.module in names:
      out |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in names else node.module for a in node.names}
    todo += ast.iter_child_nodes(node)
  return out


def test_the_module_import_graph_is_acyclic():
  names = {_module_name(p): p for p in MODULES}
  graph = {name: _package_imports(MODULES[path], names) - {name} for name, path in names.items()}
  state = {}

  def visit(node, stack):
    state[node] = "open"
    for nxt in sorted(graph[node]):
      assert state.get(nxt) != "open", "import cycle: " + " -> ".join(stack[stack.index(nxt):] + [nxt])
      if nxt not in state:
        visit(nxt, stack + [nxt])
    state[node] = "done"

  for name in sorted(graph):
    if name not in state:
      visit(name, [name])


def test_test_files_do_not_import_each_other():
  for path, tree in TEST_FILES.items():
    others = [m for m in _imports(tree) if m.startswith("tests.") and m.split(".")[-1].startswith("test_")]
    assert not others, f"{path} imports {others}: move what they share to tests/helpers.py"


def test_studies_tests_mirror_the_studies_package():
  for path in TEST_FILES:
    folder, name = os.path.split(path)
    if folder == os.path.join("tests", "studies") and name.startswith("test_"):
      module = os.path.join("linear_seq", "studies", name[len("test_"):])
      assert module in MODULES, f"{path} tests no module of linear_seq/studies/ (tests of experiments/ go in " \
                                "tests/experiments/)"


# The command lines, each over its library (main.py -> train.py, evaluate.py -> restored.py): no module imports
# a command line (api.py and the studies call the libraries).
COMMAND_LINES = ("linear_seq.main", "linear_seq.evaluate")


@pytest.mark.parametrize("path", sorted(MODULES))
def test_no_module_imports_a_command_line(path):
  assert not set(_imports(MODULES[path])) & set(COMMAND_LINES), path
