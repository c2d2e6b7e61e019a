"""linear_seq: efficient sequence mixers in JAX/Flax.

  run = linear_seq.load(workdir)     # a trained run in Python (api.py)
  @linear_seq.mixers.register("mine"), @linear_seq.data.register_dataset("mine"),
  @linear_seq.data.register_tokenizer("mine")   # plug-ins (plugins.py; --config.imports=your_module)

Submodules and `load` are imported on first use, so `import linear_seq` stays cheap.
"""
import importlib

__version__ = "0.1.0"

_SUBMODULES = ("api", "data", "mixers", "model", "ops", "plugins")


def __getattr__(name: str):
  if name == "load":
    from linear_seq.api import load  # pylint: disable=g-import-not-at-top
    return load
  if name in _SUBMODULES:
    return importlib.import_module(f"linear_seq.{name}")
  raise AttributeError(f"module 'linear_seq' has no attribute {name!r}")
