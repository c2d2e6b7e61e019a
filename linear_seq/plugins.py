"""Plug-ins: config.imports names the user modules to import before a config is checked.

  --config.imports=my_mixers,my_data         (modules on sys.path; the working directory is searched too)
  --config.imports=path/to/my_mixers.py      (or files)

Importing a module runs its `@linear_seq.mixers.register('name')`, `@linear_seq.data.register_dataset(...)`
and `@linear_seq.data.register_tokenizer(...)` decorators, so the config can then name what they add.
"""
import importlib
import importlib.util
import os
import sys
from typing import Any


def module_names(config: Any) -> list[str]:
  """config.imports split on commas (old workdirs' configs lack the field: none)."""
  value = config.get("imports", "") if hasattr(config, "get") else ""
  return [n.strip() for n in (value or "").split(",") if n.strip()]


def import_modules(config: Any) -> list[str]:
  """Imports every module of config.imports (idempotent); ValueError in one line if one cannot be imported,
  does not parse or raises."""
  for name in module_names(config):
    try:
      if name.endswith(".py"):
        _import_file(name)
      else:
        if "" not in sys.path and os.getcwd() not in sys.path:
          sys.path.append(os.getcwd())
        importlib.import_module(name)
    except ImportError as e:
      raise ValueError(f"config.imports: cannot import {name!r}: {e}") from e
    except Exception as e:  # pylint: disable=broad-except  (a plug-in that raises or does not parse: one line)
      lines = [l.strip() for l in str(e).strip().splitlines() if l.strip()]
      raise ValueError(f"config.imports: importing {name!r} failed: {type(e).__name__}: "
                       f"{lines[-1] if lines else ''}") from e
  return module_names(config)


def _import_file(path: str) -> None:
  path = os.path.abspath(os.path.expanduser(path))
  name = os.path.splitext(os.path.basename(path))[0]
  if name in sys.modules and getattr(sys.modules[name], "__file__", None) == path:
    return
  if not os.path.isfile(path):
    raise ImportError(f"no such file {path}")
  spec = importlib.util.spec_from_file_location(name, path)
  module = importlib.util.module_from_spec(spec)
  sys.modules[name] = module
  try:
    spec.loader.exec_module(module)
  except BaseException:
    del sys.modules[name]  # not imported: a later import runs it again
    raise
