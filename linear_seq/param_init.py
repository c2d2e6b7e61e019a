"""Parameter initialization schemes applied to a built LM (`model.init`).

'default': every module's own initializer (nnx.Linear: LeCun normal, std 1/√fan_in; embeddings N(0, 0.02)).
'gpt2': GPT-2's scheme (Radford et al. 2019; nanoGPT, Zoology): every nnx.Linear kernel ~ N(0, 0.02²), biases
0, and the projections that write into the residual stream (OUTPUT_PROJECTIONS: mixer outputs and the MLP's
down projection) scaled by 1/√(2·num_layers). Other parameters (norm scales, short-conv taps, SSM and gate
parameters that are not nnx.Linear) keep their own initialization.
"""
import math

import jax
import jax.numpy as jnp
from flax import nnx

from linear_seq.checks import check_choice

SCHEMES = ("default", "gpt2")
OUTPUT_PROJECTIONS = ("o_proj", "out_proj", "down")  # attribute names of residual-stream writers
STD = 0.02


def apply(lm: nnx.Module, scheme: str, *, num_layers: int, key: jax.Array) -> None:
  """Re-initializes lm's parameters in place under `scheme` ('default' leaves them as built)."""
  check_choice("model.init", scheme, SCHEMES)
  if scheme == "default":
    return
  out_std = STD / math.sqrt(2 * num_layers)
  linears = [(path, m) for path, m in nnx.iter_graph(lm) if isinstance(m, nnx.Linear)]
  for i, (path, layer) in enumerate(linears):
    std = out_std if path and str(path[-1]) in OUTPUT_PROJECTIONS else STD
    kernel = layer.kernel[...]
    layer.kernel[...] = std * jax.random.normal(jax.random.fold_in(key, i), kernel.shape, kernel.dtype)
    if layer.bias is not None:
      layer.bias[...] = jnp.zeros_like(layer.bias[...])
