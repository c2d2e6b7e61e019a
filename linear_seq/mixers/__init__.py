"""Sequence mixers as Flax NNX modules, selected by name.

Every mixer owns its parameters and projections and calls one op from `linear_seq.ops`:
  cls = mixers.get(name); mixer = cls.from_config(model_config, rngs=rngs)   (or cls(d_model, ...))
  y [B,T,D], state = mixer(x [B,T,D], *, state=None, segment_ids=None)
  state = mixer.init_state(batch_size, max_len);  n = mixer.state_size(seq_len)  (floats per sequence)
state=None starts fresh and the call returns the state after the last token; segment_ids int [B,T]
marks packed documents (a change of id starts a document: linear mixers and S4 reset their state,
softmax masks across documents). Mixers with `owns_short_conv = True` (deltanet, deltaproduct, mamba2) apply their own
short convs and need the block's model.conv_width = 0.

A user's mixer (same interface) registers from its own module: `@linear_seq.mixers.register('mine')` on the
class, then `--config.imports=my_module --config.model.mixer=mine` (see examples/).
`check_mixer(name | class | config)` runs the contract the test suite holds every mixer to (mixers/contract.py).
"""
from linear_seq import checks
from linear_seq.mixers.deltanet import DeltaNet
from linear_seq.mixers.deltaproduct import DeltaProduct
from linear_seq.mixers.gla import GatedLinearAttention
from linear_seq.mixers.linear import LinearAttention
from linear_seq.mixers.contract import check_mixer, ContractReport, MixerContractError
from linear_seq.mixers.mamba2 import Mamba2
from linear_seq.mixers.random_projection import RandomProjection
from linear_seq.mixers.retention import Retention
from linear_seq.mixers.s4 import S4D
from linear_seq.mixers.softmax import SoftmaxAttention

MIXERS = {
    "softmax": SoftmaxAttention,
    "linear": LinearAttention,
    "retention": Retention,
    "gla": GatedLinearAttention,
    "s4": S4D,
    "deltanet": DeltaNet,
    "deltaproduct": DeltaProduct,
    "mamba2": Mamba2,
}


def register(name: str):
  """Class decorator adding a mixer class to MIXERS under `name`."""
  return checks.registrar(MIXERS, name)


def get(name: str) -> type:
  """The mixer class registered under `name`; ValueError listing the valid names otherwise."""
  return checks.lookup("mixer", MIXERS, name)


__all__ = ["MIXERS", "get", "register", "check_mixer", "ContractReport", "MixerContractError",
           "RandomProjection", "SoftmaxAttention", "LinearAttention", "Retention",
           "GatedLinearAttention", "S4D", "DeltaNet", "DeltaProduct", "Mamba2"]
