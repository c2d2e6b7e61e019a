"""The matmul helper (ops/precision.py), its emulated reduced precision, and the backend tuning table.

Tolerances: the delta rule's triangular inverse and solve (keys at correlation 0.99, β ∈ [0, 2], C = 64; the
measurement of `python -m linear_seq.studies.precision`) vs float64:
  exact path (HIGHEST) under emulated TF32 or bf16 operands:  ≤ 2e-6   (measured 4.6e-7, float32's own error)
  the platform-precision path under emulated TF32:           ≥ 1e-4   (measured 2.0e-3: the emulation bites)
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from linear_seq.ops import delta_chunk
from linear_seq.ops import precision
from linear_seq.ops import tuning
from linear_seq.studies import precision as precision_study
from tests.helpers import rel_rms


def test_round_tf32_is_nearest_even_to_10_bits():
  one_ulp = 2.0 ** -10
  x = np.array([1 + one_ulp / 2, 1 + 3 * one_ulp / 2, 1 + one_ulp / 2 + 2 ** -20, -(1 + 3 * one_ulp / 2),
                np.inf, -np.inf, 0.0, 3.0], np.float32)
  want = np.array([1, 1 + 2 * one_ulp, 1 + one_ulp, -(1 + 2 * one_ulp), np.inf, -np.inf, 0.0, 3.0], np.float32)
  np.testing.assert_array_equal(np.asarray(precision.round_tf32(x)), want)
  r = np.random.default_rng(0).normal(size=10_000).astype(np.float32) * 1e3
  got = np.asarray(precision.round_tf32(r))
  assert np.all(got.view(np.uint32) & 0x1FFF == 0)                     # 10 mantissa bits left
  ulp = 2.0 ** (np.floor(np.log2(np.abs(r.astype(np.float64)))) - 10)
  assert np.all(np.abs(got.astype(np.float64) - r) <= ulp / 2)          # nearest
  assert np.isnan(np.asarray(precision.round_tf32(np.float32(np.nan))))


def test_emulation_rounds_plain_products_only():
  r = np.random.default_rng(1)
  x, y = (jnp.asarray(r.normal(size=(8, 16)), jnp.float32) for _ in range(2))
  exact = np.asarray(x, np.float64) @ np.asarray(y, np.float64).T
  f = lambda **kw: np.asarray(jax.jit(lambda x, y: precision.einsum("ik,jk->ij", x, y, **kw))(x, y))
  assert rel_rms(f(), exact) < 1e-6
  for kind, lo, hi in (("tf32", 1e-5, 1e-3), ("bf16", 1e-4, 1e-2)):
    with precision.emulate(kind):
      assert lo < rel_rms(f(), exact) < hi, kind
      assert rel_rms(f(exact=True), exact) < 1e-6
  with pytest.raises(ValueError, match="kind"):
    with precision.emulate("fp8"):
      pass


def test_emulated_gradient_rounds_its_products():
  """The backward of an emulated product is the emulated products of the rounded operands and cotangent."""
  r = np.random.default_rng(2)
  x, y, g = (jnp.asarray(r.normal(size=(6, 6)), jnp.float32) for _ in range(3))
  with precision.emulate("bf16"):
    dx, dy = jax.vjp(lambda a, b: precision.matmul(a, b), x, y)[1](g)
  rnd = lambda a: np.asarray(precision.round_bf16(a), np.float64)
  np.testing.assert_allclose(dx, rnd(g) @ rnd(y).T, rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(dy, rnd(x).T @ rnd(g), rtol=1e-6, atol=1e-6)


def test_bf16_operands_accumulate_in_float32():
  x = jnp.ones((4, 512), jnp.float32) * (1 + 2 ** -6)    # exact in bf16; 512 terms overflow bf16's mantissa
  out = precision.einsum("ik,jk->ij", x, x, operand_dtype=jnp.bfloat16)
  assert out.dtype == jnp.float32
  np.testing.assert_array_equal(np.asarray(out), 512 * (1 + 2 ** -6) ** 2)
  hlo = jax.jit(lambda a: precision.einsum("ik,jk->ij", a, a, operand_dtype=jnp.bfloat16)).lower(x).as_text()
  assert "bf16" in hlo


def test_inverse_is_exact_under_emulated_reduced_precision():
  """linear_seq.studies.precision's measurement (there at 64 systems; 16 here): HIGHEST holds float32's error."""
  rows = {(r["operands"], r["products"]): r for r in precision_study.measure(M=16)}
  for operands in ("float32", "tf32", "bf16"):
    for what in ("inverse", "solve"):
      err = rows[operands, "HIGHEST"][what]
      assert err <= 2e-6, f"{operands} operands: exact {what} rel err {err:.2e}"
  for operands in ("tf32", "bf16"):   # the platform-precision path loses accuracy: the emulation bites
    assert rows[operands, "platform"]["inverse"] >= 1e-4, rows[operands, "platform"]


def test_exact_inverse_is_bitwise_unchanged_on_cpu():
  """On CPU HIGHEST changes nothing: the exact path is the pre-policy program's result bit for bit."""
  if jax.default_backend() != "cpu":
    pytest.skip("CPU only")
  a32 = jnp.asarray(precision_study.correlated_system(0.99, 64, 64, 64, M=4)[0], jnp.float32)
  inverse = jax.jit(delta_chunk.unit_lower_inverse, static_argnums=1)   # one program each, as in the op
  np.testing.assert_array_equal(np.asarray(inverse(a32, True)), np.asarray(inverse(a32, False)))


def test_tuning_table_and_overrides():
  assert tuning.current("cpu") == tuning.Tuning(delta_group_tokens=256, small_block=4, chunk_size=16,
                                                linear_group_tokens=512, memory_budget=None)
  for backend in ("gpu", "tpu"):
    row = tuning.current(backend)
    assert row.delta_group_tokens is None and row.linear_group_tokens == 512 and row.chunk_size == 64
    assert row.memory_budget is None
  with tuning.override(delta_group_tokens=64, small_block=8, linear_group_tokens=None, memory_budget=2 ** 30):
    assert tuning.current("cpu") == tuning.Tuning(64, 8, 16, None, 2 ** 30)
    assert tuning.current("gpu") == tuning.Tuning(64, 8, 64, None, 2 ** 30)
  assert tuning.current("cpu").delta_group_tokens == 256 and tuning.current("cpu").linear_group_tokens == 512
  for bad in ({"group": 1}, {"small_block": 0}, {"chunk_size": None}, {"delta_group_tokens": True},
              {"linear_group_tokens": 0}, {"memory_budget": -1}, {"small_block": None}):
    with pytest.raises(ValueError, match="tuning"):
      tuning.set_overrides(**bad)


def test_platform_settings_from_config():
  import ml_collections
  from linear_seq import model
  from linear_seq import platform
  train = lambda **kw: ml_collections.ConfigDict(dict(matmul_precision="", delta_group_tokens=0, small_block=0) | kw)
  assert platform.overrides(train()) == {}
  assert platform.overrides(train(delta_group_tokens=-1, small_block=8)) == {"delta_group_tokens": None,
                                                                             "small_block": 8}
  assert platform.overrides(train(delta_group_tokens=1024)) == {"delta_group_tokens": 1024}
  assert platform.overrides(train(linear_group_tokens=-1, memory_budget_mib=3)) == {
      "linear_group_tokens": None, "memory_budget": 3 * 2 ** 20}
  for bad, field in ((dict(matmul_precision="tf32"), "matmul_precision"),
                     (dict(delta_group_tokens=-2), "delta_group_tokens"), (dict(small_block=-1), "small_block"),
                     (dict(linear_group_tokens=-3), "linear_group_tokens"),
                     (dict(memory_budget_mib=-1), "memory_budget_mib")):
    with pytest.raises(ValueError, match=field):
      platform.check(train(**bad))
  assert model.ModelConfig(vocab_size=8, chunk_size=0).chunk_size == tuning.current().chunk_size
  assert model.ModelConfig(vocab_size=8, chunk_size=32).chunk_size == 32
