"""Long context: a small GLA LM trained on 16,384-byte rows with T split over mesh.seq=4 devices.

The sequence-parallel ops are exact, so this trains the same model as one device would, with a quarter of the
sequence (and of the activation memory) per device. On 4 fake CPU devices:
  XLA_FLAGS=--xla_force_host_platform_device_count=4 \\
      python -m linear_seq.main --config=configs/long.py --workdir=runs/long
Measured (2026-12-01, 4 fake CPU devices on the 2-core dev machine at load 12–17, nice 15; a short run with
--config.train.num_steps=4 --config.train.log_every=1 --config.train.eval_every=4 --config.train.checkpoint_every=4
--config.eval.max_batches=1): train loss 5.553, 5.467, 5.347, 5.210 over steps 1–4, eval loss 5.045 nats
(7.28 bits/byte), ≈ 16 s a step after compilation (≈ 1,040 tokens/s), 61 s CPU in all, 1.3 GB peak RSS; the
full 50 steps not run (compile dominated: 26 min wall at that load). Memory per device:
python -m linear_seq.studies.seq_memory (same XLA_FLAGS; experiments/scaling/README.md).
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
