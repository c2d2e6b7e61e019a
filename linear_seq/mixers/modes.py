"""One `model.mode` for every layer of a hybrid: each family maps the other family's form to its own.

Linear mixers run ops.MODES (recurrent | parallel | chunk | assoc), S4 runs ops.SSM_MODES
(fft | scan | assoc). A config's mode names one form; layers of the other family use the equivalent:
scan ↔ recurrent, fft ↔ chunk (the training form), parallel → fft for S4, assoc ↔ assoc.
"""
_TO_LINEAR = {"fft": "chunk", "scan": "recurrent"}
_TO_SSM = {"chunk": "fft", "parallel": "fft", "recurrent": "scan"}


def linear_mode(mode: str) -> str:
  """The linear-recurrence form for a config mode ('' stays '' = the mixer's default)."""
  return _TO_LINEAR.get(mode, mode)


def ssm_mode(mode: str) -> str:
  """The SSM form for a config mode ('' stays '' = the mixer's default)."""
  return _TO_SSM.get(mode, mode)
