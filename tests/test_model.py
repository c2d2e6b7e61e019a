"""The LM: config factory, forward, hybrids, greedy/sampled generation, state sizes, labels, redraw."""
import dataclasses
import importlib.util
import os
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from linear_seq import mixers
from linear_seq import evaluate
from linear_seq import model as model_lib
from linear_seq import optim
from linear_seq import restored
from linear_seq.mixers import RandomProjection
from linear_seq.mixers import random_projection

V, D, H = 13, 16, 2
TINY = dict(vocab_size=V, d_model=D, num_heads=H, mlp_ratio=2, state_size=4, gate_rank=4, chunk_size=4,
            num_features=8, max_len=32)


def default_config():
  path = os.path.join(os.path.dirname(__file__), "..", "configs", "default.py")
  spec = importlib.util.spec_from_file_location("default_config", path)
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  return mod.get_config("")


def test_model_config_fields_match_config_file():
  config = default_config()
  fields = {f.name for f in dataclasses.fields(model_lib.ModelConfig)}
  assert set(config.model.keys()) == fields
  defaults = model_lib.ModelConfig(vocab_size=259)
  from_file = model_lib.ModelConfig.from_config(config.model, vocab_size=259)
  assert {f: getattr(defaults, f) for f in fields if getattr(defaults, f) != getattr(from_file, f)} == {}, (
      "ModelConfig's defaults differ from configs/default.py's model values")
  cfg = model_lib.ModelConfig.from_config(config.model, vocab_size=259)
  assert cfg.vocab_size == 259 and cfg.mixers == ("gla",) * config.model.num_layers
  config.model.layer_mixers, config.model.num_layers = "gla,softmax", 2
  config.model.gamma, config.model.decay, config.model.vocab_size = "0.9, 0.99", "0.95", 300
  cfg = model_lib.ModelConfig.from_config(config.model, vocab_size=259)
  assert cfg.mixers == ("gla", "softmax") and cfg.gamma == (0.9, 0.99) and cfg.decay == (0.95,)
  assert cfg.vocab_size == 300



def test_layer_mixers_listing_one_mixer_is_the_same_model():
  """layer_mixers='deltanet,deltanet' builds the model mixer='deltanet' builds, parameter for parameter (the
  hybrids study takes its pure 2-layer LM rows from the LM study, which set model.mixer)."""
  for mixer in ("gla", "deltanet", "softmax"):
    one = model_lib.LM(model_lib.ModelConfig(**TINY, mixer=mixer, num_layers=2), rngs=nnx.Rngs(3))
    listed = model_lib.LM(model_lib.ModelConfig(**TINY, layer_mixers=f"{mixer},{mixer}", num_layers=2),
                          rngs=nnx.Rngs(3))
    a, b = nnx.state(one, nnx.Param), nnx.state(listed, nnx.Param)
    assert jax.tree.structure(a) == jax.tree.structure(b)
    jax.tree.map(np.testing.assert_array_equal, a, b)
    tokens = jax.random.randint(jax.random.key(0), (2, 7), 0, V)
    np.testing.assert_array_equal(one(tokens)[0], listed(tokens)[0])


BAD_CONFIGS = [
    (dict(layer_mixers="gla,softmax", num_layers=3), "lists 2 mixers"),
    (dict(mixer="mamba"), "unknown mixer 'mamba'; valid: softmax, linear, retention, gla, s4"),
    (dict(dtype="float16"), "unknown model.dtype 'float16'; valid: float32, bfloat16"),
    (dict(mode="fast"), "unknown model.mode 'fast'"),
    (dict(d_model=15), "must divide by model.num_heads"),
    (dict(num_layers=0), "model.num_layers must be a positive integer"),
    (dict(conv_width=1), "conv_width 0 or >= 2, got 2, 1"),
    (dict(mlp_ratio=-1), "need mlp_ratio >= 0 and conv_width 0 or >= 2, got -1, 0"),
    (dict(layer_mixers="mamba2,softmax,deltanet", num_layers=3, conv_width=4),
     "model.conv_width=4: deltanet, mamba2 apply their own short convs .*; set model.conv_width=0"),
    (dict(norm="batch"), "unknown model.norm 'batch'; valid: rms, layer"),
    (dict(mlp="relu"), "unknown model.mlp 'relu'; valid: gelu, swiglu"),
    (dict(mlp_hidden=-1), "model.mlp_hidden must be an integer >= 0, got -1"),
    (dict(norm_eps=0.0), "model.norm_eps must be > 0, got 0.0"),
    (dict(conv_on="out"), "unknown model.conv_on 'out'; valid: input, qkv"),
    (dict(init="xavier"), "unknown model.init 'xavier'; valid: default, gpt2, torch, mamba_ssm, torch_in, torch_out"),
    (dict(input_pos="rope"), "unknown model.input_pos 'rope'; valid: none, learned"),
    (dict(layer_mixers="deltanet,gla,retention", num_layers=3, negative_eigenvalues=True),
     r"^model.negative_eigenvalues=True: retention cannot take it: its decays are fixed per head \(γ_h\), not "
     r"computed from the input, .*; valid mixers: gla, deltanet, deltaproduct, mamba2$"),
    (dict(mixer="softmax", negative_eigenvalues=True),
     "softmax have no state transition to give negative eigenvalues; valid mixers: gla, deltanet, deltaproduct, "
     "mamba2$"),
    (dict(mixer="deltaproduct", householder_steps=0), "model.householder_steps must be an integer >= 1, got 0"),
]


@pytest.mark.parametrize("overrides,message", BAD_CONFIGS, ids=[m for _, m in BAD_CONFIGS])
def test_bad_model_config_raises(overrides, message):
  with pytest.raises(ValueError, match=message):
    model_lib.ModelConfig(**{**TINY, **overrides})


def test_from_config_needs_a_vocab_size():
  with pytest.raises(ValueError, match="vocab_size is 0"):
    model_lib.ModelConfig.from_config({"vocab_size": 0, "mixer": "gla"})


@pytest.fixture(scope="module")
def hybrid():
  """Every mixer in one model, with the short conv: exercises all layer states together."""
  cfg = model_lib.ModelConfig(**TINY, layer_mixers="gla,softmax,s4,linear,retention", num_layers=5,
                              conv_width=3, feature_map="favor", retention_pos_encoding="rope")
  return model_lib.LM(cfg, rngs=nnx.Rngs(0))


def test_generate_greedy_equals_argmax_of_full_forwards(hybrid):
  prompt = jax.random.randint(jax.random.key(1), (2, 5), 0, V)
  n = 4
  out = model_lib.generate(hybrid, prompt, n, temperature=0.0)
  assert out.shape == (2, 5 + n) and out.dtype == jnp.int32
  np.testing.assert_array_equal(out[:, :5], prompt)
  # Reference: full forwards on a fixed-length buffer (causal, so later slots don't matter).
  graphdef, params = nnx.split(hybrid)
  fwd = jax.jit(lambda p, t: nnx.merge(graphdef, p)(t)[0])
  buf = jnp.zeros((2, 5 + n), jnp.int32).at[:, :5].set(prompt)
  for i in range(n):
    logits = fwd(params, buf)
    assert logits.shape == (2, 5 + n, V) and logits.dtype == jnp.float32
    buf = buf.at[:, 5 + i].set(jnp.argmax(logits[:, 4 + i], axis=-1))
  np.testing.assert_array_equal(out, buf)


def test_delta_hybrid_generate_equals_full_forwards_and_labels():
  """deltanet (scalar gate) + softmax + mamba2 + deltaproduct (3 steps): greedy decode (prefill, then their
  one-token recurrent steps with conv caches) == argmax of full forwards; their decay parameters take no weight
  decay, no S4 group; delta_beta=2sigmoid gives both delta mixers β = 2σ(·) (negative_eigenvalues would refuse
  mamba2 until the ops take signed decays)."""
  cfg = model_lib.ModelConfig(**TINY, layer_mixers="deltanet,softmax,mamba2,deltaproduct", num_layers=4,
                              delta_gate="scalar", mamba_head_dim=8, householder_steps=3, delta_beta="2sigmoid")
  lm = model_lib.LM(cfg, rngs=nnx.Rngs(0))
  prompt = jax.random.randint(jax.random.key(1), (2, 5), 0, V)
  out = model_lib.generate(lm, prompt, 4, temperature=0.0)
  graphdef, params = nnx.split(lm)
  fwd = jax.jit(lambda p, t: nnx.merge(graphdef, p)(t)[0])
  buf = jnp.zeros((2, 9), jnp.int32).at[:, :5].set(prompt)
  for i in range(4):
    buf = buf.at[:, 5 + i].set(jnp.argmax(fwd(params, buf)[:, 4 + i], axis=-1))
  np.testing.assert_array_equal(out, buf)
  labels = {tuple(str(p) for p in path): optim.param_label(path)
            for path, _ in nnx.to_flat_state(nnx.state(lm, nnx.Param))}
  assert lm.blocks[0].mixer.beta == lm.blocks[3].mixer.beta == "2sigmoid"
  assert lm.blocks[3].mixer.householder_steps == 3
  for block, leaf in (("0", "A_log"), ("0", "dt_bias"), ("2", "A_log"), ("2", "dt_bias"), ("2", "D_skip"),
                      ("3", "A_log"), ("3", "dt_bias")):
    assert labels[("blocks", block, "mixer", leaf)] == "no_decay"
  assert labels[("blocks", "2", "mixer", "out_norm", "scale")] == "no_decay"
  assert labels[("blocks", "0", "mixer", "conv", "kernel")] == labels[("blocks", "2", "mixer", "in_proj", "kernel")] \
      == "decay"
  assert "ssm" not in labels.values()


def test_generate_sampling_and_errors(hybrid):
  prompt = jnp.ones((2, 5), jnp.int32)  # the shapes of the greedy test: no new compile
  a = model_lib.generate(hybrid, prompt, 4, temperature=1.0, key=jax.random.key(0))
  b = model_lib.generate(hybrid, prompt, 4, temperature=1.0, key=jax.random.key(0))
  c = model_lib.generate(hybrid, prompt, 4, temperature=1.0, key=jax.random.key(1))
  np.testing.assert_array_equal(a, b)
  assert a.shape == (2, 9) and int(a.min()) >= 0 and int(a.max()) < V
  assert not np.array_equal(a, c)  # 8 sampled tokens from near-uniform logits: differ for another key
  with pytest.raises(ValueError, match="expected \\[B, T0\\]"):
    model_lib.generate(hybrid, jnp.ones((3,), jnp.int32), 2)
  # top_k=1 or a tiny top_p leave only the argmax: sampling then equals greedy decoding (traced: no new compile).
  greedy = model_lib.generate(hybrid, prompt, 4, temperature=0.0)
  for kw in (dict(top_k=1), dict(top_p=1e-6), dict(top_k=5, top_p=1e-6)):
    np.testing.assert_array_equal(model_lib.generate(hybrid, prompt, 4, temperature=1.0, key=jax.random.key(2),
                                                     **kw), greedy, err_msg=str(kw))
  with pytest.raises(ValueError, match="temperature must be >= 0"):
    model_lib.generate(hybrid, prompt, 2, temperature=-1.0)
  for kw, message in ((dict(top_k=-1), "top_k must be an integer >= 0"), (dict(top_k=1.5), "top_k must be"),
                      (dict(top_p=0.0), "top_p must be in \\(0, 1\\]"), (dict(top_p=1.5), "top_p must be in")):
    with pytest.raises(ValueError, match=message):
      model_lib.generate(hybrid, prompt, 2, temperature=1.0, key=jax.random.key(0), **kw)
  with pytest.raises(ValueError, match="needs a PRNG key"):
    model_lib.generate(hybrid, prompt, 2, temperature=1.0)
  with pytest.raises(ValueError, match="state has 1 layers, the model 5"):
    hybrid(prompt, state=[{}])


_filter_logits = jax.jit(model_lib.filter_logits)  # the scalars traced, as in generate: one compile per shape


def kept_sets(logits, temperature, top_k=0, top_p=1.0) -> list[set[int]]:
  """The token ids filter_logits keeps, per row."""
  out = _filter_logits(logits, jnp.float32(temperature), jnp.int32(top_k), jnp.float32(top_p))
  return [set(np.flatnonzero(np.isfinite(row)).tolist()) for row in np.asarray(out)]


def test_filter_logits_keeps_exactly_the_top_k_and_nucleus_sets():
  logits = jnp.log(jnp.asarray([[0.05, 0.5, 0.15, 0.3],     # descending: 1 (0.5), 3 (0.3), 2 (0.15), 0 (0.05)
                                [0.25, 0.25, 0.4, 0.1],     # 2 (0.4), then a tie 0, 1 (0.25), then 3
                                [0.4, 0.3, 0.2, 0.1]]))
  everything = [{0, 1, 2, 3}] * 3
  assert kept_sets(logits, temperature=1.0) == everything
  assert kept_sets(logits, temperature=1.0, top_k=0, top_p=1.0) == everything
  assert kept_sets(logits, temperature=1.0, top_k=4) == kept_sets(logits, temperature=1.0, top_k=9) == everything
  assert kept_sets(logits, temperature=1.0, top_k=1) == [{1}, {2}, {0}]
  assert kept_sets(logits, temperature=1.0, top_k=2) == [{1, 3}, {2, 0, 1}, {0, 1}]  # a tie at the k-th: kept
  # Nucleus: a token is kept while the mass before it (descending; ties in index order) is < top_p.
  assert kept_sets(logits, temperature=1.0, top_p=0.3) == [{1}, {2}, {0}]
  assert kept_sets(logits, temperature=1.0, top_p=0.6) == [{1, 3}, {2, 0}, {0, 1}]
  assert kept_sets(logits, temperature=1.0, top_p=0.75) == [{1, 3}, {2, 0, 1}, {0, 1, 2}]
  # Composed: top_k first, then the nucleus of the renormalized rest (row 3 after top_k=3: 0.44, 0.33, 0.22).
  assert kept_sets(logits, temperature=1.0, top_k=3, top_p=0.75) == [{1, 3}, {2, 0, 1}, {0, 1}]
  assert kept_sets(logits, temperature=1.0, top_k=2, top_p=0.3) == [{1}, {2}, {0}]
  # The temperature scales the logits before the nucleus: T=2 flattens row 3 to 0.33, 0.28, 0.23, 0.16.
  assert kept_sets(logits, temperature=1.0, top_p=0.65)[2] == {0, 1}
  assert kept_sets(logits, temperature=2.0, top_p=0.65)[2] == {0, 1, 2}
  out = np.asarray(_filter_logits(logits, jnp.float32(2.0), jnp.int32(2), jnp.float32(0.9)))
  np.testing.assert_allclose(out[np.isfinite(out)], np.asarray(logits / 2.0)[np.isfinite(out)], rtol=1e-6)


def test_sampling_draws_only_from_the_kept_set_and_greedy_at_temperature_zero():
  logits = jnp.log(jnp.asarray([[0.05, 0.5, 0.15, 0.3], [0.4, 0.3, 0.2, 0.1]]))
  draw = jax.jit(jax.vmap(model_lib._sample, in_axes=(None, 0, None, None, None)))
  keys = jax.random.split(jax.random.key(0), 2000)
  for temperature, top_k, top_p, expected in ((1.0, 2, 1.0, [{1, 3}, {0, 1}]), (1.0, 3, 0.75, [{1, 3}, {0, 1}]),
                                              (1.0, 0, 0.75, [{1, 3}, {0, 1, 2}]), (0.0, 0, 0.75, [{1}, {0}])):
    tokens = np.asarray(draw(logits, keys, jnp.float32(temperature), jnp.int32(top_k), jnp.float32(top_p)))
    assert [set(tokens[:, b].tolist()) for b in range(2)] == expected, (temperature, top_k, top_p)


def test_evaluate_refuses_bad_sampling_values_before_restoring(monkeypatch):
  monkeypatch.setattr(restored, "restore", lambda *args: pytest.fail("restored"))
  monkeypatch.setattr(evaluate, "FLAGS", types.SimpleNamespace(workdir="w", step=None, generate=5, temperature=1.0,
                                                               top_k=0, top_p=0.0))
  with pytest.raises(SystemExit, match=r"error: top_p must be in \(0, 1\]"):
    evaluate.main(["evaluate"])


def test_state_size_values():
  K = D // H
  sizes = {}
  for mixer in ("softmax", "linear", "retention", "gla", "s4"):
    cfg = model_lib.ModelConfig(**TINY, mixer=mixer, num_layers=2, conv_width=3)
    lm = model_lib.LM(cfg, rngs=nnx.Rngs(0))
    sizes[mixer] = (lm.state_size(8), lm.state_size(16))
  conv = 2 * 2 * D  # (width − 1) inputs of D per layer
  assert sizes["softmax"] == (2 * (2 * 8 * D) + conv, 2 * (2 * 16 * D) + conv)  # grows with seq_len
  feat = K  # elu1 keeps K features; denominator adds z [H, K']
  assert sizes["linear"] == (2 * (H * feat * K + H * feat) + conv,) * 2
  assert sizes["retention"] == sizes["gla"] == (2 * H * K * K + conv,) * 2
  assert sizes["s4"] == (2 * 2 * D * 4 + conv,) * 2
  for mixer in ("deltanet", "mamba2"):  # their own convs (width 4) instead of the block's
    cfg = model_lib.ModelConfig(**TINY, mixer=mixer, num_layers=2, mamba_head_dim=8)
    sizes[mixer] = model_lib.LM(cfg, rngs=nnx.Rngs(0)).state_size(8)
  assert sizes["deltanet"] == 2 * (H * K * K + 3 * 3 * D)
  E, N = 2 * D, 4
  assert sizes["mamba2"] == 2 * ((E // 8) * N * 8 + 3 * (E + 2 * N))


def test_bfloat16_compute_float32_params_and_logits():
  cfg = model_lib.ModelConfig(**TINY, layer_mixers="gla,s4", num_layers=2, dtype="bfloat16")
  lm = model_lib.LM(cfg, rngs=nnx.Rngs(0))
  assert all(x.dtype == jnp.float32 for x in jax.tree.leaves(nnx.state(lm, nnx.Param)))
  tokens = jnp.arange(14).reshape(2, 7) % V
  logits, _ = nnx.jit(lambda m, t: m(t))(lm, tokens)
  assert logits.dtype == jnp.float32 and logits.shape == (2, 7, V)
  assert np.all(np.isfinite(np.asarray(logits)))


def test_param_label_on_real_paths_and_redraw():
  cfg = model_lib.ModelConfig(**TINY, layer_mixers="linear,s4,gla", num_layers=3, feature_map="favor",
                              tie_embeddings=False, conv_width=2)
  lm = model_lib.LM(cfg, rngs=nnx.Rngs(0))
  labels = {tuple(str(p) for p in path): optim.param_label(path)
            for path, _ in nnx.to_flat_state(nnx.state(lm, nnx.Param))}
  by_leaf = lambda leaf: {l for p, l in labels.items() if p[-1] == leaf}  # noqa: E731
  assert by_leaf("log_A_real") == by_leaf("A_imag") == by_leaf("log_dt") == {"ssm"}
  assert by_leaf("scale") == by_leaf("bias") == {"no_decay"}          # norms, biases, gate bias
  assert labels[("blocks", "2", "mixer", "gate_up", "bias")] == "no_decay"
  assert labels[("blocks", "2", "mixer", "out_norm", "scale")] == "no_decay"
  assert by_leaf("kernel") == by_leaf("embedding") == by_leaf("C") == {"decay"}
  assert optim.param_label(("blocks", "0", "mixer", "log_dt", "value")) == "ssm"
  with pytest.raises(ValueError, match="empty parameter path"):
    optim.param_label(())
  # The random projection: checkpointed state, not a parameter; redraw changes it and the outputs.
  assert not any(p[-1] == "projection" for p in labels)
  flat = dict(nnx.to_flat_state(nnx.state(lm, RandomProjection)))
  assert list(flat) == [("blocks", 0, "mixer", "projection")]
  x = jax.random.normal(jax.random.key(0), (2, 6, D))
  mixer = lm.blocks[0].mixer
  fwd = nnx.jit(lambda m, x: m(x)[0])
  before_w = np.asarray(mixer.projection[...])
  before = fwd(mixer, x)
  assert random_projection.redraw_projections(lm, jax.random.key(3)) == 1
  assert not np.allclose(mixer.projection[...], before_w)
  after = fwd(mixer, x)
  assert not np.allclose(before, after)


def test_independent_model_options():
  """conv_on=qkv, LayerNorm, GPT-2 init, learned input positions, no output gate: where each goes, the init's
  statistics, greedy decode == full forwards (the position counter and the q/k/v conv caches), and packed
  documents restart their positions."""
  cfg = model_lib.ModelConfig(**TINY, layer_mixers="softmax,gla,s4,deltanet", num_layers=4, conv_width=3,
                              conv_on="qkv", norm="layer", init="gpt2", input_pos="learned", output_gate=False,
                              pos_encoding="none")
  lm = model_lib.LM(cfg, rngs=nnx.Rngs(0))
  softmax, gla, s4, delta = lm.blocks
  assert softmax.conv is None and gla.conv is None and delta.conv is None and s4.conv is not None
  assert softmax.mixer.qkv_conv is not None and gla.mixer.qkv_conv is not None
  assert gla.mixer.r_proj is None and delta.mixer.g_proj is None
  assert isinstance(lm.final_norm, nnx.LayerNorm) and isinstance(softmax.mixer_norm, nnx.LayerNorm)
  q = np.concatenate([np.ravel(b.mixer.q_proj.kernel[...]) for b in (softmax, gla, delta)])
  o = np.concatenate([np.ravel(b.mixer.o_proj.kernel[...]) for b in (softmax, gla, delta)]
                     + [np.ravel(b.mlp.down.kernel[...]) for b in lm.blocks])
  assert abs(np.std(q) / 0.02 - 1) < 0.1 and abs(np.mean(q)) < 0.003
  assert abs(np.std(o) / (0.02 / np.sqrt(8)) - 1) < 0.1
  assert np.all(np.asarray(softmax.mlp.up.bias[...]) == 0)
  prompt = jax.random.randint(jax.random.key(1), (2, 5), 0, V)
  out = model_lib.generate(lm, prompt, 4, temperature=0.0)
  graphdef, params = nnx.split(lm)
  fwd = jax.jit(lambda p, t, s=None: nnx.merge(graphdef, p)(t, segment_ids=s)[0])
  buf = jnp.zeros((2, 9), jnp.int32).at[:, :5].set(prompt)
  for i in range(4):
    buf = buf.at[:, 5 + i].set(jnp.argmax(fwd(params, buf)[:, 4 + i], axis=-1))
  np.testing.assert_array_equal(out, buf)
  # A packed row [doc A (4 tokens), doc B (5 tokens)]: doc B's logits equal doc B alone (in a 9-token row).
  seg = jnp.asarray([[1] * 4 + [2] * 5] * 2)
  packed = fwd(params, buf, seg)[:, 4:]
  alone = fwd(params, jnp.concatenate([buf[:, 4:], buf[:, :4]], axis=1))[:, :5]
  np.testing.assert_allclose(packed, alone, rtol=2e-5, atol=2e-5)


def test_negative_eigenvalues_and_its_older_alias():
  """model.negative_eigenvalues and model.delta_beta=2sigmoid both give deltanet/deltaproduct β = 2σ(·)."""
  for overrides, beta in ((dict(), "sigmoid"), (dict(negative_eigenvalues=True), "2sigmoid"),
                          (dict(delta_beta="2sigmoid"), "2sigmoid")):
    for name in ("deltanet", "deltaproduct"):
      cfg = model_lib.ModelConfig(**{**TINY, "mixer": name, **overrides})
      assert mixers.get(name).from_config(cfg, rngs=nnx.Rngs(0)).beta == beta
  # In a hybrid the switch acts on the delta layers; softmax has no transition to change.
  cfg = model_lib.ModelConfig(**{**TINY, "layer_mixers": "deltaproduct,softmax", "negative_eigenvalues": True})
  assert cfg.mixers == ("deltaproduct", "softmax")
