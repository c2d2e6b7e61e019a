"""Config helpers: the one way to load a config (`load_config('path.py[:args]')`) and set dotted fields on it
(`apply_overrides`, with config_flags' parsing), typed `get_config(arg)` options, config files that build on
each other, and the resolved config saved in a workdir as config.json and restored from it with its types.

No model or data imports: every config file imports this module."""
import ast
import difflib
import hashlib
import importlib.util
import json
import os
from typing import Any, Iterable, Mapping, Sequence

from absl import flags
import ml_collections
from ml_collections.config_flags import tuple_parser
import numpy as np

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
    hints = [nearest(u, valid) + (f" for {u}" if len(unknown) > 1 else "") for u in unknown if nearest(u, valid)]
    hint = f" (did you mean {', '.join(hints)}?)" if hints else ""
    raise ValueError(f"unknown config option(s) {', '.join(unknown)}{hint}; valid: {', '.join(valid)}")


def nearest(name: str, valid: Iterable[str]) -> str | None:
  """The valid name closest to a mistyped `name` (difflib's ratio ≥ 0.6), or None when none is close."""
  close = difflib.get_close_matches(name, list(valid), n=1, cutoff=0.6)
  return close[0] if close else None


def parse_options(arg: str, valid: Iterable[str]) -> dict:
  """A config file's `get_config(arg)` options: parse_arg(arg), then check_options against `valid`."""
  opts = parse_arg(arg)
  check_options(opts, valid)
  return opts


def parse_subset(opts: Mapping[str, Any], key: str, valid: Sequence[str], default: Sequence[str],
                 what: str) -> list[str]:
  """A '+'-separated option value (e.g. arms=softmax+gla) as a list, each name checked against `valid`;
  `default` when the option is absent."""
  names = str(opts.get(key, "+".join(default))).split("+")
  unknown = [n for n in names if n not in valid]
  if unknown:
    raise ValueError(f"unknown {what}(s) {unknown}; valid: {', '.join(valid)}")
  return names


def load_module(path: str):
  """Imports a config file by path (config files are loaded by path, so they need not be in a package)."""
  if not os.path.isfile(path):
    raise ValueError(f"config file not found: {path!r}")
  name = "linear_seq_config_" + hashlib.sha1(os.path.abspath(path).encode()).hexdigest()[:12]
  spec = importlib.util.spec_from_file_location(name, path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def load_sibling(config_file: str, name: str):
  """Imports configs/<name>.py from the folder of `config_file` (how configs/mqar.py builds on
  configs/default.py)."""
  return load_module(os.path.join(os.path.dirname(os.path.abspath(config_file)), f"{name}.py"))


def split_spec(spec: str) -> tuple[str, str]:
  """'configs/mqar.py:tiny=True' -> ('configs/mqar.py', 'tiny=True') (the arg after the first colon)."""
  path, _, arg = spec.partition(":")
  if not path.endswith(".py"):
    raise ValueError(f"a config is a .py file optionally followed by ':args', got {spec!r}")
  return path, arg


def load_config(spec: str) -> ml_collections.ConfigDict:
  """The locked config of `spec`: a config file 'path.py[:args]' (its `get_config(args)`, as --config=spec
  gives it), or a training workdir (its saved config.json, see load_saved)."""
  if os.path.isdir(spec):
    return load_saved(spec)
  path, arg = split_spec(spec)
  module = load_module(path)
  if not hasattr(module, "get_config"):
    raise ValueError(f"config file {path!r} defines no get_config(arg)")
  config = module.get_config(arg) if ":" in spec else module.get_config()  # as config_flags calls it
  if not isinstance(config, ml_collections.ConfigDict):
    raise ValueError(f"{path}: get_config() returned {type(config).__name__}, not a ConfigDict")
  return config.lock()


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


def load_saved(workdir: str) -> ml_collections.ConfigDict:
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
  """A locked copy of `config` with dotted fields set, e.g. {'eval.seq_len': '512', 'seed': 1}.

  config_flags' semantics: a string is parsed to the field's type (as `--config.eval.seq_len=512` is: absl's
  int / float / bool parsers, a tuple literal for tuples; str fields take it as is); any other value must have
  the field's type (an int is accepted for a float). Unknown fields (listing the valid ones of that section)
  and wrong types raise ValueError; the input is not modified."""
  config = ml_collections.ConfigDict(to_dict(config))
  for key, value in overrides.items():
    node, leaf = _parent(config, key)
    node[leaf] = parse_value(key, node[leaf], value)
  return config.lock()


def _parent(config: ml_collections.ConfigDict, key: str) -> tuple[ml_collections.ConfigDict, str]:
  """The section holding dotted `key` and the leaf name; unknown names raise ValueError."""
  *parents, leaf = key.split(".")
  node = config
  for i, name in enumerate(parents + [leaf]):
    child = node.get(name) if isinstance(node, ml_collections.ConfigDict) else None
    if name not in node or (i < len(parents) and not isinstance(child, ml_collections.ConfigDict)):
      section = ".".join(parents[:i]) or "top level"
      near = _suggest(config, parents + [leaf])  # the whole key, else the nearest name at this level
      if near is None and name not in node and nearest(name, node.keys()):
        near = ".".join(parents[:i] + [nearest(name, node.keys())])
      hint = f" did you mean {near!r}?" if near else ""
      raise ValueError(f"unknown config field {key!r};{hint} valid fields at {section}: "
                       f"{', '.join(sorted(node.keys()))}")
    if i < len(parents):
      node = child
  return node, leaf


def _suggest(config: ml_collections.ConfigDict, names: Sequence[str]) -> str | None:
  """The existing dotted field nearest to a mistyped one, name by name ('trian.num_step' -> 'train.num_steps'),
  or None where some name has no close match."""
  node, out = config, []
  for i, name in enumerate(names):
    if not isinstance(node, ml_collections.ConfigDict):
      return None
    name = name if name in node else nearest(name, node.keys())
    if name is None:
      return None
    out.append(name)
    node = node[name]
  leaf_ok = not isinstance(node, ml_collections.ConfigDict)
  return ".".join(out) if leaf_ok and out != list(names) else None


_PARSERS = {bool: flags.BooleanParser(), int: flags.IntegerParser(), float: flags.FloatParser(),
            tuple: tuple_parser.TupleParser()}


def parse_value(key: str, old: Any, value: Any) -> Any:
  """`value` for a field now holding `old`: a string parsed to old's type, anything else type-checked."""
  kind = type(old)
  if isinstance(value, str) and kind is not str:
    if kind in _PARSERS:
      try:
        return _PARSERS[kind].parse(value)
      except ValueError:
        what = "a bool (true/false)" if kind is bool else kind.__name__
        raise ValueError(f"{key} expects {what}, got {value!r}") from None
    if old is not None and not isinstance(old, list):
      raise ValueError(f"{key} holds a {kind.__name__}, which cannot be set from a string")
    try:
      value = ast.literal_eval(value)  # None and list fields: a Python literal
    except (ValueError, SyntaxError):
      if old is not None:
        raise ValueError(f"{key} expects a list literal, got {value!r}") from None
      return value
  if old is None:
    return value
  if kind is bool or isinstance(value, bool):
    ok = kind is bool and isinstance(value, (bool, np.bool_))
  elif kind in (int, float):
    ok = isinstance(value, (int, np.integer) if kind is int else (int, float, np.integer, np.floating))
  elif kind in (tuple, list):
    ok = isinstance(value, (tuple, list))
  else:
    ok = isinstance(value, kind)
  if not ok:
    raise ValueError(f"{key} expects {kind.__name__}, got {value!r} ({type(value).__name__})")
  return kind(value) if kind in (bool, int, float, tuple, list) else value


def override_args(argv: Sequence[str]) -> tuple[dict[str, str], list[str]]:
  """Splits `--config.a.b=value` arguments (raw strings, for apply_overrides) from the other arguments."""
  overrides, rest = {}, []
  for arg in argv:
    if arg.startswith("--config."):
      key, eq, value = arg[len("--config."):].partition("=")
      if not eq:
        raise ValueError(f"write config overrides as --config.{key}=VALUE")
      overrides[key] = value
    else:
      rest.append(arg)
  return overrides, rest


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
