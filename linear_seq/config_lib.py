"""Config helpers: typed `get_config(arg)` options, config files that build on each other, and the
resolved config saved in a workdir as config.json and restored from it with its types."""
import ast
import importlib.util
import json
import os
from typing import Any, Iterable, Mapping

import ml_collections

CONFIG_FILE = "config.json"


def parse_arg(arg: str) -> dict:
  """'mixer=gla,tiny=True' -> {'mixer': 'gla', 'tiny': True} (bools and numbers typed)."""
  out = {}
  for item in filter(None, (arg or "").split(",")):
    key, sep, value = item.partition("=")
    if not sep:
      raise ValueError(f"config option {item!r} is not key=value (options look like 'mixer=gla,tiny=True')")
    out[key.strip()] = _typed(value.strip())
  return out


def _typed(value: str):
  if value in ("True", "False"):
    return value == "True"
  for cast in (int, float):
    try:
      return cast(value)
    except ValueError:
      pass
  return value


def check_options(opts: Mapping[str, Any], valid: Iterable[str]) -> None:
  """Rejects unknown `get_config` options (a typo must not be ignored silently)."""
  valid = sorted(valid)
  unknown = sorted(set(opts) - set(valid))
  if unknown:
    raise ValueError(f"unknown config option(s) {', '.join(unknown)}; valid: {', '.join(valid)}")


def parse_options(arg: str, valid: Iterable[str]) -> dict:
  """A config file's `get_config(arg)` options: parse_arg(arg), then check_options against `valid`."""
  opts = parse_arg(arg)
  check_options(opts, valid)
  return opts


def load_sibling(config_file: str, name: str):
  """Imports configs/<name>.py from the folder of `config_file` (config files are loaded by path, so they are
  not a package; this is how configs/mqar.py builds on configs/default.py)."""
  path = os.path.join(os.path.dirname(os.path.abspath(config_file)), f"{name}.py")
  spec = importlib.util.spec_from_file_location(f"linear_seq_configs_{name}", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def to_dict(config: ml_collections.ConfigDict) -> dict:
  return config.to_dict() if isinstance(config, ml_collections.ConfigDict) else dict(config)


def save_config(config: ml_collections.ConfigDict, workdir: str) -> str:
  """Writes the resolved config as workdir/config.json (JSON keeps int, float, bool and str apart)."""
  path = os.path.join(workdir, CONFIG_FILE)
  os.makedirs(workdir, exist_ok=True)
  tmp = path + ".tmp"
  with open(tmp, "w") as f:
    json.dump(to_dict(config), f, indent=2, sort_keys=True)
    f.write("\n")
  os.replace(tmp, path)
  return path


def load_config(workdir: str) -> ml_collections.ConfigDict:
  """Restores workdir/config.json as a locked ConfigDict with the saved types."""
  path = os.path.join(workdir, CONFIG_FILE)
  if not os.path.exists(path):
    raise FileNotFoundError(f"no {CONFIG_FILE} in {workdir!r}: is it a training workdir (python -m linear_seq.main "
                            f"--workdir=...)?")
  with open(path) as f:
    try:
      d = json.load(f)
    except json.JSONDecodeError as e:
      raise ValueError(f"{path} is not valid JSON: {e}") from e
  return ml_collections.ConfigDict(d).lock()


def apply_overrides(config: ml_collections.ConfigDict, overrides: Mapping[str, Any]) -> ml_collections.ConfigDict:
  """Sets dotted fields, e.g. {'eval.seq_len': '512'}; strings are cast to the field's type. Unknown fields raise
  ValueError listing the fields of that section."""
  config = ml_collections.ConfigDict(to_dict(config))
  for key, value in overrides.items():
    *parents, leaf = key.split(".")
    node = config
    for i, name in enumerate(parents + [leaf]):
      child = node.get(name) if isinstance(node, ml_collections.ConfigDict) else None
      is_last = i == len(parents)
      if name not in node or (not is_last and not isinstance(child, ml_collections.ConfigDict)):
        section = ".".join(parents[:i]) or "top level"
        raise ValueError(f"unknown config field {key!r}; valid fields at {section}: {', '.join(sorted(node.keys()))}")
      if not is_last:
        node = child
    old = node[leaf]
    node[leaf] = cast_like(old, value, key)
  return config.lock()


def cast_like(old, value, key: str = "value"):
  """Casts `value` (often a command-line string) to the type of `old`."""
  if not isinstance(value, str) or isinstance(old, str):
    if isinstance(old, float) and isinstance(value, int) and not isinstance(value, bool):
      return float(value)
    return value
  if isinstance(old, bool):
    if value.lower() in ("true", "1", "yes"):
      return True
    if value.lower() in ("false", "0", "no"):
      return False
    raise ValueError(f"{key} expects a bool (true/false), got {value!r}")
  if isinstance(old, (int, float)):
    try:
      return type(old)(value) if isinstance(old, float) else int(value)
    except ValueError:
      raise ValueError(f"{key} expects {type(old).__name__}, got {value!r}") from None
  if old is None or isinstance(old, (list, tuple)):
    try:
      return ast.literal_eval(value)
    except (ValueError, SyntaxError):
      return value
  return value


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
  """{'model': {'mixer': 'gla'}} -> {'model.mixer': 'gla'} (nested dicts to dotted keys)."""
  out = {}
  for k, v in d.items():
    if isinstance(v, Mapping):
      out.update(flatten(v, f"{prefix}{k}."))
    else:
      out[f"{prefix}{k}"] = v
  return out


def diff(a: ml_collections.ConfigDict, b: ml_collections.ConfigDict) -> list[str]:
  """Dotted keys whose values differ between two configs."""
  fa, fb = flatten(to_dict(a)), flatten(to_dict(b))
  return sorted(k for k in set(fa) | set(fb) if fa.get(k, object()) != fb.get(k, object()))
