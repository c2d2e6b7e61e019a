"""Parameter counts of the LM a config builds, and the width at which a mixer matches a reference's count
(the LM study compares mixers at equal parameter count)."""
from typing import Sequence

from flax import nnx
import jax
import ml_collections

from linear_seq import config_lib
from linear_seq import data
from linear_seq import model as model_lib


def num_params(config: ml_collections.ConfigDict, vocab_size: int) -> int:
  """Trainable parameters of the LM of `config.model` (an abstract init: no compute, no memory)."""
  cfg = model_lib.ModelConfig.from_config(config.model, vocab_size=vocab_size)
  lm = nnx.eval_shape(lambda: model_lib.LM(cfg, rngs=nnx.Rngs(0)))
  return sum(x.size for x in jax.tree.leaves(nnx.state(lm, nnx.Param)))


def matched_widths(config: ml_collections.ConfigDict, mixers: Sequence[str], widths: Sequence[int],
                   reference: tuple[str, int]) -> dict[str, int]:
  """{mixer: the width in `widths` whose parameter count is nearest that of `reference` = (mixer, width)};
  ties go to the width nearest the reference's."""
  vocab_size = data.dataset_info(config.data).vocab_size  # read once: each read logs the TFDS dataset info

  def count(mixer: str, width: int) -> int:
    return num_params(config_lib.apply_overrides(config, {"model.mixer": mixer, "model.d_model": width}),
                      vocab_size)

  target = count(*reference)
  return {m: min(widths, key=lambda w, m=m: (abs(count(m, w) - target), abs(w - reference[1]))) for m in mixers}
