"""The transitions a trained Mamba-2 applies to its state, per input token: does it use the negative range?

  python experiments/state_tracking/transitions.py runs/state_tracking_p/*mamba2*parity*

For each workdir (a trained run whose mixers include mamba2): the first 64 sequences of its task's validation
split (lengths drawn from the training lengths), passed through the model; for each mamba2 layer and head, the mean
transition α_t (Mamba2.transition: exp(Δ_t A), or 2 exp(Δ_t A) − 1 with negative eigenvalues) at the positions
holding each input token (the tokens that occur in the task's inputs), and its minimum. Parity needs
α ≈ −1 at the 1s and α ≈ +1 at the 0s in some head (Grazzi et al. 2025); a run that never leaves
(0, 1] tracks no sign. Prints one markdown row per run, layer and head.
"""
import sys

from flax import nnx
import jax.numpy as jnp
import numpy as np

import linear_seq
from linear_seq import data
from linear_seq.mixers.mamba2 import Mamba2
from linear_seq.studies import common

NUM_SEQUENCES = 64


def transitions(model, tokens: np.ndarray) -> list[tuple[int, np.ndarray]]:
  """[(layer, α [B, T, H])] for each mamba2 layer of the LM, on tokens [B, T] (the blocks run in turn, so each
  layer sees its own input)."""
  layers = [i for i, block in enumerate(model.blocks) if isinstance(block.mixer, Mamba2)]
  return [(i, np.asarray(a)) for i, a in zip(layers, _alphas(model, jnp.asarray(tokens, jnp.int32)))]


@nnx.jit
def _alphas(model, tokens):
  x, out = model.embed(tokens), []
  for block in model.blocks:
    if isinstance(block.mixer, Mamba2):
      out.append(block.mixer.transition(block.mixer_norm(x)))
    x, _ = block(x)
  return out


def rows(workdir: str) -> list[list[str]]:
  """The table's rows for one trained workdir: run, seed, layer, head, mean α per input token, min α."""
  run = linear_seq.load(workdir)
  config = run.config
  if run.model.pos_embed is not None:
    raise ValueError(f"{workdir} adds learned positions; this probe reads token-only inputs")
  batch = next(data.make_iterator(config.data, "validation", batch_size=NUM_SEQUENCES,
                                  seq_len=int(config.data.seq_len), seed=0, repeat=False))
  tokens, weights = np.asarray(batch["inputs"]), np.asarray(batch["weights"]) > 0
  found = transitions(run.model, tokens)
  if not found:
    raise ValueError(f"{workdir} has no mamba2 layer (model.mixer={config.model.mixer!r}, "
                     f"layer_mixers={config.model.layer_mixers!r})")
  name = ",".join(f"{k}={v}" for k, v in sorted(_changes(config).items()))
  out = []
  for layer, alpha in found:
    for h in range(alpha.shape[-1]):
      a = alpha[..., h]
      per_token = [f"{a[(tokens == t) & weights].mean():+.3f}" for t in np.unique(tokens[weights])]
      out.append([name, str(config.seed), str(layer), str(h), " / ".join(per_token), f"{a[weights].min():+.3f}"])
  return out


def _changes(config) -> dict:
  """The model fields that tell the check's runs apart."""
  m = config.model
  return {"neg": m.negative_eigenvalues, "d_model": m.d_model, "head_dim": m.mamba_head_dim,
          "lr": config.train.learning_rate, "steps": config.train.num_steps, "dt_max": m.dt_max, "mode": m.mode}


def main(workdirs: list[str]) -> None:
  common.print_probe(["run", "seed", "layer", "head", "mean α at each input token (0 / 1 / …)", "min α"], rows,
                     workdirs)


if __name__ == "__main__":
  main(sys.argv[1:])
