"""Long context: a small GLA LM trained on 16,384-byte rows with T split over mesh.seq=4 devices.

The sequence-parallel ops are exact, so this trains the same model as one device would, with a quarter of the
sequence (and of the activation memory) per device. On 4 fake CPU devices:
  XLA_FLAGS=--xla_force_host_platform_device_count=4 \\
      python -m linear_seq.main --config=configs/long.py --workdir=runs/long
Result: not measured yet (the 2-core dev machine was saturated when this was written); expect the loss to
fall over the 50 steps. Memory per device: python -m linear_seq.studies.seq_memory (same XLA_FLAGS).
"""
import os

import ml_collections

from linear_seq import config_lib


def get_config(arg: str = "") -> ml_collections.ConfigDict:
  """arg: unused (kept for the config_file:options convention)."""
  del arg
  c = config_lib.load_sibling(os.path.join(os.path.dirname(__file__), "default.py"), "default").get_config("")
  c.model.mixer = "gla"
  c.model.d_model, c.model.num_layers, c.model.num_heads = 64, 2, 2
  c.model.chunk_size = 64
  c.data.seq_len, c.data.batch_size = 16_384, 1
  c.mesh.seq = 4
  c.train.num_steps, c.train.warmup_steps = 50, 5
  c.train.learning_rate = 3e-3
  c.train.log_every, c.train.eval_every, c.train.checkpoint_every = 10, 50, 50
  c.eval.batch_size, c.eval.max_batches = 1, 2
  return c
