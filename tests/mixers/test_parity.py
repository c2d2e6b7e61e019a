"""Layer parity with the reference implementations (HF transformers' LlamaAttention, Mamba2Mixer,
Qwen3NextGatedDeltaNet, KimiLinearDeltaAttention; their torch code paths).

The fixtures (parity_fixtures/*.npz, written by scripts/make_parity_fixtures.py, which needs the `parity`
extra) hold each reference layer's random weights, inputs, outputs and caches; `linear_seq.parity` maps the
weights onto the registered mixer built with the reference's options, which must then give the reference's
full-sequence output (T = 13, not a multiple of the chunk 8; and T = 1), its prefill output, its one-token decode
steps from the mixer's own state, and its cache after the prefill and after the last step, all to a relative
RMS of 1e-5 in float32 (measured: ≤ 1e-6). The live test rebuilds the references with torch when it is installed.
"""
import glob
import importlib.util
import os

import jax
import numpy as np
import pytest

from linear_seq import mixers, parity
from linear_seq.mixers import dt_gate
from linear_seq.mixers.short_conv import ShortConv
from flax import nnx

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
FIXTURE_DIR = os.path.join(os.path.dirname(__file__), "parity_fixtures")
FIXTURES = sorted(glob.glob(os.path.join(FIXTURE_DIR, "*.npz")))
TOL = 1e-5
CHUNK = 8   # the mixers' chunk size here: T = 13 spans a full and a padded chunk


def _script():
  spec = importlib.util.spec_from_file_location("make_parity_fixtures",
                                                os.path.join(ROOT, "scripts", "make_parity_fixtures.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


fixtures = _script()   # numpy-only at import; torch is imported inside its builders


def _weights(a):
  return {k[2:]: v for k, v in a.items() if k.startswith("w/")}


def _ref_state(reference, a, tag):
  return parity.state_from_reference(
      reference, {k.split("/", 1)[1]: v for k, v in a.items() if k.startswith(f"state_{tag}/")})


def check_against(meta: dict, a: dict) -> dict:
  """Builds the mixer from the reference's weights, runs every mode and returns {what: relative RMS}."""
  reference, T, T0 = meta["reference"], meta["T"], meta["T0"]
  mixer = parity.build(reference, meta["config"], _weights(a), chunk_size=CHUNK)
  err = {}
  y, full_state = mixer(a["x"])
  err["full output"] = fixtures.rel_rms(y, a["y_full"])
  err["T=1 output"] = fixtures.rel_rms(mixer(a["x1"])[0], a["y1"])
  y_pre, state = mixer(a["x"][:, :T0], state=mixer.init_state(a["x"].shape[0], T))
  err["prefill output"] = fixtures.rel_rms(y_pre, a["y_prefill"])
  states = {"prefill": state}
  steps = []
  for t in range(T0, T):
    y_t, state = mixer(a["x"][:, t:t + 1], state=state)
    steps.append(y_t)
  states["final"] = state
  if steps:
    err["decode steps"] = fixtures.rel_rms(np.concatenate(steps, axis=1), a["y_steps"])
  for tag, ours in states.items():
    for key, ref in _ref_state(reference, a, tag).items():
      mine = np.asarray(ours[key])
      err[f"{tag} state {key}"] = fixtures.rel_rms(mine[:, :ref.shape[1]] if reference == "llama" else mine, ref)
  if reference != "llama":   # the final state of one call over the whole sequence
    err["full-call state S"] = fixtures.rel_rms(full_state["S"], _ref_state(reference, a, "final")["S"])
  return err


def test_fixtures_exist_are_small_and_record_versions():
  assert {os.path.basename(p)[:-4] for p in FIXTURES} == set(fixtures.CASES)
  assert sum(os.path.getsize(p) for p in FIXTURES) <= 1 << 20
  for path in FIXTURES:
    meta, a = fixtures.load_fixture(path)
    assert set(meta["versions"]) == {"torch", "transformers", "numpy"}
    assert meta["config"] == fixtures.CASES[meta["case"]][1]
    assert a["x"].dtype == np.float32 and a["y_full"].shape == a["x"].shape


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: os.path.basename(p)[:-4])
def test_mixer_matches_reference(path):
  meta, a = fixtures.load_fixture(path)
  err = check_against(meta, a)
  assert len(err) >= 8
  bad = {k: f"{v:.1e}" for k, v in err.items() if not v <= TOL}
  assert not bad, f"{meta['case']}: relative RMS above {TOL}: {bad}"


# Each convention option, set back to its default, breaks parity: the option is what reproduces the reference.
CONTROLS = {
    "llama_mha_theta": dict(rope_base=10_000.0),
    "mamba2_groups2": dict(mamba_norm_groups=1),
    "mamba2_dt_limit": dict(dt_limit_min=0.0, dt_limit_max=0.0),
    "qwen3_next_grouped": dict(delta_norm_eps=1e-5),
    "kimi_kda": dict(output_gate_act="swish"),
}


@pytest.mark.parametrize("case", sorted(CONTROLS))
def test_default_convention_breaks_parity(case):
  meta, a = fixtures.load_fixture(os.path.join(FIXTURE_DIR, f"{case}.npz"))
  mixer = parity.build(meta["reference"], meta["config"], _weights(a), chunk_size=CHUNK, **CONTROLS[case])
  assert fixtures.rel_rms(mixer(a["x"])[0], a["y_full"]) > 100 * TOL


def test_weights_under_a_whole_model_prefix():
  meta, a = fixtures.load_fixture(os.path.join(FIXTURE_DIR, "kimi_kda.npz"))
  prefix = "model.layers.3.self_attn."
  model_state = {prefix + k: v for k, v in _weights(a).items()} | {"model.embed_tokens.weight": np.zeros((2, 2))}
  layer = parity.weights_under(model_state, prefix)
  assert layer.keys() == _weights(a).keys()
  with pytest.raises(ValueError, match="no weights under 'model.layers.4.'"):
    parity.weights_under(model_state, "model.layers.4.")


def test_mismatched_weights_are_rejected():
  meta, a = fixtures.load_fixture(os.path.join(FIXTURE_DIR, "llama_gqa.npz"))
  with pytest.raises(ValueError, match="shape"):
    parity.build("llama", meta["config"], _weights(a), num_kv_heads=6)
  with pytest.raises(ValueError, match="attention_bias"):
    parity.options("llama", {**meta["config"], "attention_bias": True})


def test_option_errors():
  from linear_seq.model import ModelConfig
  with pytest.raises(ValueError, match="unknown model.A_init 'ones'; valid: uniform, arange"):
    ModelConfig(vocab_size=1, A_init="ones")
  with pytest.raises(ValueError, match="unknown model.output_gate_act 'relu'; valid: swish, sigmoid"):
    ModelConfig(vocab_size=1, output_gate_act="relu")
  with pytest.raises(ValueError, match="model.mamba_groups must be >= 1, got 0"):
    ModelConfig(vocab_size=1, mamba_groups=0)
  with pytest.raises(ValueError, match="model.head_dim must be >= 0, got -2"):
    ModelConfig(vocab_size=1, head_dim=-2)
  with pytest.raises(ValueError, match="num_heads 4 must divide by num_kv_heads 3"):
    parity.build("llama", dict(hidden_size=16, num_attention_heads=4, num_key_value_heads=3, head_dim=4,
                               rope_theta=1e4, attention_bias=False), {})
  with pytest.raises(ValueError, match="the 4 heads must divide by mamba_groups = 3"):
    mixers.get("mamba2")(32, head_dim=16, groups=3, rngs=nnx.Rngs(0))
  with pytest.raises(ValueError, match="num_heads 4 must divide by delta_qk_heads 3"):
    mixers.get("deltanet")(32, 4, qk_heads=3, rngs=nnx.Rngs(0))


def test_mamba2_preset_has_hf_A_init():
  """HF Mamba2Mixer's init sets A_h = h + 1; the preset's A_init='arange' does the same (Kimi keeps U[1, 16])."""
  meta, _ = fixtures.load_fixture(os.path.join(FIXTURE_DIR, "mamba2_groups2.npz"))
  cfg = parity.model_config("mamba2", meta["config"])
  mixer = mixers.get("mamba2").from_config(cfg, rngs=nnx.Rngs(0))
  np.testing.assert_allclose(mixer.A_log[...], np.log(np.arange(1, mixer.num_heads + 1, dtype=np.float32)),
                             rtol=1e-7, atol=0)
  a = np.exp(dt_gate.init_A_log(jax.random.key(0), (64,)))
  assert a.min() >= 1 and a.max() <= 16


def test_one_conv_over_the_concatenation_is_one_conv_per_projection():
  """Depthwise: a conv over [q ‖ k ‖ v] (ours, Qwen3-Next's, Kimi's) is the three separate convs (fla's)."""
  widths = (5, 3, 4)
  whole = ShortConv(sum(widths), 4, rngs=nnx.Rngs(0))
  whole.bias[...] = jax.random.normal(jax.random.key(1), (sum(widths),))
  x = jax.random.normal(jax.random.key(2), (2, 7, sum(widths)))
  y, state = whole(x)
  start = 0
  for w in widths:
    part = ShortConv(w, 4, rngs=nnx.Rngs(0))
    part.kernel[...] = whole.kernel[...][:, start:start + w]
    part.bias[...] = whole.bias[...][start:start + w]
    y_part, s_part = part(x[..., start:start + w])
    np.testing.assert_array_equal(y_part, y[..., start:start + w])
    np.testing.assert_array_equal(s_part, state[..., start:start + w])
    start += w


@pytest.mark.parity
def test_live_references():
  """With the `parity` extra: rebuild every reference now, check it reproduces its fixture (1e-6 relative;
  torch's CPU kernels differ across CPU generations) and that the mixer matches the live outputs. With the
  extra in a separate venv: PYTHONPATH=$PWD:<that venv>/lib/python3.11/site-packages HF_HUB_OFFLINE=1."""
  pytest.importorskip("torch", reason="needs the parity extra (pip install -e '.[parity]')")
  pytest.importorskip("transformers", reason="needs the parity extra (pip install -e '.[parity]')")
  for name, (reference, c, _, _) in fixtures.CASES.items():
    hf_config = fixtures._layer(reference, c)[1]
    assert parity.fields(reference, hf_config.to_dict()) == parity.fields(reference, c), name
    live = fixtures.make_case(name)
    meta, saved = fixtures.load_fixture(os.path.join(FIXTURE_DIR, f"{name}.npz"))
    live.pop("meta")
    diffs = {k: fixtures.rel_rms(live[k], saved[k]) for k in live if live[k].size}
    assert max(diffs.values()) <= 1e-6, (name, diffs)
    err = check_against(meta, live)
    assert max(err.values()) <= TOL, (name, err)
