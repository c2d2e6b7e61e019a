"""params.py: the abstract parameter count equals a real init's, and matched widths pick the nearest count."""
import os

import jax
from flax import nnx

from linear_seq import config_lib
from linear_seq import model as model_lib
from linear_seq.studies import params

CONFIGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "configs")
TINY = config_lib.load_config(os.path.join(CONFIGS, "mqar.py") + ":tiny=True")  # vocab 64, width 16


def _count(mixer: str, width: int) -> int:
  c = config_lib.apply_overrides(TINY, {"model.mixer": mixer, "model.d_model": width})
  return params.num_params(c, 64)


def test_num_params_equals_a_real_init():
  c = config_lib.apply_overrides(TINY, {"model.mixer": "gla", "model.d_model": 24})
  lm = model_lib.LM(model_lib.ModelConfig.from_config(c.model, vocab_size=64), rngs=nnx.Rngs(0))
  assert params.num_params(c, 64) == sum(x.size for x in jax.tree.leaves(nnx.state(lm, nnx.Param))) > 0


def test_matched_widths_are_the_nearest_counts():
  widths = (8, 16, 24, 32)
  got = params.matched_widths(TINY, ["softmax", "gla", "retention"], widths, ("softmax", 16))
  assert got["softmax"] == 16  # the reference matches itself
  target = _count("softmax", 16)
  for mixer in ("gla", "retention"):
    gaps = {w: abs(_count(mixer, w) - target) for w in widths}
    assert gaps[got[mixer]] == min(gaps.values()), (mixer, gaps)


def test_matched_cells_match_each_arm_to_its_own_reference_at_each_width():
  arms = {"gla": {"model.mixer": "gla"}, "s-ref": {"model.mixer": "softmax"}, "retention": {"model.mixer": "retention"}}
  reference = lambda arm: {"model.mixer": "softmax" if arm == "gla" else "retention"}
  got = params.matched_cells(TINY, arms, (8, 16, 24), reference, (16, 8))
  assert list(got) == [("gla", 16), ("s-ref", 16), ("retention", 16), ("gla", 8), ("s-ref", 8), ("retention", 8)]
  assert got["retention", 16] == 16 and got["gla", 8] == params.matched_widths(TINY, ["gla"], (8, 16, 24),
                                                                              ("softmax", 8))["gla"]
  assert got["s-ref", 16] == params.matched_widths(TINY, ["softmax"], (8, 16, 24), ("retention", 16))["softmax"]
