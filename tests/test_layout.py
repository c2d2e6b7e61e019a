"""The package layout: the training library never imports linear_seq.studies, plots and report do not import
each other (the sweep composes collect -> plots -> report), and no module in studies/ imports inside a
function (a lazy import would hide a cycle)."""
import ast
import os

import pytest

PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "linear_seq")


def _modules():
  for root, _, files in os.walk(PACKAGE):
    for name in sorted(files):
      if name.endswith(".py"):
        path = os.path.join(root, name)
        yield os.path.relpath(path, os.path.dirname(PACKAGE)), ast.parse(open(path).read())


def _imports(tree, *, nested_only: bool = False) -> list[str]:
  """Imported module names ('from a import b' gives 'a.b' and 'a'); nested_only: only inside functions."""
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


MODULES = dict(_modules())


def test_the_studies_package_exists():
  assert {f"linear_seq/studies/{m}.py" for m in ("sweep", "collect", "report", "plots", "speed", "bench",
                                                 "common", "params")} <= set(MODULES)


@pytest.mark.parametrize("path", sorted(p for p in MODULES if not p.startswith("linear_seq/studies/")))
def test_the_training_library_does_not_import_studies(path):
  assert not [m for m in _imports(MODULES[path]) if m.startswith("linear_seq.studies")], path


def test_plots_and_report_do_not_import_each_other():
  assert "linear_seq.studies.report" not in _imports(MODULES["linear_seq/studies/plots.py"])
  assert "linear_seq.studies.plots" not in _imports(MODULES["linear_seq/studies/report.py"])


@pytest.mark.parametrize("path", sorted(p for p in MODULES if p.startswith("linear_seq/studies/")))
def test_no_lazy_imports_in_studies(path):
  assert _imports(MODULES[path], nested_only=True) == [], path
