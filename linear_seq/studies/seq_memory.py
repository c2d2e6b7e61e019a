"""Compiled per-device memory of one GLA training step, with T split over seq ∈ {1, 4} devices.

Nothing runs: each step is lowered and compiled for abstract inputs and `compiled.memory_analysis()` gives the
bytes one device needs (arguments + outputs + temporaries − aliased). seq=1 is one device holding all T tokens;
seq=4 is the data=1 × seq=4 mesh (each device holds T/4; the op is exact across the shards). Needs 4 devices,
e.g. 4 fake CPU devices:

  XLA_FLAGS=--xla_force_host_platform_device_count=4 python -m linear_seq.studies.seq_memory \\
      [--lengths=4096,16384,65536]

(standalone until the op benchmark moves to linear_seq/studies/bench.py, which should print these rows).
"""
import os
from typing import Sequence

from absl import app
from absl import flags
import jax
import numpy as np

from linear_seq import cli
from linear_seq import config_lib
from linear_seq import sharding
from linear_seq import steps

_FLAGS = flags.DEFINE_list("lengths", ["4096", "16384", "65536"], "Sequence lengths T.")
VOCAB = 258


def gla_config(seq_len: int):
  """The default GLA LM (2 layers, d_model 128) at batch 1 and the given length."""
  path = os.path.join(os.path.dirname(__file__), "..", "..", "configs", "default.py")
  default = config_lib.load_sibling(path, "default")
  return config_lib.apply_overrides(default.get_config(""), {"data.seq_len": seq_len, "data.batch_size": 1})


def step_memory(seq_len: int, seq: int) -> int:
  """Bytes per device of one compiled training step (batch 1, T = seq_len) on a 1 × seq mesh."""
  config = gla_config(seq_len)
  mesh = sharding.make_mesh(jax.devices()[:1]) if seq == 1 else sharding.make_mesh(jax.devices()[:seq], seq=seq)
  static, abstract, shardings = steps.setup(config, VOCAB, mesh)
  state = jax.tree.map(lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), abstract, shardings)
  spec = sharding.batch_sharding(mesh)
  batch = {k: jax.ShapeDtypeStruct((1, seq_len), dt, sharding=spec) for k, dt in
           (("inputs", np.int32), ("targets", np.int32), ("weights", np.float32), ("segment_ids", np.int32))}
  with jax.set_mesh(mesh):
    compiled = static.train_step.lower(state, batch).compile()
  m = compiled.memory_analysis()
  return int(m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes - m.alias_size_in_bytes)


def rows(lengths: Sequence[int]) -> list[dict]:
  out = []
  for T in lengths:
    one, four = step_memory(T, 1), step_memory(T, 4)
    out.append({"T": T, "seq1_MiB": one / 2**20, "seq4_MiB": four / 2**20, "ratio": four / one})
  return out


def main(argv):
  del argv
  cli.exit_if_dry_run(f"would compile a GLA training step at T={_FLAGS.value} on seq=1 and seq=4")
  if jax.device_count() < 4:
    raise app.UsageError("needs 4 devices: XLA_FLAGS=--xla_force_host_platform_device_count=4")
  print("| T | seq=1 MiB/device | seq=4 MiB/device | seq=4 / seq=1 |\n|---|---|---|---|")
  for r in rows([int(t) for t in _FLAGS.value]):
    print(f"| {r['T']} | {r['seq1_MiB']:.1f} | {r['seq4_MiB']:.1f} | {r['ratio']:.3f} |", flush=True)


if __name__ == "__main__":
  cli.define_dry_run_flag()
  app.run(main)
