"""Parameter initialization schemes applied to a built LM (`model.init`).

'default': every module's own initializer (nnx.Linear: LeCun normal, std 1/√fan_in; embeddings N(0, 0.02)).
'gpt2': GPT-2's scheme (Radford et al. 2019; nanoGPT, Zoology): every nnx.Linear kernel ~ N(0, 0.02²), biases
0, and the projections that write into the residual stream (OUTPUT_PROJECTIONS: mixer outputs and the MLP's
down projection) scaled by 1/√(2·num_layers). Other parameters (norm scales, short-conv taps, SSM and gate
parameters that are not nnx.Linear) keep their own initialization.
'torch': the published Mamba-2 init of the mixers' projections, around the 'gpt2' model. Every nnx.Linear
inside a block's mixer gets PyTorch's nn.Linear default, kernel ~ U(±1/√fan_in) (kaiming_uniform with a = √5;
std 1/√(3·fan_in)), biases 0, the output projection not rescaled: what mamba_ssm's Mamba2 layer and HF's
Mamba2Mixer leave in_proj and out_proj at (HF's Mamba2Config has rescale_prenorm_residual=False; mamba_ssm's
MixerModel rescales out_proj, 'mamba_ssm' below). Everything outside the mixers (the head, MLPs) as 'gpt2';
embeddings and the mixers' non-Linear parameters (A, Δ's bias, D, conv taps, norms) keep their own init.
'mamba_ssm': 'torch' with each mixer's output projection divided by √(n·num_layers), n = 2 with an MLP else 1
(mamba_ssm's MixerModel: rescale_prenorm_residual=True, n_residuals_per_layer).
'torch_in', 'torch_out': the factors between 'gpt2' and 'torch' apart: the mixers' in-projections (every mixer
Linear but its output projection) from 'torch' and the output projections from 'gpt2' (torch_in), or the
reverse (torch_out). Outside the mixers both are 'gpt2'.
Every scheme draws layer i's kernel from fold_in(key, i), i in nnx.iter_graph order, so the schemes share their
random keys ('gpt2' draws exactly as before the other schemes existed).
"""
import math

import jax
import jax.numpy as jnp
from flax import nnx

from linear_seq.checks import check_choice

SCHEMES = ("default", "gpt2", "torch", "mamba_ssm", "torch_in", "torch_out")
OUTPUT_PROJECTIONS = ("o_proj", "out_proj", "down")  # attribute names of residual-stream writers
STD = 0.02
# Scheme -> (rule of a mixer's in-projections, rule of a mixer's output projection). Outside the mixers every
# scheme but 'default' is 'gpt2'.
_MIXER_RULES = {
    "gpt2": ("gpt2", "gpt2"),
    "torch": ("torch", "torch"),
    "mamba_ssm": ("torch", "torch_rescaled"),
    "torch_in": ("torch", "gpt2"),
    "torch_out": ("gpt2", "torch"),
}


def in_mixer(path) -> bool:
  """Whether a module path from nnx.iter_graph(lm) lies inside a block's mixer (('blocks', i, 'mixer', ...))."""
  return "mixer" in [str(p) for p in path]


def _draw(rule: str, key: jax.Array, shape, dtype, *, num_layers: int, mlp: bool, output: bool) -> jax.Array:
  if rule == "gpt2":
    std = STD / math.sqrt(2 * num_layers) if output else STD
    return std * jax.random.normal(key, shape, dtype)
  bound = 1.0 / math.sqrt(shape[0])  # the kernel is [fan_in, fan_out]
  if rule == "torch_rescaled":
    bound /= math.sqrt((2 if mlp else 1) * num_layers)
  return jax.random.uniform(key, shape, dtype, -bound, bound)


def apply(lm: nnx.Module, scheme: str, *, num_layers: int, key: jax.Array) -> None:
  """Re-initializes lm's parameters in place under `scheme` ('default' leaves them as built)."""
  check_choice("model.init", scheme, SCHEMES)
  if scheme == "default":
    return
  mix_in, mix_out = _MIXER_RULES[scheme]
  linears = [(path, m) for path, m in nnx.iter_graph(lm) if isinstance(m, nnx.Linear)]
  mlp = any("mlp" in [str(p) for p in path] for path, _ in linears)
  for i, (path, layer) in enumerate(linears):
    output = bool(path) and str(path[-1]) in OUTPUT_PROJECTIONS
    rule = (mix_out if output else mix_in) if in_mixer(path) else "gpt2"
    kernel = layer.kernel[...]
    layer.kernel[...] = _draw(rule, jax.random.fold_in(key, i), kernel.shape, kernel.dtype,
                              num_layers=num_layers, mlp=mlp, output=output)
    if layer.bias is not None:
      layer.bias[...] = jnp.zeros_like(layer.bias[...])
