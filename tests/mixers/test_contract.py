"""check_mixer itself: deliberately broken mixers fail it naming the broken check (and only that one), a config
or a name selects a registered mixer, and its report names every check with the measured error."""
import jax
import jax.numpy as jnp
import pytest
from flax import nnx

from linear_seq import config_lib
from linear_seq import mixers
from linear_seq.mixers import segments
from linear_seq.mixers.contract import CHECKS
from tests.helpers import DEFAULT_CONFIG


class RunningSum(nnx.Module):
  """y_t = W_o Σ_{s ≤ t in t's document} W_v x_s, state [B, D] (the sum so far); `flaw` breaks one rule."""

  def __init__(self, d_model: int = 8, *, flaw: str = "", rngs: nnx.Rngs):
    self.d_model, self.flaw = d_model, flaw
    self.v = nnx.Linear(d_model, d_model, use_bias=False, rngs=rngs)
    self.o = nnx.Linear(d_model, d_model, use_bias=False, rngs=rngs)

  def init_state(self, batch_size: int, max_len: int = 0):
    del max_len
    return jnp.zeros((batch_size, self.d_model), jnp.float32)

  def state_size(self, seq_len: int = 0) -> int:
    del seq_len
    return self.d_model + (1 if self.flaw == "state_size" else 0)

  def __call__(self, x_BTD, *, state=None, segment_ids=None):
    B, T, _ = x_BTD.shape
    v_TBD = jnp.swapaxes(self.v(x_BTD), 0, 1)
    if T == 1 and self.flaw == "decode":
      v_TBD = 1.01 * v_TBD  # the one-token path drifts from the parallel one
    reset_TB = (jnp.zeros((T, B), bool) if segment_ids is None or self.flaw == "leak"
                else jnp.swapaxes(segments.boundaries(segment_ids), 0, 1))

    def step(s_BD, inputs):
      v_BD, r_B = inputs
      s_BD = jnp.where(r_B[:, None], 0.0, s_BD) + v_BD
      return s_BD, s_BD

    state, s_TBD = jax.lax.scan(step, self.init_state(B) if state is None else state, (v_TBD, reset_TB))
    return self.o(jnp.swapaxes(s_TBD, 0, 1)), state


def broken(flaw):
  def build(*, rngs, dtype=None):
    del dtype  # float32 parameters and state either way
    return RunningSum(flaw=flaw, rngs=rngs)
  build.__name__ = f"RunningSum(flaw={flaw!r})"
  return build


def test_a_sound_mixer_passes_and_the_report_names_every_check():
  report = mixers.check_mixer(broken(""))
  assert [r.name for r in report] == list(CHECKS) and report.passed
  assert report["prefill_decode"].error < 1e-6 and report["chunk_vs_recurrent"].passed is None  # one form
  assert "prefill_decode" in str(report) and "skipped" in str(report)


@pytest.mark.parametrize("flaw, failing", [
    ("leak", {"packed_documents"}),                    # the state crosses document boundaries
    ("decode", {"prefill_decode", "packed_decode"}),   # the one-token path differs from the parallel pass
    ("state_size", {"state_size"}),
])
def test_broken_mixers_fail_naming_the_check(flaw, failing):
  first = next(c for c in CHECKS if c in failing)
  with pytest.raises(mixers.MixerContractError, match=f"RunningSum.* fails the mixer contract: {first}: ") as e:
    mixers.check_mixer(broken(flaw))
  report = e.value.report
  assert {r.name for r in report.failed} == failing, str(report)  # and every other check passes
  assert all(r.error is not None and r.error > r.tolerance or r.detail for r in report.failed)


def test_a_config_or_name_selects_a_registered_mixer():
  config = config_lib.load_sibling(DEFAULT_CONFIG, "default").get_config("mixer=retention")
  report = mixers.check_mixer(config, checks=("forward", "chunk_vs_recurrent"))
  assert report.mixer == "retention" and report["chunk_vs_recurrent"].passed, str(report)
  assert report["chunk_vs_recurrent"].error < 1e-5
  with pytest.raises(ValueError, match="unknown check.*valid: forward"):
    mixers.check_mixer("gla", checks=("forwards",))
  with pytest.raises(ValueError, match="got a built RunningSum: pass its class"):
    mixers.check_mixer(RunningSum(rngs=nnx.Rngs(0)))
