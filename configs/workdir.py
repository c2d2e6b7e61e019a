"""The config a workdir was trained with (its config.json), e.g. to train on in a workdir made by
linear_seq.convert (a converted Hugging Face model):

  python -m linear_seq.main --config=configs/workdir.py:WORKDIR --workdir=WORKDIR --config.train.num_steps=N
"""
from linear_seq import config_lib


def get_config(arg: str = ""):
  if not arg:
    raise ValueError("configs/workdir.py needs the workdir: --config=configs/workdir.py:WORKDIR")
  return config_lib.load_saved(arg)
