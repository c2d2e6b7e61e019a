"""model.init schemes (linear_seq/param_init.py): each scheme's distribution, and which parameters it touches."""
import jax
import numpy as np
import pytest
from flax import nnx

from linear_seq import model as model_lib
from linear_seq import param_init

# Wide enough for 1-2% statistics: mamba2's in_proj is [96, 2·192 + 2·16 + 3] per layer.
CFG = dict(vocab_size=50, d_model=96, num_heads=2, mlp_ratio=0, state_size=16, mamba_head_dim=64, chunk_size=8,
           norm="layer", input_pos="learned", max_len=16, tie_embeddings=False, output_gate=False)
L = 3


def _lm_with(rngs: nnx.Rngs, init: str, **more) -> model_lib.LM:
  return model_lib.LM(model_lib.ModelConfig(**{**CFG, "num_layers": L, "mixer": "mamba2", "init": init,
                                               **more}), rngs=rngs)


def _lm(init: str, **more) -> model_lib.LM:
  return _lm_with(nnx.Rngs(0), init, **more)


def _kernels(lm, attr: str) -> np.ndarray:
  return np.concatenate([np.ravel(getattr(b.mixer, attr).kernel[...]) for b in lm.blocks])


def _params(lm) -> dict:
  return {jax.tree_util.keystr(p): np.asarray(v) for p, v in jax.tree_util.tree_leaves_with_path(nnx.state(lm))}


def _uniform(x: np.ndarray, bound: float):
  """x looks like U(±bound): inside it, reaching near it, the uniform's std and a zero mean."""
  assert np.max(np.abs(x)) <= bound and np.max(np.abs(x)) > 0.99 * bound
  assert abs(np.std(x) / (bound / np.sqrt(3)) - 1) < 0.02 and abs(np.mean(x)) < 0.02 * bound


def _normal(x: np.ndarray, std: float):
  assert abs(np.std(x) / std - 1) < 0.03 and abs(np.mean(x)) < 0.03 * std
  assert np.max(np.abs(x)) > 3 * std  # tails: not a uniform of that std (whose max is 1.73·std)


@pytest.fixture(scope="module")
def built():
  return {s: _params(_lm(s)) for s in param_init.SCHEMES}


@pytest.mark.parametrize("scheme,in_rule,out_rule", [
    ("gpt2", "normal", "normal_scaled"), ("torch", "uniform", "uniform"), ("mamba_ssm", "uniform", "uniform_scaled"),
    ("torch_in", "uniform", "normal_scaled"), ("torch_out", "normal", "uniform")])
def test_mixer_projections_follow_the_scheme(scheme, in_rule, out_rule):
  lm = _lm(scheme)
  D, E = CFG["d_model"], 2 * CFG["d_model"]
  expect = {"normal": lambda x, fan: _normal(x, 0.02),
            "normal_scaled": lambda x, fan: _normal(x, 0.02 / np.sqrt(2 * L)),
            "uniform": lambda x, fan: _uniform(x, 1 / np.sqrt(fan)),
            "uniform_scaled": lambda x, fan: _uniform(x, 1 / np.sqrt(fan) / np.sqrt(L))}
  expect[in_rule](_kernels(lm, "in_proj"), D)
  expect[out_rule](_kernels(lm, "out_proj"), E)
  _normal(np.ravel(lm.head.kernel[...]), 0.02)  # outside the mixers: gpt2's


def test_which_parameters_each_scheme_changes(built):
  """Against 'gpt2': the new schemes change the mixers' in_proj / out_proj kernels only (torch_in: in_proj,
  torch_out: out_proj), and share every key (a scheme's uniform is drawn from gpt2's key of that layer)."""
  changed = {"torch": ("in_proj", "out_proj"), "mamba_ssm": ("in_proj", "out_proj"), "torch_in": ("in_proj",),
             "torch_out": ("out_proj",)}
  gpt2 = built["gpt2"]
  for scheme, attrs in changed.items():
    for name, value in built[scheme].items():
      moved = not np.array_equal(value, gpt2[name])
      assert moved == any(f"'mixer']['{a}']['kernel']" in name for a in attrs), (scheme, name)
  out = "['blocks'][1]['mixer']['out_proj']['kernel'].value"
  # mamba_ssm = torch with the output projections / √L: the same draws (float32 rounds min + u·(max − min)
  # differently near 0, hence the atol).
  np.testing.assert_allclose(
      built["mamba_ssm"][out], built["torch"][out] / np.sqrt(L), rtol=1e-6, atol=1e-8)


def test_gpt2_and_default_are_unchanged(built):
  """'default' leaves the built model as is; 'gpt2' draws Linear i as before the other schemes existed:
  std · normal(fold_in(key, i)), std 0.02 or 0.02/√(2L) for the output projections, key = the Rngs' next
  params key after the build."""
  rngs = nnx.Rngs(0)
  lm = _lm_with(rngs, "default")
  for name, value in _params(lm).items():
    np.testing.assert_array_equal(value, built["default"][name])
  key = rngs.params()  # what LM.__init__ draws for a scheme other than 'default'
  gpt2 = _lm("gpt2")
  pairs = list(zip([(p, m) for p, m in nnx.iter_graph(gpt2) if isinstance(m, nnx.Linear)],
                   [m for _, m in nnx.iter_graph(lm) if isinstance(m, nnx.Linear)]))
  assert len(pairs) == 2 * L + 1  # in_proj, out_proj per layer and the head
  for i, ((path, layer), ref) in enumerate(pairs):
    std = 0.02 / np.sqrt(2 * L) if str(path[-1]) in param_init.OUTPUT_PROJECTIONS else 0.02
    shape, dtype = ref.kernel[...].shape, ref.kernel[...].dtype
    np.testing.assert_array_equal(layer.kernel[...], std * jax.random.normal(jax.random.fold_in(key, i), shape, dtype))


def test_mamba_ssm_counts_the_mlp_residual():
  lm = _lm("mamba_ssm", mlp_ratio=2)
  _uniform(_kernels(lm, "out_proj"), 1 / np.sqrt(2 * CFG["d_model"]) / np.sqrt(2 * L))
  _normal(np.concatenate([np.ravel(b.mlp.down.kernel[...]) for b in lm.blocks]), 0.02 / np.sqrt(2 * L))


def test_other_mixers_and_an_unknown_scheme():
  """'torch' reaches every mixer's Linears (here softmax's q/k/v/o), and nothing outside the mixers."""
  lm = model_lib.LM(model_lib.ModelConfig(**{**CFG, "num_layers": 2, "mixer": "softmax", "init": "torch",
                                             "mlp_ratio": 2}), rngs=nnx.Rngs(0))
  D = CFG["d_model"]
  _uniform(np.concatenate([np.ravel(b.mixer.q_proj.kernel[...]) for b in lm.blocks]), 1 / np.sqrt(D))
  _uniform(np.concatenate([np.ravel(b.mixer.o_proj.kernel[...]) for b in lm.blocks]), 1 / np.sqrt(D))
  _normal(np.concatenate([np.ravel(b.mlp.up.kernel[...]) for b in lm.blocks]), 0.02)
  assert all(np.all(np.asarray(b.mlp.up.bias[...]) == 0) for b in lm.blocks)
  with pytest.raises(ValueError, match="unknown model.init 'xavier'"):
    param_init.apply(lm, "xavier", num_layers=2, key=jax.random.key(0))
