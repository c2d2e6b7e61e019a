"""State tracking: parity, mod_count, mod_arith and permutation word problems, with length generalization.

Run (CPU):
  python -m linear_seq.main --config=configs/state_tracking.py:task=parity,mixer=deltanet \\
      --config.model.negative_eigenvalues=True --workdir=runs/parity_deltanet_neg
Options: task=parity|mod_count|mod_arith|permutation, mixer=<any mixer> (default deltanet), group=S3|S5
(permutation), modulus=m (mod_count, mod_arith; default 5), tiny=True (a seconds-long smoke test).
Task (linear_seq/data/state_tracking.py): training lengths drawn from [3, 40] (Grazzi et al. 2025's 3-40),
loss and accuracy at every position that has a target (the running state); evaluation at the training lengths
(eval_accuracy) and on examples of exactly 80, 160 and 320 tokens (2x, 4x, 8x: eval_accuracy_T80, _T160,
_T320). The vocabulary is the task's own (2 parity, m mod_count, m + 3 mod_arith, 6 S3, 120 S5). Model:
d_model 64, 2 layers, 2 heads, MLP x2, no absolute positions (they cannot extrapolate; softmax keeps RoPE),
2000 AdamW steps of 64 examples, lr 1e-3 with 100 warmup steps, weight decay 0.01.
Result: none measured yet (the study over mixers, model.negative_eigenvalues and model.householder_steps is
its own issue).
"""
import ml_collections

from linear_seq import config_lib
from linear_seq.data import state_tracking

OPTIONS = ("task", "mixer", "group", "modulus", "tiny")  # get_config options
TRAIN_LEN = 40
EVAL_MULTIPLES = (2, 4, 8)


def get_config(arg: str = "") -> ml_collections.ConfigDict:
  opts = config_lib.parse_options(arg, OPTIONS)
  task = str(opts.get("task", "parity"))
  if task not in state_tracking.TASKS:
    raise ValueError(f"unknown task {task!r}; valid: {', '.join(state_tracking.TASKS)}")
  c = config_lib.load_sibling(__file__, "default").get_config("")
  c.data.dataset = task
  c.data.group, c.data.modulus = str(opts.get("group", "S3")), int(opts.get("modulus", 5))
  c.data.vocab_size = state_tracking.vocab_needed(task, modulus=c.data.modulus, group=c.data.group)
  c.data.seq_len, c.data.min_len = TRAIN_LEN, 3
  c.data.batch_size, c.data.num_train, c.data.num_eval = 64, 100_000, 500
  c.eval.lengths = ",".join(str(k * TRAIN_LEN) for k in EVAL_MULTIPLES)
  c.eval.batch_size, c.eval.max_batches = 100, 0
  c.model.mixer = str(opts.get("mixer", "deltanet"))
  c.model.d_model, c.model.num_layers, c.model.num_heads, c.model.mlp_ratio = 64, 2, 2, 2
  c.train.num_steps, c.train.learning_rate, c.train.warmup_steps, c.train.weight_decay = 2000, 1e-3, 100, 0.01
  c.train.log_every, c.train.eval_every, c.train.checkpoint_every = 50, 500, 500
  if opts.get("tiny"):
    # One model shape for every task but S5 (vocab 8 holds parity's, mod_count's and mod_arith's tokens at
    # modulus 5, and S3's), so the suite compiles it once.
    c.data.vocab_size = max(8, c.data.vocab_size)
    c.data.seq_len, c.data.batch_size, c.data.num_train, c.data.num_eval = 8, 8, 64, 16
    c.eval.lengths, c.eval.batch_size = "16", 8
    c.model.d_model, c.model.chunk_size = 16, 4
    c.train.num_steps, c.train.warmup_steps, c.train.log_every = 2, 1, 1
    c.train.eval_every = c.train.checkpoint_every = 2
  return c
