"""The delta rule's triangular inverse and solve under emulated reduced-precision matmuls (ops/precision.py).

  python -m linear_seq.studies.precision          # keys at correlation 0.99, β ~ U[0, 2], C = K = V = 64

Prints the relative RMS error vs float64 (numpy) of (I + A)⁻¹ and of (I + A)⁻¹ R, for float32 products at
the platform's precision (what the op did before the precision policy) and at HIGHEST (the policy), with
operands as they are (CPU float32), rounded to TF32 (a GPU's default) and to bfloat16 (a TPU's default).
"""
from typing import Sequence

from absl import app
from absl import flags
import jax
import jax.numpy as jnp
import numpy as np

from linear_seq import cli
from linear_seq.ops import delta_chunk
from linear_seq.ops import precision

FLAGS = flags.FLAGS


def correlated_system(rho: float, C: int, K: int, V: int, M: int, seed: int = 0):
  """M systems: A = strict_lower(β_t k_t·k_s) with unit keys at pairwise correlation ≈ rho, β ~ U[0, 2],
  R = β [K | N(0, 1)]; returns (A, R, (I + A)⁻¹, (I + A)⁻¹ R), float64."""
  r = np.random.default_rng(seed)
  unit = lambda x: x / np.linalg.norm(x, axis=-1, keepdims=True)
  k = unit(np.sqrt(rho) * unit(r.normal(size=(M, 1, K))) + np.sqrt(1 - rho) * unit(r.normal(size=(M, C, K))))
  beta = r.uniform(0, 2, size=(M, C, 1))
  a = np.tril(beta * (k @ k.swapaxes(-1, -2)), -1)
  rhs = beta * np.concatenate([k, r.normal(size=(M, C, V))], -1)
  x = np.linalg.inv(np.eye(C) + a)
  return a, rhs, x, x @ rhs


def rel_rms(a, b) -> float:
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  return float(np.sqrt(np.mean((a - b) ** 2) / np.mean(b ** 2)))


def measure(rho: float = 0.99, C: int = 64, K: int = 64, V: int = 64, M: int = 64) -> list[dict]:
  """One row per (emulation, exact): the inverse's and the solve's relative RMS error vs float64."""
  a, rhs, x64, y64 = correlated_system(rho, C, K, V, M)
  a32, r32 = jnp.asarray(a, jnp.float32), jnp.asarray(rhs, jnp.float32)
  rows = []
  for emulation in (None, "tf32", "bf16"):
    for exact in (False, True):
      def f(a, r, exact=exact):
        x = delta_chunk.unit_lower_inverse(a, exact)
        return x, precision.einsum("...cs,...sd->...cd", x, r, exact=exact)
      with precision.emulate(emulation):   # traced inside
        x, y = jax.jit(f)(a32, r32)
      rows.append({"operands": emulation or "float32", "products": "HIGHEST" if exact else "platform",
                   "inverse": rel_rms(x, x64), "solve": rel_rms(y, y64)})
  return rows


def main(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  cli.exit_if_dry_run(f"would measure {FLAGS.M} systems at C={FLAGS.C}, K={FLAGS.K}, correlation {FLAGS.rho}")
  print(f"keys at correlation {FLAGS.rho}, beta ~ U[0, 2], C={FLAGS.C}, K=V={FLAGS.K}, {FLAGS.M} systems; "
        "relative RMS error vs float64")
  print(f"{'operands':9} {'products':9} {'inverse':>9} {'solve':>9}")
  for r in measure(FLAGS.rho, FLAGS.C, FLAGS.K, FLAGS.K, FLAGS.M):
    print(f"{r['operands']:9} {r['products']:9} {r['inverse']:9.2e} {r['solve']:9.2e}")


if __name__ == "__main__":
  flags.DEFINE_float("rho", 0.99, "Pairwise correlation of the keys.")
  flags.DEFINE_integer("C", 64, "Chunk size (the system's size).")
  flags.DEFINE_integer("K", 64, "Key (and value) dimension.")
  flags.DEFINE_integer("M", 64, "Number of systems.")
  cli.define_dry_run_flag()
  app.run(main, flags_parser=cli.parse_flags)
