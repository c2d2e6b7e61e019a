"""Parameter counts of the LM a config builds, and the width at which a mixer matches a reference's count
(the LM study compares mixers at equal parameter count)."""
import functools
from typing import Callable, Mapping, Sequence

from flax import nnx
import jax
import ml_collections

from linear_seq import config_lib
from linear_seq import data
from linear_seq import model as model_lib


def num_params(config: ml_collections.ConfigDict, vocab_size: int) -> int:
  """Trainable parameters of the LM of `config.model` (an abstract init: no compute, no memory)."""
  return _num_params(model_lib.ModelConfig.from_config(config.model, vocab_size=vocab_size))


@functools.lru_cache(maxsize=4096)
def _num_params(cfg: model_lib.ModelConfig) -> int:
  """Cached per model config: a study config's width matching counts the same models many times."""
  lm = nnx.eval_shape(lambda: model_lib.LM(cfg, rngs=nnx.Rngs(0)))
  return sum(x.size for x in jax.tree.leaves(nnx.state(lm, nnx.Param)))


def matched_widths(config: ml_collections.ConfigDict, mixers: Sequence[str | dict], widths: Sequence[int],
                   reference: tuple[str | dict, int]) -> list[int] | dict[str, int]:
  """The width in `widths` whose parameter count is nearest that of `reference` = (mixer, width), per mixer;
  ties go to the width nearest the reference's. A mixer is a name or an arm's overrides (e.g. {'model.mixer':
  'deltanet', 'model.delta_gate': 'scalar'}); widths at which an arm's model cannot be built are skipped.
  Returns {name: width} for names, else the widths as a list in the order of `mixers`."""
  vocab_size = data.dataset_info(config.data).vocab_size  # read once: each read logs the TFDS dataset info

  def arm(m) -> dict:
    return {"model.mixer": m} if isinstance(m, str) else dict(m)

  def count(m, width: int) -> int | None:
    try:
      return num_params(config_lib.apply_overrides(config, {**arm(m), "model.d_model": width}), vocab_size)
    except ValueError:  # e.g. a head size the arm cannot divide the width into
      return None

  target = count(reference[0], reference[1])
  if target is None:
    raise ValueError(f"the reference {reference} does not build")

  def best(m) -> int:
    counts = {w: count(m, w) for w in widths}
    ok = [w for w in widths if counts[w] is not None]
    if not ok:
      raise ValueError(f"{arm(m)} builds at none of the widths {list(widths)}")
    return min(ok, key=lambda w: (abs(counts[w] - target), abs(w - reference[1])))

  if all(isinstance(m, str) for m in mixers):
    return {m: best(m) for m in mixers}
  return [best(m) for m in mixers]


def matched_cells(config: ml_collections.ConfigDict, arms: Mapping[str, dict], widths: Sequence[int],
                  reference: Callable[[str], dict], reference_widths: Sequence[int]) -> dict[tuple[str, int], int]:
  """{(arm, reference width): the arm's width} for each reference width, then each arm: matched_widths against
  the arm's reference model (reference(arm): its overrides) at that width. The arms sharing a reference are
  matched together, in the order their references first appear, each group in `arms`' order."""
  groups: dict[str, list[str]] = {}
  for arm in arms:
    groups.setdefault(repr(sorted(reference(arm).items())), []).append(arm)
  out = {}
  for ref in reference_widths:
    for names in groups.values():
      got = matched_widths(config, [arms[a] for a in names], widths, (reference(names[0]), ref))
      out.update(zip([(a, ref) for a in names], got))
  return out
