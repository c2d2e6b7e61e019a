"""Study 4: language modelling on Shakespeare — every mixer at (nearly) equal parameter count, same tokens,
each at its own learning rate, 3 seeds, evaluated at its training length and beyond.

  python -m linear_seq.studies.sweep --config=experiments/lm/config.py:stage=pilot --workdir=runs/lm \
      --archive=experiments/lm/points --parallel=2
  python -m linear_seq.studies.sweep --config=experiments/lm/config.py:stage=main --workdir=runs/lm \
      --archive=experiments/lm/points --parallel=2
Stages: pilot = seed 0 of every arm at each of PILOT_LRS (30 points), plus one rate further out for an arm whose
best is at an edge (RULE: 3e-4 below 1e-3, 3e-2 above 1e-2); main = the pilot, then seeds 1.. at each
arm's chosen rate (lowest seed-0 validation bits/byte; seed 0's main point is its pilot point). Smoke test:
:tiny=True (2 points, ~1-2 min). Options: stage=pilot|main (default main), tiny=True, seeds=N or seeds=0+2 (a count or the seeds; default 3),
arms=softmax+gla (a subset of ARMS), lengths=512+2048 (the extra evaluation lengths; '' none).

Every run: configs/default.py's byte-level LM (2 layers, 4 heads, MLP 4x, seq_len 128, batch 32), 1200 steps
(the same token budget for every arm). Each arm's width is chosen from WIDTHS so that its parameter
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
its scaling), gla, s4, deltanet with delta_gate none / scalar / channel, mamba2 (head dim 64: at width 128, 24% more
parameters than softmax) and mamba2-p32 (head dim 32, width 112: within 3% of softmax's count).
Before 2026-12-01 the study ran seven arms with one seed at configs/default.py's lr 5e-3 for every arm
(results_2026_11.md): softmax, linear, retention, gla, s4, linear-conv4, retention-rope.
"""
import os

from linear_seq import config_lib
from linear_seq.studies import params
from linear_seq.studies import protocol

STUDY = "lm"
_TASK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "configs", "shakespeare.py")
OPTIONS = ("tiny", "stage", "seeds", "arms", "lengths")
STAGES = ("pilot", "main")
# Arms: label -> overrides (the width comes from matching parameter counts).
ARMS = {
    **protocol.arms("softmax"),
    "linear-conv4": {"model.mixer": "linear", "model.conv_width": 4},
    "retention-rope": {"model.mixer": "retention", "model.retention_pos_encoding": "rope"},
    **protocol.arms("gla", "s4", "deltanet", "deltanet-scalar", "deltanet-channel", "mamba2"),
    # Mamba-2 with head dim 32 (7 heads at width 112): its usual head dim 64 builds only at widths that are
    # multiples of 32, and the nearest, 128, has 24% more parameters than softmax at 128 (531,864 vs 428,160);
    # at 112 with P=32 it has 416,058 (added 2026-12-03, after the pilot had run the P=64 arm).
    "mamba2-p32": {"model.mixer": "mamba2", "model.mamba_head_dim": 32},
    # not in the default set (the 2026-11 study's arms, for its results: arms=...+linear+retention,seeds=1,lengths=)
    **protocol.arms("linear", "retention"),
}
DEFAULT_ARMS = tuple(a for a in ARMS if a not in ("linear", "retention"))
REFERENCE = ("softmax", 128)  # the parameter budget: softmax at width 128
WIDTHS = tuple(range(96, 161, 8))  # candidate widths (multiples of 8: 4 heads of even size for RoPE)
TINY_ARMS = ("softmax", "gla")
SEEDS = 3
# Each arm's learning rate, from seed 0 at its matched width (the pilot; lowest validation bits/byte, ties to
# the smaller rate): PILOT_LRS, then one more step out when the best is at either edge (3e-4 below 1e-3, 3e-2
# above 1e-2), so the chosen rate is bracketed unless the extension wins too (reported, not extended further).
PILOT_LRS = (1e-3, 3e-3, 1e-2)
RULE = protocol.LrRule(PILOT_LRS, metric="bits_per_byte", direction="min", edge="both")
LENGTHS = (512, 2048, 8192)  # evaluation lengths past the training length (128)
EVAL_TOKENS = 8192  # tokens per evaluation batch at those lengths (batch = EVAL_TOKENS // T, at least 1)
TINY_LENGTH = 64  # tiny=True: one extra evaluation at twice its training length
def get_config(arg: str = ""):
  """The task: configs/shakespeare.py's LM budget (tiny: its smoke test)."""
  return config_lib.load_config(f"{_TASK}:tiny=True" if config_lib.parse_options(arg, OPTIONS).get("tiny") else _TASK)


def label(row: dict) -> str:
  """A point's arm label (ARMS): the one its point carries, else the most specific arm its overrides match."""
  return protocol.arm_of(row, ARMS)


def _opts(arg: str) -> dict:
  opts = config_lib.parse_options(arg, OPTIONS)
  stage = protocol.choice(opts, "stage", STAGES, "main")
  seeds = protocol.seeds(opts.get("seeds", SEEDS))   # a count, or an explicit list such as 0+2
  names = (list(TINY_ARMS) if opts.get("tiny")
           else config_lib.parse_subset(opts, "arms", list(ARMS), DEFAULT_ARMS, "arm"))
  lengths = opts.get("lengths", "+".join(map(str, LENGTHS)))
  lengths = [int(t) for t in str(lengths).split("+") if t] if lengths != "" else []
  if any(t <= 0 for t in lengths):
    raise ValueError(f"lengths must be positive sequence lengths joined by '+', got {opts.get('lengths')!r}")
  if opts.get("tiny") and "lengths" not in opts:
    lengths = [TINY_LENGTH]
  return {**opts, "stage": stage, "seeds": seeds, "arms": names, "lengths": lengths}


def _widths(arg: str, arms: list[str]) -> dict[str, int]:
  widths = params.matched_widths(get_config(arg), [ARMS[a] for a in arms], WIDTHS, (ARMS[REFERENCE[0]],
                                                                                     REFERENCE[1]))
  return dict(zip(arms, widths))


def point(arm: str, width: int, lr: float, seed: int) -> dict:
  return protocol.point(ARMS, arm, {"model.d_model": width}, lr, seed)


TUNING = protocol.Tuning(RULE, lambda arm, width, lr: point(arm, width, lr, 0))


def get_sweep(arg: str = ""):
  """The pilot's points (both stages start from them: they choose each arm's learning rate)."""
  opts = _opts(arg)
  if opts.get("tiny"):
    return [{**ARMS[a], "seed": 0} for a in opts["arms"]]
  arms = sorted(opts["arms"], key=lambda a: a != "s4")  # the slowest first (packed rows: its exact reset scan)
  widths = _widths(arg, arms)
  return [point(a, widths[a], lr, 0) for a in arms for lr in PILOT_LRS]


def best_lr(rows, arm: str, width: int) -> tuple[float | None, list[dict]]:
  """(arm's learning rate, pilot points still to run before it is known): RULE over its seed-0 points."""
  decision = TUNING.decide(rows, arm, width)
  return decision.lr, [point(arm, width, lr, 0) for lr in decision.todo]


def get_followup_sweep(rows, arg: str = ""):
  """pilot: the edge rates still needed; main: every seed at each arm's chosen rate (seed 0 is its pilot point)."""
  opts = _opts(arg)
  if opts.get("tiny"):
    return []
  arms = sorted(opts["arms"], key=lambda a: a != "s4")
  widths = _widths(arg, arms)
  pending, lrs = [], {}
  for a in arms:
    lr, todo = best_lr(rows, a, widths[a])
    pending += todo
    if lr is not None:
      lrs[a] = lr
  if opts["stage"] == "pilot":
    return pending
  # seed-major: every arm of a seed before the next seed, so a partial run has every arm
  return pending + [point(a, widths[a], lrs[a], s) for s in opts["seeds"] for a in arms if a in lrs]


def chosen(rows) -> list[dict]:
  """The rows at their arm's chosen rate (what the tables and plots compare); rows without a rate override
  (tiny=True) are kept, arms whose rate is undecided are left out."""
  out = []
  for r in rows:
    o = r["_overrides"]
    if "train.learning_rate" not in o:
      out.append(r)
      continue
    arm = label(r)
    if arm in ARMS and best_lr(rows, arm, o["model.d_model"])[0] == o["train.learning_rate"]:
      out.append(r)
  return out


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


# arms left out of the zoomed length plot: they lose 0.7 (deltanet) and 3.7 (softmax) bits/byte by T=8,192
ZOOM_LEFT_OUT = ("softmax", "deltanet")


def get_plots(arg: str = ""):
  """Every plot at each arm's chosen learning rate (the pilot's other rates left out)."""
  del arg
  return [
      {"kind": "curves", "y": "eval_loss", "group": label, "groups": list(ARMS), "select": chosen, "file": "eval_loss_curves.png",
       "title": "Shakespeare: validation loss during training", "ylabel": "validation loss (nats/byte)"},
      {"kind": "curves", "y": "train_loss", "group": label, "groups": list(ARMS), "select": chosen, "file": "train_loss_curves.png",
       "title": "Shakespeare: training loss", "ylabel": "training loss (nats/byte)"},
      {"kind": "series", "y": "position_loss", "group": label, "groups": list(ARMS), "select": chosen, "source": "position_loss.json",
       "file": "loss_vs_position.png", "logx": 2, "title": "validation loss vs position in the context",
       "xlabel": "position in the context (bytes)", "ylabel": "validation loss (nats/byte)"},
      {"kind": "xy", "x": label, "y": "bits_per_byte", "select": chosen, "file": "bits_per_byte.png",
       "title": "Shakespeare: validation bits/byte", "xlabel": "mixer (arm)"},
      {"kind": "xy", "x": "eval_seq_len", "y": "bits_per_byte", "group": label, "groups": list(ARMS),
       "select": lambda rows: by_length(chosen(rows)), "logx": 2,
       "file": "bits_per_byte_vs_length.png", "title": "Shakespeare: trained at T={data.seq_len}, evaluated at longer T",
       "xlabel": "evaluation length (bytes)", "ylabel": "validation bits/byte"},
      {"kind": "xy", "x": "eval_seq_len", "y": "bits_per_byte", "group": label, "groups": list(ARMS),
       "select": lambda rows: [r for r in by_length(chosen(rows)) if label(r) not in ZOOM_LEFT_OUT], "logx": 2,
       "file": "bits_per_byte_vs_length_zoom.png",
       "title": f"the same without {' and '.join(ZOOM_LEFT_OUT)} (their rise hides the others' changes)",
       "xlabel": "evaluation length (bytes)", "ylabel": "validation bits/byte"},
  ]
