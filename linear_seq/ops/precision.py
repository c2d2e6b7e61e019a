"""The ops' matmul helper: operand dtype, precision, and emulated reduced precision (one place for all three).

Policy (docs/DESIGN.md, "Precision"): with bfloat16 inputs the chunk forms' large products take bf16 operands
and accumulate in float32 (`preferred_element_type`); gates, cumulative sums, exponents and the carried state
stay float32; products marked `exact` (the delta rule's triangular inverse and solve) run at
`lax.Precision.HIGHEST` whatever the global `jax_default_matmul_precision` (on GPUs float32 matmuls otherwise
run as TF32, 10-bit mantissa operands; on TPUs as one bfloat16 pass, 7 bits).

XLA on CPU ignores matmul precision, so the test mode `emulate('tf32' | 'bf16')` rounds the float32 operands
of every non-exact product to that format (round to nearest even) before a float32 dot at HIGHEST: what a
GPU's TF32 or a TPU's default pass computes, up to the accumulation order; the backward's products round
their operands (cotangent included) the same way. Elementwise products are never
rounded (no accelerator rounds them). The mode is read when a function is traced: trace (jit) inside it.
Outside emulation, and with no operand dtype, a non-exact product is exactly `jnp.einsum(spec, x, y)`.
"""
import contextlib
import functools
from typing import Iterator, Optional

import jax
import jax.numpy as jnp
from jax import lax

EMULATIONS = ("tf32", "bf16")
_emulation: Optional[str] = None


@contextlib.contextmanager
def emulate(kind: Optional[str]) -> Iterator[None]:
  """Within the block, functions traced round non-exact float32 products' operands to `kind` (None: off)."""
  global _emulation
  if kind is not None and kind not in EMULATIONS:
    raise ValueError(f"emulate: kind must be one of {EMULATIONS} or None; got {kind!r}")
  previous, _emulation = _emulation, kind
  try:
    yield
  finally:
    _emulation = previous


def round_tf32(x):
  """float32 rounded to TF32's 10 explicit mantissa bits (nearest, ties to even), kept as float32.

  Non-finite values pass unchanged; a value that rounds past the largest finite one becomes inf (as bf16).
  """
  x = jnp.asarray(x, jnp.float32)
  bits = lax.bitcast_convert_type(x, jnp.uint32)
  bias = jnp.uint32(0xFFF) + ((bits >> 13) & jnp.uint32(1))
  rounded = lax.bitcast_convert_type((bits + bias) & jnp.uint32(0xFFFFE000), jnp.float32)
  return jnp.where(jnp.isfinite(x), rounded, x)


def round_bf16(x):
  """float32 rounded to bfloat16 (7 explicit mantissa bits, nearest even), kept as float32."""
  return jnp.asarray(x, jnp.float32).astype(jnp.bfloat16).astype(jnp.float32)


_ROUND = {"tf32": round_tf32, "bf16": round_bf16}


def einsum(spec: str, x, y, *, exact: bool = False, operand_dtype=None):
  """jnp.einsum(spec, x, y) under the policy.

  Args:
    spec: a two-operand einsum spec.
    x, y: float32 (or float64) arrays.
    exact: run at HIGHEST whatever the global precision (float32-exact on GPU/TPU); never emulated.
    operand_dtype: None, or a narrower float dtype (bfloat16) the operands are cast to; the product then
      accumulates and returns in x's dtype (`preferred_element_type`). Ignored when `exact`.
  """
  if exact:
    return jnp.einsum(spec, x, y, precision=lax.Precision.HIGHEST)
  if operand_dtype is not None and jnp.dtype(operand_dtype) != jnp.result_type(x, y):
    out = jnp.result_type(x, y)
    return jnp.einsum(spec, x.astype(operand_dtype), y.astype(operand_dtype), preferred_element_type=out)
  if _emulation is not None and jnp.result_type(x, y) == jnp.float32:
    return _emulated(spec, _emulation, x, y)
  return jnp.einsum(spec, x, y)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1))
def _emulated(spec, kind, x, y):
  """einsum on operands rounded to `kind`; its backward's two products round their operands too."""
  rnd = _ROUND[kind]
  return jnp.einsum(spec, rnd(x), rnd(y), precision=lax.Precision.HIGHEST)


def _emulated_fwd(spec, kind, x, y):
  rnd = _ROUND[kind]
  return _emulated(spec, kind, x, y), (rnd(x), rnd(y))


def _emulated_bwd(spec, kind, res, g):
  _, pullback = jax.vjp(lambda a, b: jnp.einsum(spec, a, b, precision=lax.Precision.HIGHEST), *res)
  return pullback(_ROUND[kind](g))


_emulated.defvjp(_emulated_fwd, _emulated_bwd)


def matmul(x, y, *, exact: bool = False, operand_dtype=None):
  """x @ y over the last two axes (leading axes batched, equal ranks), as `einsum` (jnp.matmul when plain)."""
  if exact:
    return jnp.matmul(x, y, precision=lax.Precision.HIGHEST)
  if operand_dtype is None and _emulation is None:
    return jnp.matmul(x, y)
  return einsum("...ab,...bc->...ac", x, y, operand_dtype=operand_dtype)
