"""Config files, typed options, config.json round trip and command-line style overrides."""
import json
import os
import re
import sys

from absl import flags
import ml_collections
from ml_collections import config_flags
import numpy as np
import pytest

from linear_seq import config_lib

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "configs")


def load(name: str, arg: str = "") -> ml_collections.ConfigDict:
  return config_lib.load_sibling(os.path.join(CONFIGS, f"{name}.py"), name).get_config(arg)


def test_parse_arg_types():
  assert config_lib.parse_arg("mixer=gla,tiny=True,n=3,lr=1e-3,off=False") == {
      "mixer": "gla", "tiny": True, "n": 3, "lr": 1e-3, "off": False}
  assert config_lib.parse_arg("") == {}
  with pytest.raises(ValueError, match="not key=value"):
    config_lib.parse_arg("tiny")


@pytest.mark.parametrize("arg, valid, expected", [
    ("mixer=gla,tiny=True", ("mixer", "tiny"), {"mixer": "gla", "tiny": True}),
    ("", ("tiny",), {}),
    ("tny=True", ("mixer", "tiny"), r"unknown config option\(s\) tny \(did you mean tiny\?\); valid: mixer, tiny"),
    ("tny=1,mxr=2,zz=3", ("mixer", "tiny"),
     r"option\(s\) mxr, tny, zz \(did you mean mixer for mxr, tiny for tny\?\); valid: mixer, tiny"),
    ("zz=3", ("mixer", "tiny"), r"unknown config option\(s\) zz; valid: mixer, tiny"),
    ("tiny", ("tiny",), "not key=value"),
])
def test_parse_options(arg, valid, expected):
  """parse_arg then check_options: what every config file's get_config(arg) starts with."""
  if isinstance(expected, dict):
    assert config_lib.parse_options(arg, valid) == expected
  else:
    with pytest.raises(ValueError, match=expected):
      config_lib.parse_options(arg, valid)


@pytest.mark.parametrize("key, hint", [
    ("train.num_step", "did you mean 'train.num_steps'?"),
    ("trian.num_step", "did you mean 'train.num_steps'?"),  # every name of the key corrected
    ("trian.lr", "did you mean 'train'?"),  # no field near 'lr': the section alone
    ("modl.mixr", "did you mean 'model.mixer'?"),
    ("model.zzzz", None),  # nothing close: the valid fields only
    ("seed.x", None),  # 'seed' exists but is no section
])
def test_unknown_fields_suggest_the_nearest_valid_name(key, hint):
  with pytest.raises(ValueError) as e:
    config_lib.apply_overrides(load("default"), {key: "1"})
  message = str(e.value)
  assert message.startswith(f"unknown config field {key!r};") and "valid fields at" in message
  assert (hint in message) if hint else ("did you mean" not in message), message


def test_flatten():
  assert config_lib.flatten({"model": {"mixer": "gla", "ssm": {"n": 4}}, "seed": 0}) == {
      "model.mixer": "gla", "model.ssm.n": 4, "seed": 0}
  assert config_lib.flatten({}) == {}


def test_every_default_config_field_has_its_own_comment():
  """configs/default.py: one field per line, each with its own comment line directly above it."""
  with open(os.path.join(CONFIGS, "default.py")) as f:
    lines = f.read().splitlines()
  fields = [i for i, line in enumerate(lines) if re.match(r"  [mc](\.\w+)+ = ", line)
            and not re.search(r"= (ml_collections\.ConfigDict|model_config)\(\)", line)]
  assert len(fields) == len(config_lib.flatten(load("default").to_dict()))
  uncommented = [lines[i].strip() for i in fields if not lines[i - 1].lstrip().startswith("#")]
  assert not uncommented, f"fields without their own comment line: {uncommented}"


def test_config_files_options():
  default, mqar = load("default", "mixer=retention,tiny=True"), load("mqar", "mixer=softmax")
  assert default.model.mixer == "retention" and default.train.num_steps <= 10
  assert (mqar.data.dataset, mqar.data.vocab_size, mqar.data.seq_len, mqar.model.mlp_ratio) == ("mqar", 1024, 64, 0)
  assert mqar.model.mixer == "softmax" and mqar.model.conv_width == 4
  with pytest.raises(ValueError, match=r"unknown config option.*tny \(did you mean tiny\?\); valid: mixer, point, setup, tiny"):
    load("mqar", "tny=True")
  with pytest.raises(ValueError, match=r"unknown setup '2025'; valid: zoology, block-conv \(aliases: 2026-12, 2026-11\)"):
    load("mqar", "setup=2025")
  old = load("mqar", "setup=block-conv")
  assert (old.model.conv_on, old.model.tie_embeddings, old.train.learning_rate) == ("input", True, 1e-2)
  assert (mqar.model.conv_on, mqar.model.tie_embeddings, mqar.train.learning_rate) == ("qkv", False, 1e-3)
  assert load("mqar", "setup=2026-11") == old and load("mqar", "setup=2026-12") == load("mqar", "setup=zoology")
  hard = load("mqar", "point=hard")
  assert (hard.data.seq_len, hard.data.num_kv_pairs, hard.train.loss_positions, hard.train.num_steps) == (128, 8, 8, 1500)


def test_string_fields_default_to_empty_not_none():
  nones = [k for k, v in config_lib.flatten(load("default").to_dict()).items() if v is None]
  assert not nones, f"None fields cannot be overridden from the command line: {nones}"


def test_config_json_round_trip_keeps_types(tmp_path):
  config = load("mqar", "tiny=True")
  config.train.learning_rate = 1.0  # a float holding an integral value stays a float
  config_lib.save_config(config, str(tmp_path))
  restored = config_lib.load_saved(str(tmp_path))
  assert config_lib.load_config(str(tmp_path)).to_dict() == restored.to_dict()  # a workdir is a config spec too
  assert restored.to_dict() == config.to_dict()
  assert type(restored.train.learning_rate) is float and type(restored.train.num_steps) is int
  assert type(restored.model.tie_embeddings) is bool and restored.model.layer_mixers == ""
  with pytest.raises(AttributeError):  # locked: a typo fails
    restored.model.mixr = "gla"
  assert json.load(open(tmp_path / "config.json"))["data"]["dataset"] == "mqar"


def test_load_config_missing_and_invalid(tmp_path):
  with pytest.raises(FileNotFoundError, match="no config.json"):
    config_lib.load_saved(str(tmp_path))
  (tmp_path / "config.json").write_text("{not json")
  with pytest.raises(ValueError, match="not valid JSON"):
    config_lib.load_saved(str(tmp_path))


def test_apply_overrides_casts_and_rejects_unknown_fields():
  config = load("default")
  out = config_lib.apply_overrides(config, {"eval.seq_len": "512", "train.learning_rate": "1",
                                            "model.tie_embeddings": "false", "model.mixer": "s4"})
  assert out.eval.seq_len == 512 and out.train.learning_rate == 1.0 and type(out.train.learning_rate) is float
  assert out.model.tie_embeddings is False and out.model.mixer == "s4"
  assert config.eval.seq_len == 0  # the input is not modified
  with pytest.raises(ValueError, match=r"unknown config field 'eval.seqlen'; did you mean 'eval.seq_len'\? "
                     r"valid fields at eval: batch_size"):
    config_lib.apply_overrides(config, {"eval.seqlen": "1"})
  with pytest.raises(ValueError, match="unknown config field 'evl.seq_len'.*top level"):
    config_lib.apply_overrides(config, {"evl.seq_len": "1"})
  with pytest.raises(ValueError, match="eval.seq_len expects int, got 'x'"):
    config_lib.apply_overrides(config, {"eval.seq_len": "x"})
  with pytest.raises(ValueError, match="expects a bool"):
    config_lib.apply_overrides(config, {"train.fsdp": "maybe"})
  with pytest.raises(AttributeError):  # the result is locked
    out.model.mixr = "gla"


def test_load_config_spec(tmp_path):
  """'path.py[:args]' -> get_config(args), locked; bad specs fail with one line."""
  path = os.path.join(CONFIGS, "default.py")
  assert config_lib.load_config(path).to_dict() == load("default").to_dict()
  tiny = config_lib.load_config(f"{path}:mixer=retention,tiny=True")
  assert tiny.to_dict() == load("default", "mixer=retention,tiny=True").to_dict()
  with pytest.raises(AttributeError):
    tiny.model.mixr = "gla"
  with pytest.raises(ValueError, match="unknown config option.*tny"):
    config_lib.load_config(f"{path}:tny=True")
  with pytest.raises(ValueError, match="config file not found: '/nonexistent/c.py'"):
    config_lib.load_config("/nonexistent/c.py:tiny=True")
  with pytest.raises(ValueError, match=r"a \.py file optionally followed by ':args', got 'configs/default'"):
    config_lib.load_config("configs/default")
  (tmp_path / "empty.py").write_text("X = 1\n")
  with pytest.raises(ValueError, match="defines no get_config"):
    config_lib.load_config(str(tmp_path / "empty.py"))


# Command-line strings that config_flags parses to each field's type (and str fields take verbatim).
_FLAG_STRINGS = {"eval.seq_len": "512", "train.learning_rate": "1", "train.b2": "9.5e-1",
                 "model.tie_embeddings": "false", "train.fsdp": "1", "model.mixer": "s4", "model.decay": "0.5,0.9", "seed": "3",
                 "data.num_train": "0x10", "model.normalize": "True", "model.dt_min": "2e-3"}


def test_apply_overrides_parses_strings_as_config_flags_does(monkeypatch):
  """The same strings given as --config.k=v flags to a config_flags flag give the same config."""
  path = os.path.join(CONFIGS, "default.py")
  argv = ["prog", f"--config={path}:tiny=True", *(f"--config.{k}={v}" for k, v in _FLAG_STRINGS.items())]
  monkeypatch.setattr(sys, "argv", argv)  # config_flags reads the overrides from sys.argv
  values = flags.FlagValues()
  config_flags.DEFINE_config_file("config", None, "", flag_values=values, lock_config=True)
  values(argv)
  ours = config_lib.apply_overrides(config_lib.load_config(f"{path}:tiny=True"), _FLAG_STRINGS)
  assert ours.to_dict() == values.config.to_dict()
  flat = config_lib.flatten(ours.to_dict())
  assert {k: type(flat[k]) for k in _FLAG_STRINGS} == {k: type(v) for k, v in
                                                       config_lib.flatten(values.config.to_dict()).items()
                                                       if k in _FLAG_STRINGS}
  assert (flat["data.num_train"], flat["model.normalize"], flat["train.fsdp"]) == (16, "True", True)


@pytest.mark.parametrize("key, value, expected", [
    ("train.learning_rate", 1, 1.0),  # an int for a float field becomes a float
    ("eval.seq_len", np.int64(7), 7),
    ("model.vector_gate", False, False),
    ("eval.seq_len", 1.5, "eval.seq_len expects int, got 1.5 .float."),
    ("eval.seq_len", True, "eval.seq_len expects int, got True .bool."),
    ("train.fsdp", 1, "train.fsdp expects bool, got 1 .int."),
    ("model.mixer", 3, "model.mixer expects str, got 3 .int."),
    ("model", "x", "model holds a ConfigDict, which cannot be set from a string"),
    ("seed.x", 1, "unknown config field 'seed.x'; valid fields at top level: data, eval, imports, mesh, model, seed, train"),
])
def test_apply_overrides_type_checks_values(key, value, expected):
  config = load("default")
  if isinstance(expected, str):
    with pytest.raises(ValueError, match=expected):
      config_lib.apply_overrides(config, {key: value})
  else:
    out = config_lib.flatten(config_lib.apply_overrides(config, {key: value}).to_dict())[key]
    assert out == expected and type(out) is type(expected)


def test_override_args():
  assert config_lib.override_args(["--workdir=w", "--config.eval.seq_len=512", "--config.model.decay=0.5,0.9",
                                   "--step=3"]) == ({"eval.seq_len": "512", "model.decay": "0.5,0.9"},
                                                    ["--workdir=w", "--step=3"])
  with pytest.raises(ValueError, match="write config overrides as --config.eval.seq_len=VALUE"):
    config_lib.override_args(["--config.eval.seq_len"])


def test_diff():
  a, b = load("default"), load("default", "mixer=s4")
  assert config_lib.diff(a, b) == ["model.mixer"]
