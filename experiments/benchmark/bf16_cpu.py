"""bf16 against float32 inputs on the CPU, side by side: the forms under the precision policy (docs/DESIGN.md).

  python experiments/benchmark/bf16_cpu.py 512 parallel,chunk_vector,delta_chunk_vector

The benchmark's cases (linear_seq/studies/bench.py: B=1, H=4, K=V=64, its gates, β and cotangent) built twice
per form, with float32 and with bfloat16 q, k, v (gates and β float32), compiled and timed in one
`bench.run_group`: repeats interleaved round by round across all cases (REPEATS, default 11), so a ratio compares
the two dtypes under the same machine load. Printed per case: median fwd and fwd+bwd ms, XLA's compiled memory
(fwd+bwd), the repeats, and the bf16 / float32 ratios (below 1: bf16 is faster).
"""
import os
import statistics
import sys
import types

import jax

from linear_seq.studies import bench


def main():
  T = int(sys.argv[1]) if len(sys.argv) > 1 else 512
  forms = sys.argv[2].split(",") if len(sys.argv) > 2 else ["parallel", "chunk_vector", "delta_chunk_vector"]
  args = lambda dtype: types.SimpleNamespace(batch=1, heads=4, dk=64, dv=64, dtype=dtype, chunk_size=None,
                                             max_gib=6.0)
  cases = []
  for form in forms:
    for dtype in ("float32", "bfloat16"):
      case = bench._seq_case(form, T, args(dtype), jax.random.key(0))
      case.form = f"{form}/{dtype}"
      cases.append(case)
  bench.run_group(cases, repeats=int(os.environ.get("REPEATS", 11)), budget_s=6.0, max_gib=6.0)
  base = {}
  for case in cases:
    if case.skip:
      print(case.form, case.skip)
      continue
    fwd, fb = (statistics.median(case.result[k]) for k in ("fwd_s", "fwd_bwd_s"))
    form, dtype = case.form.split("/")
    ratio = ""
    if dtype == "float32":
      base[form] = (fwd, fb)
    elif form in base:
      ratio = f"  bf16/float32: fwd {fwd / base[form][0]:.2f}  f+b {fb / base[form][1]:.2f}"
    print(f"{case.form:28s} T={T}  fwd {fwd * 1e3:8.2f} ms  f+b {fb * 1e3:8.2f} ms  "
          f"mem {case.result['fwd_bwd_bytes'] / 2 ** 20:6.1f} MiB  n={len(case.result['fwd_bwd_s'])}{ratio}",
          flush=True)


if __name__ == "__main__":
  main()
