"""The config a workdir was trained with (its config.json), e.g. to train on in a workdir made by
linear_seq.convert (a converted Hugging Face model), or to fine-tune from it into a new workdir:

  python -m linear_seq.main --config=configs/workdir.py:WORKDIR --workdir=WORKDIR --config.train.num_steps=N
  python -m linear_seq.main --config=configs/workdir.py:WORKDIR --workdir=NEW --config.train.init_from=WORKDIR

Fields that config.json lacks (added to the code after the workdir was written) take configs/default.py's
values, which reproduce the older behaviour, so they can be overridden like any other field.
"""
import ml_collections

from linear_seq import config_lib


def get_config(arg: str = ""):
  if not arg:
    raise ValueError("configs/workdir.py needs the workdir: --config=configs/workdir.py:WORKDIR")
  defaults = config_lib.to_dict(config_lib.load_sibling(__file__, "default").get_config())
  return ml_collections.ConfigDict(_fill(config_lib.to_dict(config_lib.load_saved(arg)), defaults)).lock()


def _fill(saved: dict, defaults: dict) -> dict:
  """`saved` with the fields only `defaults` has added (recursively); saved values win."""
  out = dict(saved)
  for key, value in defaults.items():
    if key not in out:
      out[key] = value
    elif isinstance(value, dict) and isinstance(out[key], dict):
      out[key] = _fill(out[key], value)
  return out
