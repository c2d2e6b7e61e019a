"""Why does S4D lose bits/byte past its training length when the gated mixers do not? (issue 12, part 2)

  python -m linear_seq.studies.sweep --config=experiments/lm/length_check.py --workdir=runs/lm_length \
      --archive=experiments/lm/points_length --parallel=2
  python experiments/lm/length_table.py --workdir=runs/lm_length [--out=experiments/lm/length_check.md]
Smoke test: :tiny=True (2 points).

The LM study (config.py beside this file) trains at T=128 and evaluates at 512 / 2,048 / 8,192: softmax loses
3.7 bits/byte there (RoPE past its trained distances, the published direction), GLA, Mamba-2 and the gated
DeltaNets gain ~0.03, but S4D *loses* 0.16 (3 seeds) although it is a decayed recurrence too. The hypothesis
tested here: S4D's input-independent decays keep slow modes (Δ log-uniform in [dt_min, dt_max] = [1e-3, 1e-1]
at init: |Ab| = exp(−Δ/2), e-folding horizons 2/Δ from 20 to 2,000 tokens) whose sums keep growing past the
128 tokens any training row held, while a gated mixer can forget on its input.
The LM study's pilot already points there: S4D's loss at T=8,192 minus T=128 falls with the learning rate
(seed 0: +0.63 at 1e-3 and 3e-3, +0.20 at 1e-2, +0.02 at 3e-2); every other decayed arm's change is the same
at every rate. Result (2026-12-04, length_check.md): s4-fast removes the loss (+0.198 -> -0.015 at 1e-2, +0.633 ->
+0.022 at 1e-3) and training barely moves the step sizes at either rate (median horizon 182 / 185 tokens vs 200 at
init), so the rate dependence is not the kernels' memory shrinking.
Points (seed 0, the LM study's setup and widths), at its chosen rate 1e-2 and at 1e-3 where it lost most:
  s4          the study's arm again (its checkpoint is needed; its bits/byte must repeat the archived
              2.292 / 2.640);
  s4-fast     s4 with model.dt_min = 1/64: at init every mode's horizon 2/Δ ≤ 128 tokens (training may
              lengthen it; s4_memory.json says by how much);
  gla         (1e-2 only) a gated arm that stays flat, for the loss-by-position contrast (not run on
              2026-12-04: the four S4D points answered the question; `:arms=gla` runs it).
Per point, after training: the validation split at every T in LENGTHS with the loss per position
(eval_validation_T<T>.json, position_loss_validation_T<T>.json) and the trained S4D kernels' mass past 128 lags
(s4_memory.py: s4_memory.json). length_table.py tabulates bits/byte per length and the loss per position band
of the T=8,192 evaluation (positions 1–128, 129–512, 513–2,048, 2,049–8,192).
Options: tiny=True, arms=s4+gla (a subset of ARMS).
"""
import os

from linear_seq import config_lib
from linear_seq.studies import protocol
from linear_seq.studies import tables

STUDY = "lm_length"
_HERE = os.path.dirname(os.path.abspath(__file__))
_LM = os.path.join(_HERE, "config.py")
_MEMORY = os.path.join(_HERE, "s4_memory.py")
OPTIONS = ("tiny", "arms")
FAST_DT_MIN = 1 / 64  # |Ab| = exp(-dt/2) at init (Re A = -1/2): horizon 2/dt <= 128 tokens
ARMS = {
    "s4": {"model.mixer": "s4"},
    "s4-fast": {"model.mixer": "s4", "model.dt_min": FAST_DT_MIN},
    "gla": {"model.mixer": "gla"},
}
WIDTHS = {"s4": 128, "s4-fast": 128, "gla": 120}   # the LM study's matched widths
# (arm, learning rate) in run order: 1e-2 is the LM pilot's choice for s4 and gla, 1e-3 where s4 lost most
POINTS = (("s4", 1e-2), ("s4-fast", 1e-2), ("s4", 1e-3), ("s4-fast", 1e-3), ("gla", 1e-2))
LENGTHS = (512, 2048, 8192)
BANDS = ((1, 128), (129, 512), (513, 2048), (2049, 8192))   # 1-based positions, the T=8,192 evaluation
TINY_LENGTH = 64


def _lm():
  return config_lib.load_module(_LM)


def _opts(arg: str) -> dict:
  opts = config_lib.parse_options(arg, OPTIONS)
  names = (["s4", "gla"] if opts.get("tiny")
           else config_lib.parse_subset(opts, "arms", list(ARMS), list(ARMS), "arm"))
  return {**opts, "arms": names}


def get_config(arg: str = ""):
  return _lm().get_config("tiny=True" if _opts(arg).get("tiny") else "")


def point_label(row: dict) -> str:
  """'s4-fast lr 0.001': the arm and its rate (the tables' and plot's rows)."""
  lr = row.get("_overrides", row).get("train.learning_rate")
  return protocol.arm_of(row, ARMS) + ("" if lr is None else f" lr {lr:g}")


def get_sweep(arg: str = ""):
  opts = _opts(arg)
  if opts.get("tiny"):
    return [protocol.point(ARMS, a, {}, None, 0) for a in opts["arms"]]
  return [protocol.point(ARMS, a, {"model.d_model": WIDTHS[a]}, lr, 0) for a, lr in POINTS if a in opts["arms"]]


def get_eval_args(arg: str = ""):
  del arg
  return ["--position_loss"]


def get_extra_commands(arg: str = ""):
  tiny = _opts(arg).get("tiny")
  lengths = [TINY_LENGTH] if tiny else LENGTHS
  train_len = get_config(arg).data.seq_len
  out = [protocol.length_eval(t, _lm().EVAL_TOKENS, bool(tiny), "--position_loss") for t in lengths]
  out.append(([_MEMORY, "--workdir={workdir}", f"--train_len={train_len}", f"--max_lag={max(lengths)}"], "s4_memory.json"))
  return out


def get_plots(arg: str = ""):
  del arg
  return [{"kind": "xy", "x": "eval_seq_len", "y": "bits_per_byte", "group": point_label,
           "select": tables.by_length, "logx": 2, "file": "bits_per_byte_vs_length.png",
           "title": "Shakespeare LM trained at T=128 (seed 0): S4D with slow vs fast modes",
           "xlabel": "evaluation length (tokens)", "ylabel": "validation bits/byte"}]
