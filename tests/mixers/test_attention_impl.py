"""model.attention_impl: auto's choice per platform, dtype, length and packing; the softmax LM on each path.

The LM without a state runs causal self-attention (`causal=True`); with a state, the masked form over the
cache. At T = 128 on a CPU (the LM study's length) auto keeps the explicit form, and its logits are
bit-equal to the masked form's (what every call ran before attention_impl existed): same op, same mask.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from linear_seq import model as model_lib
from linear_seq.mixers import attention_impl
from tests.helpers import rel_rms

BF16, F32 = jnp.bfloat16, jnp.float32
FROM = attention_impl.CHUNKED_FROM


@pytest.mark.parametrize("name,platform,dtype,seq_len,head_dim,packed,expected", [
    ("auto", "gpu", BF16, 128, 64, False, "cudnn"),
    ("auto", "gpu", jnp.float16, 32768, 256, False, "cudnn"),
    ("auto", "gpu", BF16, 128, 64, True, "chunked"),         # packed: cuDNN path not taken
    ("auto", "gpu", BF16, 128, 320, False, None),            # head dim > 256, short
    ("auto", "gpu", F32, 128, 64, False, None),              # float32, short
    ("auto", "gpu", F32, FROM, 64, False, "chunked"),        # float32, long
    ("auto", "cpu", BF16, 128, 32, True, None),              # CPU: explicit below the threshold, packed or not
    ("auto", "cpu", F32, FROM - 1, 32, False, None),
    ("auto", "cpu", F32, FROM, 32, True, "chunked"),
    ("auto", "tpu", F32, 128, 32, True, "chunked"),
    ("explicit", "gpu", BF16, 32768, 64, False, None),
    ("chunked", "cpu", F32, 16, 32, False, "chunked"),
    ("cudnn", "gpu", F32, 16, 32, False, "cudnn"),
])
def test_auto_choice(name, platform, dtype, seq_len, head_dim, packed, expected):
  assert attention_impl.resolve(name, seq_len=seq_len, head_dim=head_dim, dtype=dtype, packed=packed,
                                platform=platform) == expected


def test_errors():
  with pytest.raises(ValueError, match="model.attention_impl=cudnn needs a GPU; this run is on cpu"):
    attention_impl.resolve("cudnn", seq_len=8, head_dim=8, dtype=BF16, packed=False, platform="cpu")
  with pytest.raises(ValueError, match="model.attention_impl"):
    model_lib.ModelConfig(vocab_size=8, mixer="softmax", attention_impl="flash")


def _lm(impl):
  cfg = model_lib.ModelConfig(vocab_size=11, mixer="softmax", d_model=16, num_heads=2, attention_impl=impl)
  return model_lib.LM(cfg, rngs=nnx.Rngs(0))


def test_lm_paths_agree():
  """Loss and parameter gradients, causal and packed: auto (explicit at a short T on a CPU) bit-equal to the
  masked cache form, and chunked within 1e-5 relative RMS of it."""
  Bt, T = 2, 40
  tokens = jax.random.randint(jax.random.key(1), (Bt, T), 0, 11)
  seg = jnp.asarray([[1] * 13 + [2] * 27, [1] * 30 + [2] * 10], jnp.int32)

  def loss_and_grads(lm, seg, state=None):
    graphdef, params = nnx.split(lm, nnx.Param)
    loss = lambda p: jnp.mean(nnx.merge(graphdef, p)(tokens, segment_ids=seg, state=state)[0] ** 2)
    return jax.value_and_grad(loss)(params)

  assert attention_impl.resolve("auto", seq_len=T, head_dim=8, dtype=F32, packed=True, platform="cpu") is None
  chunked, auto = _lm("chunked"), _lm("auto")  # the same parameters
  for s in (None, seg):
    (l_c, g_c), (l_a, g_a), (l_m, g_m) = jax.jit(lambda: (
        loss_and_grads(chunked, s), loss_and_grads(auto, s), loss_and_grads(auto, s, auto.init_state(Bt, T))))()
    assert rel_rms(l_c, l_a) <= 1e-5
    for a, b in zip(jax.tree.leaves(g_c), jax.tree.leaves(g_a)):
      assert rel_rms(a, b) <= 1e-5
    assert l_a == l_m and all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(g_a), jax.tree.leaves(g_m)))
