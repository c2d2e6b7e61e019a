"""Zoology-style multi-query associative recall (MQAR), small enough for a CPU.

Run (CPU, 3-8 min on one core):
  python -m linear_seq.main --config=configs/mqar.py:mixer=gla --workdir=runs/mqar_gla
  python -m linear_seq.evaluate --workdir=runs/mqar_gla          # eval.json: accuracy on the answer positions
Options: mixer=softmax|linear|retention|gla|s4|deltanet|mamba2, tiny=True (a seconds-long smoke test),
setup=zoology (default) | block-conv (the setup of the studies committed before experiments/mqar/ablation.py;
the dated names 2026-12 and 2026-11 stay aliases of the two), point=main (default) | hard (the studies' harder
point: T=128 with 8 key-value pairs, HARD_STEPS steps; experiments/mqar and experiments/hybrids).
Task: vocab 1024, seq_len 64 with 4 key-value pairs, Zoology's random non-query tokens, loss on the answer
positions only, batch 64; d_model 64, 2 layers, 2 heads, no MLP, 1500 AdamW steps.
setup=zoology (formerly 2026-12; issue 11's ablation, experiments/mqar/README.md: Zoology's and fla's layers): the short conv (width 4) on q, k and v after
their projections (fla's layers), learned absolute input positions (64) for every mixer and no RoPE, LayerNorm,
GPT-2 init, an untied output head, no swish output gate, lr 1e-3 with 50 warmup steps and weight decay 0.01;
since 2026-12-02 the head runs only at the num_kv_pairs answer positions (train.loss_positions: the same loss
and gradients, 1.2-1.7x faster train steps; with another data.num_kv_pairs set train.loss_positions to it as well, or
the trainer stops with an error saying so).
setup=block-conv (formerly 2026-11): one conv on the block input, no input positions (softmax: RoPE), RMSNorm, LeCun init, tied head,
swish output gates, lr 1e-2, 100 warmup steps, weight decay 0.1.
The study over mixers, widths and learning rates is experiments/mqar/config.py.
"""
import ml_collections

from linear_seq import config_lib

OPTIONS = ("mixer", "tiny", "setup", "point")  # get_config options
SETUPS = ("zoology", "block-conv")
SETUP_ALIASES = {"2026-12": "zoology", "2026-11": "block-conv"}   # the dated names committed commands use
# The harder point of the MQAR studies: its task overrides (as a study's points name them) and step budget.
HARD = {"data.seq_len": 128, "data.num_kv_pairs": 8, "model.max_len": 128, "train.loss_positions": 8}
HARD_STEPS = 1500
POINTS = ("main", "hard")


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
  c.train.num_steps = 1500
  setup = str(opts.get("setup", SETUPS[0]))
  setup = SETUP_ALIASES.get(setup, setup)
  if setup not in SETUPS:
    raise ValueError(f"unknown setup {setup!r}; valid: {', '.join(SETUPS)} (aliases: {', '.join(SETUP_ALIASES)})")
  point = str(opts.get("point", POINTS[0]))
  if point not in POINTS:
    raise ValueError(f"unknown point {point!r}; valid: {', '.join(POINTS)}")
  if setup == "zoology":
    c.model.conv_on, c.model.input_pos, c.model.max_len, c.model.pos_encoding = "qkv", "learned", 64, "none"
    c.model.norm, c.model.init, c.model.tie_embeddings, c.model.output_gate = "layer", "gpt2", False, False
    c.train.learning_rate, c.train.warmup_steps, c.train.weight_decay = 1e-3, 50, 0.01
  else:
    c.train.learning_rate, c.train.warmup_steps = 1e-2, 100
  c.train.log_every, c.train.eval_every, c.train.checkpoint_every = 50, 500, 500
  c.eval.batch_size, c.eval.max_batches = 200, 0
  if opts.get("tiny"):
    c.data.vocab_size, c.data.seq_len, c.data.num_kv_pairs = 64, 16, 2
    c.data.batch_size, c.data.num_train, c.data.num_eval = 8, 256, 16
    c.model.d_model, c.model.chunk_size = 16, 8
    c.train.num_steps, c.train.warmup_steps = 4, 1
    c.train.log_every = c.train.eval_every = c.train.checkpoint_every = 2
    c.eval.batch_size, c.eval.max_batches = 8, 0
  if setup == "zoology":
    c.train.loss_positions = c.data.num_kv_pairs   # the answers: each row has exactly num_kv_pairs
  if point == "hard" and not opts.get("tiny"):
    c = config_lib.apply_overrides(c, {**HARD, "train.num_steps": HARD_STEPS})
  return c
