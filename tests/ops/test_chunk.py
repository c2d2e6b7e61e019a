"""The chunkwise form's tuning and precision: its grouped path, bf16 operands, emulated TF32, a memory budget;
and the parallel (T×T) form's precision (bf16 operands, emulated TF32), the same policy at the same tolerances.

Grouped path: sequences longer than two groups (tuning's `linear_group_tokens`, 512 on CPU) run group by group
in a rematerialized lax.scan; here the group is shrunk to reach that path with small T. Tolerances as
test_recurrence.py: values vs the float64 loop reference ≤ 1e-5 relative RMS, gradients vs float64 `recurrent`
≤ 2e-5.

Precision (ops/precision.py, docs/DESIGN.md "Precision"), relative RMS:
  bf16 inputs (bf16 operands, float32 accumulation) vs the float32 op on the same rounded inputs:
    o ≤ 1e-2 (measured ≤ 2.5e-3, parallel ≤ 2.4e-3), S ≤ 1e-5 (its update and scan stay float32: measured 0),
    gradients ≤ 2e-2 (measured ≤ 3.6e-3, parallel ≤ 3.4e-3)
  float32 under emulated TF32 products vs the float64 references, values and gradients: ≤ 3e-3 (measured
    ≤ 4.3e-4)
Memory budget (tuning's `memory_budget`, ops/group_budget.py): at two budgets the compiled forward+backward of
the form is within the budget and the larger budget gets the larger group.
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from linear_seq import ops
from linear_seq.ops import chunk as chunk_lib
from linear_seq.ops import delta_chunk
from linear_seq.ops import group_budget
from linear_seq.ops import precision
from linear_seq.ops import tuning
from linear_seq.ops.reference import linear_recurrence_reference
from tests.helpers import (GRAD_TOL, VALUE_TOL, assert_close, count_bf16_dots, hlo_dots, make_inputs,
                           recurrence_cotangents, run_recurrence, vjp_grads)

# (T, K, V, chunk, gate, strength, resets, initial state): T not a multiple of the group or chunk.
CASES = [
    (100, 24, 20, 16, "vector", "strong", True, True),
    (75, 16, 16, 3, None, None, False, True),
    (90, 16, 12, 8, "scalar", "mixed", True, False),
]


def _float64_grads(C, q, k, v, g, s0, cot):
  with jax.enable_x64(True):
    f64 = lambda x: None if x is None else jnp.asarray(x, jnp.float64)
    _, grads64 = run_recurrence("recurrent", C, *map(f64, (q, k, v, g, s0)), jax.tree.map(f64, cot))
    return jax.tree.map(np.asarray, grads64)


def _grad_names(g):
  return ["dq", "dk", "dv", "dg" if g is not None else "ds0", "ds0"]


def _vjp_fn(C, mode="chunk"):
  """((o, S), grads) of the chunk (or parallel) form (None inputs skipped), a new function each call (a fresh
  trace)."""
  def f(q, k, v, g, s0, cot):
    run = lambda q, k, v, g, s0: ops.linear_recurrence(q, k, v, g, initial_state=s0, mode=mode, chunk_size=C)
    return run(q, k, v, g, s0), vjp_grads(run, (q, k, v, g, s0), cot)
  return f


@functools.lru_cache(maxsize=None)
def _vjp(C, mode="chunk"):
  return jax.jit(_vjp_fn(C, mode))


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_grouped_chunk_matches_reference(case, monkeypatch):
  monkeypatch.setattr(tuning, "_overrides", {"linear_group_tokens": 32})   # 3-4 groups, the last one padded
  T, K, V, C, gate, strength, resets, init = case
  q, k, v, g, s0 = make_inputs(T, K, V, gate, strength, resets, init, seed=11)
  cot = recurrence_cotangents(q, v, s0)
  # the jitted function the bf16 and TF32 tests below run at these shapes, under the same group override: one
  # compile of the float32 program for all three (in this process, or from the persistent cache in another)
  (o, s), grads = _vjp(C)(q, k, v, g, s0, cot)
  o_ref, s_ref = linear_recurrence_reference(q, k, v, g, initial_state=s0)
  assert_close(o, o_ref, VALUE_TOL, "o")
  assert_close(s, s_ref, VALUE_TOL, "final state")
  grads64 = _float64_grads(C, q, k, v, g, s0, cot)
  for name, gr, gr64 in zip(_grad_names(g), grads, grads64):
    assert np.all(np.isfinite(gr)), f"{name} not finite"
    assert_close(gr, gr64, GRAD_TOL, name)


# (mode, gate) -> bf16-operand products in the forward (with an initial state): Q Kᵀ, scores @ V, (Q e^b) S.
# Chunk form, vector gate, C = 16: the splitting's cross blocks at h = 2, 4, 8 take Q Kᵀ's place (h = 1 is
# elementwise). Parallel form, vector gate: the scores Σ_k q_ik k_jk e^{D_ijk} keep float32 operands.
BF16_DOTS = {("chunk", None): 3, ("chunk", "scalar"): 3, ("chunk", "vector"): 5,
             ("parallel", None): 3, ("parallel", "scalar"): 3, ("parallel", "vector"): 2}


@pytest.mark.parametrize("mode,gate", list(BF16_DOTS))
def test_bfloat16_products_take_bf16_operands(mode, gate, monkeypatch):
  """bf16 inputs: exactly the large products take bf16 operands, every one accumulating into float32; float32
  inputs: none (the chunk form grouped, so the counted products are the scan body's, once)."""
  monkeypatch.setattr(tuning, "_overrides", {"linear_group_tokens": 16})
  q, k, v, g, s0 = make_inputs(40, 8, 8, gate, "weak", False, True, seed=3)
  fwd = jax.jit(lambda q, k, v, g, s0: ops.linear_recurrence(q, k, v, g, initial_state=s0, mode=mode,
                                                             chunk_size=16))
  bf = lambda x: jnp.asarray(x, jnp.bfloat16)
  hlo = fwd.lower(bf(q), bf(k), bf(v), g, s0).as_text()
  assert count_bf16_dots(hlo) == BF16_DOTS[mode, gate], "\n".join(hlo_dots(hlo))
  assert not any("bf16" in line for line in hlo_dots(fwd.lower(q, k, v, g, s0).as_text()))


# The vector-gated chunk cases compile the longest (the splitting's levels, fwd and bwd): slow tier.
PRECISION_CASES = [pytest.param(CASES[0], marks=pytest.mark.slow), CASES[2]]
_case_id = lambda c: "-".join(map(str, c))
# The parallel (T×T) form in every case (it compiles fast); the emulated-TF32 test takes the first three.
BF16_CASES = ([pytest.param("chunk", CASES[0], marks=pytest.mark.slow, id="chunk-" + _case_id(CASES[0])),
               pytest.param("chunk", CASES[2], id="chunk-" + _case_id(CASES[2]))]
              + [pytest.param("parallel", c, id="parallel-" + _case_id(c)) for c in CASES])


@pytest.mark.parametrize("mode,case", BF16_CASES)
def test_bfloat16_path_vs_float32(mode, case, monkeypatch):
  """bf16 inputs against the float32 op on the same bf16-rounded inputs, values and gradients (the chunk form
  grouped)."""
  monkeypatch.setattr(tuning, "_overrides", {"linear_group_tokens": 32})
  T, K, V, C, gate, strength, resets, init = case
  q, k, v, g, s0 = make_inputs(T, K, V, gate, strength, resets, init, seed=12)
  cot = recurrence_cotangents(q, v, s0)
  bf = lambda x: jnp.asarray(x, jnp.bfloat16)
  up = lambda x: jnp.asarray(bf(x), jnp.float32)
  (o, s), grads = _vjp(C, mode)(bf(q), bf(k), bf(v), g, s0, cot)
  (o32, s32), grads32 = _vjp(C, mode)(up(q), up(k), up(v), g, s0, cot)
  assert o.dtype == jnp.bfloat16 and s.dtype == jnp.float32
  assert_close(np.asarray(o, np.float32), o32, 1e-2, "bf16 o vs float32 op")
  assert_close(s, s32, 1e-5, "bf16 S vs float32 op")
  for name, gr, gr32 in zip(_grad_names(g), grads, grads32):
    assert_close(np.asarray(gr, np.float32), gr32, 2e-2, f"bf16 {name} vs float32 op")


@pytest.mark.parametrize("mode,case", BF16_CASES[:2] + [BF16_CASES[2]])
def test_float32_under_emulated_tf32(mode, case, monkeypatch):
  """The float32 path where plain products round their operands to TF32 (a GPU's default): its tolerance (the
  chunk form grouped, as in the tests above: the cached `_vjp` is traced with the same group whichever runs
  first)."""
  monkeypatch.setattr(tuning, "_overrides", {"linear_group_tokens": 32})
  T, K, V, C, gate, strength, resets, init = case
  q, k, v, g, s0 = make_inputs(T, K, V, gate, strength, resets, init, seed=13)
  cot = recurrence_cotangents(q, v, s0)
  o_ref, s_ref = linear_recurrence_reference(q, k, v, g, initial_state=s0)
  grads64 = _float64_grads(C, q, k, v, g, s0, cot)
  with precision.emulate("tf32"):   # traced inside: a fresh jit, not the cached _vjp
    (o, s), grads = jax.jit(_vjp_fn(C, mode))(q, k, v, g, s0, cot)
  (o_exact, _), _ = _vjp(C, mode)(q, k, v, g, s0, cot)
  assert not np.array_equal(np.asarray(o), np.asarray(o_exact)), "the emulation should change the products"
  assert_close((o, s), (o_ref, s_ref), 3e-3, "o, S (emulated TF32)")
  for name, gr, gr64 in zip(_grad_names(g), grads, grads64):
    assert_close(gr, gr64, 3e-3, f"{name} (emulated TF32)")


def _fwd_bwd_memory(op, args):
  """Compiled temp + argument + output bytes of op's VJP (the test's own compile of the form as it runs)."""
  def fwd_bwd(args, cot):
    return jax.vjp(op, *args)[1](cot)
  stats = jax.jit(fwd_bwd).lower(args, jax.eval_shape(op, *args)).compile().memory_analysis()
  return stats.temp_size_in_bytes + stats.argument_size_in_bytes + stats.output_size_in_bytes


def _check_budgets(form, args, C):
  """At two budgets (fractions of one group's memory) the form's compiled fwd+bwd fits, it uses the largest
  candidate group that fits by its measurement, and the larger budget gets the larger group."""
  T = args[0].shape[1]
  op = lambda *a: form.chunk(*a, C)
  one_group = form.group_memory(*args, C, None)
  chosen = {}
  for fraction in (0.75, 0.6):
    budget = int(fraction * one_group)
    with tuning.override(memory_budget=budget):
      used = _fwd_bwd_memory(op, args)
      chosen[fraction] = group = form.group_tokens(*args, C)
    assert used <= budget, f"budget {budget}: the compiled fwd+bwd needs {used} bytes (groups of {group})"
    assert group is not None and group < T // 2, group
    larger = None if 2 * group >= T else 2 * group
    assert form.group_memory(*args, C, larger) > budget, f"budget {budget}: groups of {larger} fit too"
  assert chosen[0.6] < chosen[0.75], chosen


def test_memory_budget_chooses_the_group():
  B, T, H, K, V = 1, 2048, 2, 32, 32
  q, v = jax.ShapeDtypeStruct((B, T, H, K), jnp.float32), jax.ShapeDtypeStruct((B, T, H, V), jnp.float32)
  _check_budgets(chunk_lib, (q, q, v, None, None), C=16)


@pytest.mark.slow
def test_delta_memory_budget_chooses_the_group():
  B, T, H, K, V = 1, 2048, 2, 32, 32
  q, v = jax.ShapeDtypeStruct((B, T, H, K), jnp.float32), jax.ShapeDtypeStruct((B, T, H, V), jnp.float32)
  _check_budgets(delta_chunk, (q, q, v, jax.ShapeDtypeStruct((B, T, H), jnp.float32), None, None), C=16)


def test_a_budget_nothing_meets_takes_the_least_memory():
  measured = {None: 90, 64: 50, 32: 40, 16: 45, 8: 60}
  calls = []
  memory = lambda L: calls.append(L) or measured[L]
  with pytest.warns(UserWarning, match="no group size fits"):
    assert group_budget.choose(memory, 100, 8, 30, fallback=256) == 32
  assert calls == [None, 64, 32, 16]   # stops once memory rises again
  assert group_budget.choose(memory, 100, 8, 55, fallback=256) == 64
  with pytest.warns(UserWarning, match="no compiled memory analysis"):
    assert group_budget.choose(lambda L: None, 100, 8, 55, fallback=256) == 256
  assert group_budget.candidates(100, 8) == [None, 64, 32, 16, 8]
  assert group_budget.candidates(8, 8) == [None]
