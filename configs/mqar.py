"""Zoology-style multi-query associative recall (MQAR), small enough for a CPU.

Run (CPU, a few minutes on 2 cores):
  python -m linear_seq.main --config=configs/mqar.py:mixer=gla --workdir=runs/mqar_gla
  python -m linear_seq.evaluate --workdir=runs/mqar_gla          # eval.json: accuracy on the answer positions
Options: mixer=softmax|linear|retention|gla|s4, tiny=True (a seconds-long smoke test).
Setup: vocab 1024, seq_len 64 with 4 key-value pairs, loss on the answer positions only, batch 64, d_model 64,
2 layers, no MLP, a short causal conv (width 4) before every mixer, 1500 AdamW steps at lr 1e-2 (at 3e-3
only softmax at width 128 got past the 25% plateau in 1500 steps; see experiments/mqar/).
The study over mixers, widths and learning rates is experiments/mqar/config.py.
"""
import ml_collections

from linear_seq import config_lib

OPTIONS = ("mixer", "tiny")  # get_config options


def get_config(arg: str = "") -> ml_collections.ConfigDict:
  opts = config_lib.parse_options(arg, OPTIONS)
  c = config_lib.load_sibling(__file__, "default").get_config("")
  c.data.dataset = "mqar"
  c.data.vocab_size = 1024
  c.data.seq_len, c.data.num_kv_pairs = 64, 4
  c.data.batch_size = 64
  c.data.num_train, c.data.num_eval = 100_000, 1_000
  c.model.mixer = opts.get("mixer", "gla")
  c.model.d_model, c.model.num_layers, c.model.num_heads = 64, 2, 2
  c.model.mlp_ratio = 0
  c.model.conv_width = 4
  c.train.num_steps, c.train.warmup_steps = 1500, 100
  c.train.learning_rate = 1e-2
  c.train.log_every, c.train.eval_every, c.train.checkpoint_every = 50, 500, 500
  c.eval.batch_size, c.eval.max_batches = 200, 0
  if opts.get("tiny"):
    c.data.vocab_size, c.data.seq_len, c.data.num_kv_pairs = 64, 16, 2
    c.data.batch_size, c.data.num_train, c.data.num_eval = 8, 256, 16
    c.model.d_model, c.model.chunk_size = 16, 8
    c.train.num_steps, c.train.warmup_steps = 4, 1
    c.train.log_every = c.train.eval_every = c.train.checkpoint_every = 2
    c.eval.batch_size, c.eval.max_batches = 8, 0
  return c
