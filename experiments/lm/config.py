"""Study 4: language modelling on Shakespeare — every mixer at (nearly) equal parameter count, same tokens,
3 seeds, evaluated at its training length and beyond.

  python -m linear_seq.studies.sweep --config=experiments/lm/config.py --workdir=runs/lm --parallel=2
Smoke test: :tiny=True (2 points, ~1-2 min). Options: tiny=True, seeds=N (default 3), arms=softmax+gla (a
subset of ARMS), lengths=512+2048 (the extra evaluation lengths; '' none).

Every run: configs/default.py's byte-level LM (2 layers, 4 heads, MLP 4x, seq_len 128, batch 32), 1200 steps
(the same token budget for every arm), lr 3e-3. Each arm's width is chosen from WIDTHS so that its parameter
count is nearest softmax's at width 128 (studies/params.py; widths an arm cannot build at, e.g. mamba2's
inner width not a multiple of its head dim, are skipped); the table lists the resulting params.
Per point, after training (from its final checkpoint): the validation loss per position in the context
(position_loss.json), the decode time per token after a full context (decode.json, `python -m
linear_seq.studies.speed --decode_workdir=SUB`), and the validation split evaluated again at every T in
LENGTHS (eval_validation_T<T>.json: columns bits_per_byte@T512, ...), with EVAL_TOKENS tokens per batch
(batch 16 at 512, 4 at 2048, 1 at 8192) and the whole split at every length (the last partial sequence is
dropped: 457,244 bytes at T=128, 450,560 at 8,192).
Arms: softmax (RoPE), linear attention with the short causal conv (width 4: without decay, positions or a
conv it sees its prefix as an unordered sum), retention with RoPE on q and k (RetNet's xPos rotation without
its scaling), gla, s4, deltanet with delta_gate none / scalar / channel, mamba2.
Before 2026-12-01 the study ran seven arms with one seed (results_2026_11.md): softmax, linear, retention, gla,
s4, linear-conv4, retention-rope; `:arms=s4+softmax+linear+retention+gla+linear-conv4+retention-rope,seeds=1,
lengths=` gives those points again (the same widths and overrides).
"""
import os

from linear_seq import config_lib
from linear_seq.studies import params

STUDY = "lm"
_DEFAULT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "configs", "default.py")
OPTIONS = ("tiny", "seeds", "arms", "lengths")
# Arms: label -> overrides (the width comes from matching parameter counts).
ARMS = {
    "softmax": {"model.mixer": "softmax"},
    "linear-conv4": {"model.mixer": "linear", "model.conv_width": 4},
    "retention-rope": {"model.mixer": "retention", "model.retention_pos_encoding": "rope"},
    "gla": {"model.mixer": "gla"},
    "s4": {"model.mixer": "s4"},
    "deltanet": {"model.mixer": "deltanet", "model.delta_gate": "none"},
    "deltanet-scalar": {"model.mixer": "deltanet", "model.delta_gate": "scalar"},
    "deltanet-channel": {"model.mixer": "deltanet", "model.delta_gate": "channel"},
    "mamba2": {"model.mixer": "mamba2"},
    # not in the default set (the 2026-11 study's arms, for its results: arms=...+linear+retention,seeds=1,lengths=)
    "linear": {"model.mixer": "linear"},
    "retention": {"model.mixer": "retention"},
}
DEFAULT_ARMS = tuple(a for a in ARMS if a not in ("linear", "retention"))
REFERENCE = ("softmax", 128)  # the parameter budget: softmax at width 128
WIDTHS = tuple(range(96, 161, 8))  # candidate widths (multiples of 8: 4 heads of even size for RoPE)
TINY_ARMS = ("softmax", "gla")
SEEDS = 3
LENGTHS = (512, 2048, 8192)  # evaluation lengths past the training length (128)
EVAL_TOKENS = 8192  # tokens per evaluation batch at those lengths (batch = EVAL_TOKENS // T, at least 1)
TINY_LENGTH = 64  # tiny=True: one extra evaluation at twice its training length
# configs/default.py with the study's budget: 1200 steps for every mixer, the whole validation split.
OVERRIDES = {
    "train.num_steps": 1200, "train.warmup_steps": 100,
    "train.log_every": 50, "train.eval_every": 300, "train.checkpoint_every": 300,
    "eval.batch_size": 32, "eval.max_batches": 0,
}


def get_config(arg: str = ""):
  if config_lib.parse_options(arg, OPTIONS).get("tiny"):
    return config_lib.load_config(f"{_DEFAULT}:tiny=True")
  return config_lib.apply_overrides(config_lib.load_config(_DEFAULT), OVERRIDES)


def label(row: dict) -> str:
  """A point's arm label (ARMS), from its overrides."""
  overrides = row.get("_overrides", row)
  for name, arm in sorted(ARMS.items(), key=lambda kv: -len(kv[1])):  # the most specific arm first
    if all(overrides.get(k) == v for k, v in arm.items()):
      return name
  return str(overrides.get("model.mixer"))


def _opts(arg: str) -> dict:
  opts = config_lib.parse_options(arg, OPTIONS)
  names = (list(TINY_ARMS) if opts.get("tiny")
           else config_lib.parse_subset(opts, "arms", list(ARMS), DEFAULT_ARMS, "arm"))
  lengths = opts.get("lengths", "+".join(map(str, LENGTHS)))
  lengths = [int(t) for t in str(lengths).split("+") if t] if lengths != "" else []
  if any(t <= 0 for t in lengths):
    raise ValueError(f"lengths must be positive sequence lengths joined by '+', got {opts.get('lengths')!r}")
  if opts.get("tiny") and "lengths" not in opts:
    lengths = [TINY_LENGTH]
  return {**opts, "arms": names, "lengths": lengths}


def get_sweep(arg: str = ""):
  opts = _opts(arg)
  if opts.get("tiny"):
    return [{**ARMS[a], "seed": 0} for a in opts["arms"]]
  arms = sorted(opts["arms"], key=lambda a: a != "s4")  # the slowest first (packed rows: its exact reset scan)
  widths = params.matched_widths(get_config(arg), [ARMS[a] for a in arms], WIDTHS, (ARMS[REFERENCE[0]],
                                                                                     REFERENCE[1]))
  # seed-major: every arm of seed 0 before seed 1, so a partial run has every arm
  return [{**ARMS[a], "model.d_model": w, "seed": s}
          for s in range(int(opts.get("seeds", SEEDS))) for a, w in zip(arms, widths)]


def get_eval_args(arg: str = ""):
  del arg
  return ["--position_loss"]


def get_extra_commands(arg: str = ""):
  opts = _opts(arg)
  steps = 4 if opts.get("tiny") else 32
  out = [(["-m", "linear_seq.studies.speed", "--decode_workdir={workdir}", f"--decode_steps={steps}"], "decode.json")]
  for t in opts["lengths"]:  # length generalization, from the final checkpoint
    out.append((["-m", "linear_seq.evaluate", "--workdir={workdir}", f"--config.eval.seq_len={t}",
                 f"--config.eval.batch_size={8 if opts.get('tiny') else max(1, EVAL_TOKENS // t)}", "--overwrite"],
                f"eval_validation_T{t}.json"))
  return out


def by_length(rows) -> list[dict]:
  """One row per (point, evaluation length): 'eval_seq_len' and its 'bits_per_byte' (the training length's from
  eval.json, the others from the bits_per_byte@T<len> columns)."""
  out = []
  for r in rows:
    cols = {r.get("_config", {}).get("data.seq_len"): "bits_per_byte"}
    cols.update({int(k.split("@T")[1]): k for k in r if k.startswith("bits_per_byte@T")})
    out += [{**r, "eval_seq_len": t, "bits_per_byte": r[c]} for t, c in sorted(cols.items())
            if t is not None and isinstance(r.get(c), (int, float))]
  return out


def get_plots(arg: str = ""):
  del arg
  return [
      {"kind": "curves", "y": "eval_loss", "group": label, "file": "eval_loss_curves.png",
       "title": "Shakespeare: validation loss (nats/byte) during training"},
      {"kind": "curves", "y": "train_loss", "group": label, "file": "train_loss_curves.png",
       "title": "Shakespeare: training loss"},
      {"kind": "series", "y": "position_loss", "group": label, "source": "position_loss.json",
       "file": "loss_vs_position.png", "logx": 2, "title": "validation loss vs position in the context",
       "xlabel": "position in the context (tokens)", "ylabel": "loss (nats/token)"},
      {"kind": "xy", "x": label, "y": "bits_per_byte", "file": "bits_per_byte.png",
       "title": "Shakespeare: validation bits/byte", "xlabel": "mixer (arm)"},
      {"kind": "xy", "x": "eval_seq_len", "y": "bits_per_byte", "group": label, "select": by_length, "logx": 2,
       "file": "bits_per_byte_vs_length.png", "title": "Shakespeare: trained at T=128, evaluated at longer T",
       "xlabel": "evaluation length (tokens)"},
  ]
