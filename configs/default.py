"""Default: a small byte-level GLA language model on the embedded Shakespeare corpus.

2 GLA layers (vector gates, chunk form), d_model 128, 4 heads, MLP ×4, tied embeddings: 0.47M parameters;
400 AdamW steps of 32 × 128 bytes (1.6M tokens), warmup 40 then cosine from 5e-3 to 5e-4.

Run (CPU; scripts/run.sh does both):
  python -m linear_seq.main --config=configs/default.py --workdir=runs/default
  python -m linear_seq.evaluate --workdir=runs/default --generate=200
Options: configs/default.py:mixer=retention,tiny=True  (tiny=True shrinks everything to a smoke test).
Result (measured on the 2-core dev CPU while other jobs shared it, so the time is pessimistic): the training
command took 2 min 29 s wall (import, data, compile, 400 steps at up to 17.5k tokens/s, final eval) and reached
validation 1.835 nats/byte = 2.647 bits/byte over the whole validation split (457k bytes; 2.660 with the
schedule's earlier closed form, whose values differ from optax's by <= 15 float32 ulp); uniform is 8 bits/byte,
a unigram model about 4.5. Evaluate takes ~12 s and prints eval.json and a sample.
With the validation curve (eval_every=50 on eval.interim_max_batches=16 batches): the same 2.647 bits/byte
(2.6469; scripts/run.sh from a fresh clone, install included, 3 min 14 s on the quiet 2 cores, 2026-12-05);
3.70 bits/byte at step 50, 2.86 at 200, 2.64 at 350.
"""
import ml_collections

from linear_seq import config_lib

OPTIONS = ("mixer", "tiny")  # get_config options


def model_config() -> ml_collections.ConfigDict:
  m = ml_collections.ConfigDict()
  # Mixer for every layer: softmax | linear | retention | gla | s4 | deltanet | deltaproduct | mamba2.
  m.mixer = "gla"
  # Per-layer mixers for hybrids, comma-separated (e.g. 'gla,softmax,gla,gla'); '' = `mixer` everywhere.
  m.layer_mixers = ""
  # Vocabulary size; 0 = take it from the dataset (the byte tokenizer's size for text).
  m.vocab_size = 0
  # Residual stream width.
  m.d_model = 128
  # Number of blocks (mixer + MLP).
  m.num_layers = 2
  # Heads of every mixer (d_model must divide by it).
  m.num_heads = 4
  # MLP hidden width as a multiple of d_model; 0 = no MLP in the blocks (Zoology's MQAR models).
  m.mlp_ratio = 4
  # MLP kind: gelu (up, GELU, down; with biases) | swiglu (Llama's down(silu(gate x) * up x), no biases).
  m.mlp = "gelu"
  # MLP hidden width in units; 0 = mlp_ratio · d_model (Llama's intermediate_size need not be a round multiple).
  m.mlp_hidden = 0
  # Short causal depthwise conv width (Based/Zoology/fla); 0 = none (with conv_on=input deltanet, deltaproduct,
  # mamba2 need 0).
  m.conv_width = 0
  # Where that conv goes: input (once on the block's input) | qkv (on q, k, v after their projections, as in
  # fla's layers, for softmax/linear/retention/gla; s4 keeps it on its input; deltanet, mamba2 use their own).
  m.conv_on = "input"
  # Block norms (before the mixer and the MLP, and the final one): rms (RMSNorm) | layer (LayerNorm).
  m.norm = "rms"
  # Epsilon of those norms (flax's default 1e-6; Llama's rms_norm_eps, Mamba-2's layer_norm_epsilon).
  m.norm_eps = 1e-6
  # Parameter init: default (each module's own; Linear: LeCun normal) | gpt2 (Linear N(0, 0.02^2), residual
  # output projections / sqrt(2 num_layers), biases 0) | torch (gpt2 outside the mixers; the mixers' Linears
  # PyTorch's default U(+-1/sqrt(fan_in)), unscaled: the published Mamba-2 init) | mamba_ssm (torch with the
  # mixers' output projections / sqrt(num_layers), x2 with an MLP) | torch_in, torch_out (torch's mixer
  # in-projections with gpt2's output projections, or the reverse). linear_seq/param_init.py.
  m.init = "default"
  # Absolute position information added to the token embedding for every mixer: none | learned (max_len
  # positions; cannot extrapolate past them, so off for length-generalization studies).
  m.input_pos = "none"
  # retention, gla, deltanet: swish output gate y = W_o(swish(x W_g) * norm(o)); False = W_o(norm(o)).
  m.output_gate = True
  # Tie the output head to the embedding matrix.
  m.tie_embeddings = True
  # Compute dtype: float32 | bfloat16 (params stay float32).
  m.dtype = "float32"
  # Op computation form: chunk | recurrent | parallel | assoc (linear mixers); fft | scan | assoc (s4).
  m.mode = ""
  # Chunk size of the chunkwise-parallel form (16 is the fastest for vector-gated GLA on a CPU); 0 = the
  # backend's (ops/tuning.py: CPU 16, GPU/TPU 64).
  m.chunk_size = 16
  # softmax: positional encoding none | learned | rope.
  m.pos_encoding = "rope"
  # softmax (pos_encoding=learned) and input_pos=learned: number of learned positions (later ones reuse the last).
  m.max_len = 2048
  # softmax: attention implementation for training and prefill (decoding from a KV cache is always explicit):
  #   auto     — cudnn on a GPU for unpacked causal attention with bfloat16/float16 inputs and head dim <= 256;
  #              else chunked for packed documents off the CPU or T >= 2048; else explicit;
  #   explicit — the [T, T] scores in float32 (jax.nn.dot_product_attention's XLA form), O(T^2) memory;
  #   chunked  — ops.chunked_attention: online softmax over key blocks, causal block skipping, segment ids,
  #              a flash-style backward; O(T) memory, equal to explicit within float32 rounding;
  #   cudnn    — jax.nn.dot_product_attention(implementation='cudnn'); GPU and 16-bit (model.dtype) only.
  m.attention_impl = "auto"
  # linear: feature map by name (identity relu elu1 exp sincos taylor favor rbf).
  m.feature_map = "elu1"
  # linear: random features per head for favor/rbf.
  m.num_features = 64
  # linear: redraw the random projection every N steps; 0 = never.
  m.redraw_every = 0
  # linear: output normalization denominator | norm | none ('' = denominator for positive maps, else norm).
  m.normalize = ""
  # linear: fixed decay a per head (eq. 10-11) as comma-separated values; '' = no decay.
  m.decay = ""
  # retention: comma-separated gammas per head; '' = RetNet's multi-scale 1 - 2^(-5-h).
  m.gamma = ""
  # retention: positional encoding none | rope (q, k rotated: RetNet's xPos rotation without its scaling).
  m.retention_pos_encoding = "none"
  # gla: gate temperature tau (alpha = sigmoid(x W)^(1/tau)).
  m.gate_temperature = 16.0
  # gla, deltanet (delta_gate=channel): rank of the low-rank gate projection.
  m.gate_rank = 16
  # gla: vector gate over K (True) or a scalar gate per head (False).
  m.vector_gate = True
  # s4: state size N per channel (complex, one of each conjugate pair kept); mamba2: N per head (B, C width).
  m.state_size = 64
  # s4: A initialisation lin | inv.
  m.s4_init = "lin"
  # s4: discretization zoh | bilinear.
  m.discretization = "zoh"
  # s4, mamba2, deltanet (gated): smallest learned step size dt at init (log-uniform in [dt_min, dt_max]).
  m.dt_min = 1e-3
  # s4, mamba2, deltanet (gated): largest learned step size dt at init.
  m.dt_max = 1e-1
  # deltanet, deltaproduct: decay none (DeltaNet) | scalar (Gated DeltaNet, one per head) | channel (KDA,
  # per K channel).
  m.delta_gate = "none"
  # deltanet, deltaproduct: beta = sigmoid(x W_b) | 2sigmoid (an older name for negative_eigenvalues=True).
  m.delta_beta = "sigmoid"
  # deltaproduct: delta steps (generalized Householder factors) per token, n_h >= 1 (1 = deltanet).
  m.householder_steps = 2
  # State transitions with eigenvalues in [-1, 1] (Grazzi et al. 2025): deltanet, deltaproduct take
  # beta = 2 sigmoid(x W_b) in (0, 2); gla, mamba2 take alpha -> 2 alpha - 1 in (-1, 1) (signed decays);
  # retention refuses it (fixed decays); softmax, linear, s4 layers of a hybrid are unchanged.
  m.negative_eigenvalues = False
  # mamba2: inner width E as a multiple of d_model.
  m.mamba_expand = 2
  # mamba2: channels P per head (heads = mamba_expand * d_model / mamba_head_dim).
  m.mamba_head_dim = 64
  # Conventions of reference layers (HF Llama, Mamba-2, Qwen3-Next, Kimi Linear; `linear_seq.parity` has a
  # preset per reference; docs/DESIGN.md lists each convention). Every default keeps the mixers as they were.
  # softmax: key/value heads (grouped-query attention: query head h reads kv head h // (H / num_kv_heads));
  # 0 = num_heads.
  m.num_kv_heads = 0
  # softmax: q/k/v head dim; deltanet: q/k head dim; 0 = d_model / num_heads.
  m.head_dim = 0
  # softmax: RoPE base (Llama's rope_theta).
  m.rope_base = 10_000.0
  # mamba2: groups of B and C (head h reads group h // (heads / mamba_groups); HF's n_groups).
  m.mamba_groups = 1
  # mamba2: groups of the gated output RMSNorm (each normalizes E / mamba_norm_groups channels; HF: n_groups).
  m.mamba_norm_groups = 1
  # mamba2: lower clamp of dt after the softplus (HF's time_step_limit[0]); applies when dt_limit_max > 0.
  m.dt_limit_min = 0.0
  # mamba2: upper clamp of dt after the softplus (HF's time_step_limit[1]); 0 = no clamp.
  m.dt_limit_max = 0.0
  # mamba2, deltanet (gated): A init uniform (A ~ U[1, 16]) | arange (A_h = h + 1, HF Mamba-2).
  m.A_init = "uniform"
  # deltanet: q/k heads (value heads h // (num_heads / delta_qk_heads) share one; Qwen3-Next); 0 = num_heads.
  m.delta_qk_heads = 0
  # deltanet: value head dim (state [K, V] per head); 0 = the q/k head dim.
  m.value_head_dim = 0
  # deltanet: epsilon of the per-head output RMSNorm.
  m.delta_norm_eps = 1e-5
  # deltanet: output gate activation swish | sigmoid (KDA).
  m.output_gate_act = "swish"
  # deltanet: output gate projection rank; 0 = a full d_model x H*V projection (KDA: a rank-K pair).
  m.output_gate_rank = 0
  return m


def get_config(arg: str = "") -> ml_collections.ConfigDict:
  """arg: 'mixer=NAME' (every layer's mixer), 'tiny=True' (a seconds-long smoke test)."""
  opts = config_lib.parse_options(arg, OPTIONS)
  c = ml_collections.ConfigDict()
  # Random seed of the parameters (and of random-feature redraws); the data follow data.shuffle_seed.
  c.seed = 0
  # Comma-separated modules (or .py files) imported first: plug-in mixers, datasets, tokenizers (examples/).
  c.imports = ""
  c.model = model_config()

  c.data = ml_collections.ConfigDict()
  # shakespeare | local_text | hf_disk | tiny_shakespeare | lm1b (need TensorFlow) | mqar | selective_copy | induction
  # | parity | mod_count | mod_arith | permutation (state tracking, linear_seq/data/state_tracking.py).
  c.data.dataset = "shakespeare"
  # Folder of .txt files for local_text; for hf_disk a datasets save_to_disk folder or a folder of parquet files.
  c.data.path = ""
  # hf_disk: the column holding the text.
  c.data.text_column = "text"
  # Tokenizer of text datasets: byte | bpe (trained on the train split, data.vocab_size entries, cached) | hf (a
  # converted model's tokenizer.json, set by linear_seq.convert: data/hf_tokenizer.py).
  c.data.tokenizer = "byte"
  # data.tokenizer=hf: the workdir whose hf_tokenizer.json tokenizes text; '' = the run's own workdir, or
  # train.init_from's while the workdir has none yet (a trained workdir keeps a copy).
  c.data.tokenizer_dir = ""
  # Where TFDS prepares datasets; '' = ~/tensorflow_datasets.
  c.data.data_dir = ""
  # Training sequence length (tokens per example).
  c.data.seq_len = 128
  # Global batch size (sharded over the data axis of the mesh).
  c.data.batch_size = 32
  # Seed of the shuffle (independent of the model seed).
  c.data.shuffle_seed = 0
  # Synthetic tasks and the bpe tokenizer: vocabulary size.
  c.data.vocab_size = 1024
  # Synthetic tasks: number of training examples (generated from (seed, index)).
  c.data.num_train = 100_000
  # Synthetic tasks: number of validation examples.
  c.data.num_eval = 1_000
  # mqar: key-value pairs per example.
  c.data.num_kv_pairs = 4
  # selective_copy: tokens to copy; induction: unused.
  c.data.num_tokens_to_copy = 16
  # parity, mod_count, mod_arith, permutation (state tracking): shortest training length; lengths are drawn
  # from [min_len, seq_len], and evaluation lengths above seq_len hold examples of exactly that length.
  c.data.min_len = 3
  # mod_count, mod_arith: the modulus m (>= 2).
  c.data.modulus = 5
  # permutation: the group, S3 | S5 (word problems: the target is the running product).
  c.data.group = "S3"

  c.train = ml_collections.ConfigDict()
  # Fine-tuning: a workdir (e.g. linear_seq.convert's) whose latest intact checkpoint gives the model's
  # parameters (its manifest verified; its model.* fields must equal these but for model.dtype, mode,
  # chunk_size, attention_impl); the optimizer state is fresh, the step 0 and the data order this config's.
  # That workdir is only read. Once this run's workdir has a checkpoint, resuming from it takes precedence.
  # '' = parameters from seed.
  c.train.init_from = ""
  # Optimisation steps.
  c.train.num_steps = 400
  # Peak learning rate (AdamW), reached after warmup, then cosine decay.
  c.train.learning_rate = 5e-3
  # Linear warmup steps.
  c.train.warmup_steps = 40
  # Final learning rate as a fraction of the peak.
  c.train.end_lr_fraction = 0.1
  # AdamW weight decay (not applied to norms, biases, gate biases, the SSM's A and log dt).
  c.train.weight_decay = 0.1
  # AdamW beta1: decay of the first-moment (momentum) average.
  c.train.b1 = 0.9
  # AdamW beta2: decay of the second-moment average.
  c.train.b2 = 0.98
  # Global gradient-norm clipping.
  c.train.grad_clip = 1.0
  # The head (logits) only at each row's first N positions of nonzero weight; 0 = at every position. The loss
  # and gradients are the same when no row has more than N weighted positions (checked on every batch: an
  # error otherwise); for a task with its loss on a few positions (mqar: num_kv_pairs answers) the head then
  # costs N/T of its full cost.
  c.train.loss_positions = 0
  # Gradient accumulation: each step's data.batch_size rows run as N micro-batches of batch_size / N rows (the
  # activation memory of one micro-batch; batch_size / N must divide over mesh.data). The step is the same as
  # with N = 1 to float32 rounding (the loss is the mean over all the batch's loss tokens); 1 = one pass.
  c.train.grad_accum_steps = 1
  # Learning-rate multiplier for the SSM's A and log dt (S4 practice).
  c.train.ssm_lr_multiplier = 0.1
  # Log train metrics every N steps.
  c.train.log_every = 25
  # Evaluate every N steps (and at the end): a validation curve; the evaluations before the last step read
  # eval.interim_max_batches batches, the last one the whole validation split (~15-30 s here).
  c.train.eval_every = 50
  # Save a checkpoint every N steps (and at the end).
  c.train.checkpoint_every = 200
  # Checkpoints to keep.
  c.train.keep_checkpoints = 3
  # Shard parameters over the data axis too (FSDP-style) instead of replicating them.
  c.train.fsdp = False
  # 'START,END': write a jax.profiler trace of steps START..END to WORKDIR/profile/; '' = no profiling.
  c.train.profile_steps = ""
  # Debug: run the ops' value checks (e.g. log_decay <= 0) inside the jitted steps via checkify (slower).
  c.train.debug_checks = False
  # Default precision of float32 matmuls, applied once at start-up: '' = the platform's (GPU: TF32, TPU: one
  # bfloat16 pass, CPU: float32) | default | high | highest | bfloat16 | tensorfloat32 | float32. The delta
  # rule's triangular solve runs at highest whatever this says (docs/DESIGN.md, "Precision").
  c.train.matmul_precision = ""
  # Tokens per rematerialized group of the delta rule's chunk form: 0 = the backend's (ops/tuning.py: CPU 256,
  # GPU/TPU one group), -1 = one group (no recomputation, activation memory grows with T), N = about N tokens.
  c.train.delta_group_tokens = 0
  # Delta rule's triangular inverse: blocks up to this size as elementwise products; 0 = the backend's (4).
  c.train.small_block = 0
  # Tokens per rematerialized group of the linear recurrence's chunk form (linear, retention, gla, mamba2): 0 = the
  # backend's (ops/tuning.py: CPU 512, GPU/TPU one group), -1 = one group, N = about N tokens.
  c.train.linear_group_tokens = 0
  # Memory budget (MiB) of one chunk-form op call's compiled forward+backward: when > 0 both chunk forms choose,
  # per shape, the largest group that fits it (ops/group_budget.py; compiles the op a few times at start-up)
  # instead of the group sizes above; 0 = no budget.
  c.train.memory_budget_mib = 0.0

  c.mesh = ml_collections.ConfigDict()
  # Devices on the mesh's data axis (batch; FSDP shards over it); 0 = all devices not used by seq.
  c.mesh.data = 0
  # Devices on the seq axis (inner, within a host): T splits over it, exact for the linear mixers.
  c.mesh.seq = 1
  c.eval = ml_collections.ConfigDict()
  # Evaluation sequence length; 0 = data.seq_len (larger tests length extrapolation).
  c.eval.seq_len = 0
  # Further evaluation lengths, comma-separated (e.g. '80,160,320'); each adds eval_loss_T<L> and
  # eval_accuracy_T<L> (synthetic) or bits_per_byte_T<L> (text) to every evaluation; '' = none.
  c.eval.lengths = ""
  # Batch size of evaluation.
  c.eval.batch_size = 32
  # Cap on evaluation batches (every evaluation: in training and `evaluate`); 0 = the whole validation split.
  c.eval.max_batches = 0
  # Cap on the batches of the evaluations during training before its last step (a cheap validation curve; also
  # at most eval.max_batches); 0 = as eval.max_batches. The last step's evaluation and `evaluate` read
  # eval.max_batches batches (the whole split by default).
  c.eval.interim_max_batches = 16

  if "mixer" in opts:
    c.model.mixer = opts["mixer"]
  if opts.get("tiny"):
    c.model.d_model, c.model.num_layers, c.model.num_heads = 32, 2, 2
    c.data.seq_len, c.data.batch_size = 32, 8
    c.model.chunk_size = 16  # two chunks per row: exercises the state passing between chunks
    c.train.num_steps, c.train.warmup_steps = 4, 1
    c.train.log_every = c.train.eval_every = c.train.checkpoint_every = 2
    c.eval.batch_size, c.eval.max_batches = 8, 2
  return c
