"""Study 4: language modelling on Shakespeare: the five mixers at (nearly) equal parameter count, same tokens.

  python -m linear_seq.studies.sweep --config=experiments/lm/config.py --workdir=runs/lm --parallel=2
Run time (2 cores): ~40 min for the 7 runs of 1200 steps, two side by side, single-threaded: S4's point
(32 min: on packed rows it runs the exact scan with resets) starts first and the other six (6-9 min each,
measured) run one after another beside it. (Measured: 45 min for the first six in the old order, S4 fifth.)
Smoke test: :tiny=True (2 points, ~1 min).

Every run: configs/default.py's byte-level LM (2 layers, 4 heads, MLP 4x, seq_len 128, batch 32), 1200 steps
(the same token budget for every mixer), lr 3e-3. The width of each mixer is chosen from WIDTHS so that
its parameter count is nearest softmax's at width 128 (studies/params.py; GLA's gate projections and
retention's output gate add parameters); the table lists the resulting params. Evaluation also writes the
loss per position in the context (position_loss.json, for "how much does a longer context help") and the
decode time per token after a full context (decode.json, `python -m linear_seq.studies.speed
--decode_workdir=SUB`).
A sixth arm runs linear attention with the short causal conv (width 4): without decay, positions or a conv,
linear attention sees its prefix as an unordered (normalized) sum, so it cannot tell which byte came last.
A seventh runs retention with RoPE on q and k (RetNet's xPos rotation, without its scaling): the fixed
multi-scale decays alone (γ ≥ 0.97) barely tell the last byte from the ones before it.
Options: tiny=True, seeds=N, mixers=softmax+gla.
"""
import os

from linear_seq import config_lib
from linear_seq.studies import params

STUDY = "lm"
_DEFAULT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "configs", "default.py")
OPTIONS = ("tiny", "seeds", "mixers")
MIXERS = ("softmax", "linear", "retention", "gla", "s4")
REFERENCE = ("softmax", 128)  # the parameter budget: softmax at width 128
WIDTHS = tuple(range(96, 161, 8))  # candidate widths (multiples of 8: 4 heads of even size for RoPE)
TINY_MIXERS = ("softmax", "gla")
CONV_WIDTH = 4  # the extra linear-attention arm's short causal conv (0.3% more parameters)
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
  """A point's arm: the mixer, '+conv4' with the short convolution, '+rope' for retention with RoPE."""
  overrides = row.get("_overrides", row)
  conv = overrides.get("model.conv_width")
  name = f"{overrides.get('model.mixer')}+conv{conv}" if conv else str(overrides.get("model.mixer"))
  return name + ("+rope" if overrides.get("model.retention_pos_encoding") == "rope" else "")


def get_sweep(arg: str = ""):
  opts = config_lib.parse_options(arg, OPTIONS)
  if opts.get("tiny"):
    return [{"model.mixer": m, "seed": 0} for m in TINY_MIXERS]
  mixers = str(opts.get("mixers", "+".join(MIXERS))).split("+")
  unknown = [m for m in mixers if m not in MIXERS]
  if unknown:
    raise ValueError(f"unknown mixer(s) {unknown}; valid: {', '.join(MIXERS)}")
  seeds = range(int(opts.get("seeds", 1)))
  mixers = sorted(mixers, key=lambda m: m != "s4")  # the slowest first (packed rows: its exact reset scan)
  widths = params.matched_widths(get_config(arg), mixers, WIDTHS, REFERENCE)
  arms = [{"model.mixer": m, "model.d_model": widths[m]} for m in mixers]
  if "linear" in widths:  # the same linear attention with a short conv: its only handle on token order
    arms.append({"model.mixer": "linear", "model.conv_width": CONV_WIDTH, "model.d_model": widths["linear"]})
  if "retention" in widths:  # retention with RoPE on q, k (RetNet's xPos rotation): no extra parameters
    arms.append({"model.mixer": "retention", "model.retention_pos_encoding": "rope",
                 "model.d_model": widths["retention"]})
  return [{**arm, "seed": s} for arm in arms for s in seeds]


def get_eval_args(arg: str = ""):
  del arg
  return ["--position_loss"]


def get_extra_commands(arg: str = ""):
  steps = 4 if config_lib.parse_options(arg, OPTIONS).get("tiny") else 32
  return [(["-m", "linear_seq.studies.speed", "--decode_workdir={workdir}", f"--decode_steps={steps}"], "decode.json")]


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
  ]
