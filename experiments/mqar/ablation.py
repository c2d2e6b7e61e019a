"""Why MQAR learns slowly here (issue 11, part 1): our setup against an independent model's, factor by factor.

  python -m linear_seq.studies.sweep --config=experiments/mqar/ablation.py --workdir=runs/mqar_ablation --parallel=2
  python experiments/mqar/ablation_table.py runs/mqar_ablation/results.csv     # the Δ-accuracy table

Every point is configs/mqar.py at (T=64, 4 kv pairs), width 64, lr 1e-3 (the independent model's), seeds 0, 1.
Variants ('arms'): `ours` (configs/mqar.py as committed before this study, at lr 1e-3), `indep` (every listed
factor moved to the independent model's choice at once) and `indep-<factor>` (indep with that one factor
reverted to ours). Factors (ours → independent model's):
  conv:  one short conv on the block input → convs on q, k, v after their projections (model.conv_on)
  pos:   none (softmax: RoPE) → learned absolute positions on the input for every mixer (model.input_pos)
  gate:  swish output gate → none, HeadNorm only (retention, gla: model.output_gate)
  init:  LeCun normal → GPT-2's N(0, 0.02²), residual outputs / √(2L) (model.init)
  norm:  RMSNorm → LayerNorm (model.norm)
  optim: weight decay 0.1, warmup 100 → 0.01, 50
  + (on top of indep, after it alone did not close the gap) untied head, Adam β₂ 0.999, constant lr, no clip
Options: mixers=softmax+retention+gla, seeds=N, variants=ours/indep/indep+untied/... (a subset, '/'-separated),
steps=N, tiny=True.
"""
import os

from linear_seq import config_lib

STUDY = "mqar_ablation"
_MQAR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "configs", "mqar.py")
OPTIONS = ("tiny", "mixers", "seeds", "variants", "steps")

MIXERS = ("softmax", "retention", "gla")
# Each factor: (ours, the independent model's), as overrides. Mixer-specific values are resolved in `_factor`.
FACTORS = {
    "conv": ({"model.conv_on": "input"}, {"model.conv_on": "qkv"}),
    "pos": ({"model.input_pos": "none"}, {"model.input_pos": "learned", "model.max_len": 64}),
    "gate": ({"model.output_gate": True}, {"model.output_gate": False}),
    "init": ({"model.init": "default"}, {"model.init": "gpt2"}),
    "norm": ({"model.norm": "rms"}, {"model.norm": "layer"}),
    "optim": ({"train.weight_decay": 0.1, "train.warmup_steps": 100},
              {"train.weight_decay": 0.01, "train.warmup_steps": 50}),
}
GATED = ("retention", "gla")  # mixers with an output gate
# Differences not on the list, tried on top of `indep` (variant 'indep+<name>') after `indep` alone
# did not close the gap: an untied output head, Adam's usual β₂ = 0.999 (ours 0.98), a constant learning rate
# after warmup (ours: cosine to 0.1×), no gradient clipping (ours: global norm 1).
EXTRAS = {
    "untied": {"model.tie_embeddings": False},
    "b2": {"train.b2": 0.999},
    "constlr": {"train.end_lr_fraction": 1.0},
    "noclip": {"train.grad_clip": 0.0},
}


def _factor(name: str, mixer: str, indep: bool) -> dict:
  if name == "gate" and mixer not in GATED:
    return {}
  out = dict(FACTORS[name][1 if indep else 0])
  if name == "pos" and mixer == "softmax":  # the independent softmax has only the absolute positions
    out["model.pos_encoding"] = "none" if indep else "rope"
  return out


def variant(mixer: str, name: str) -> dict | None:
  """Overrides of a variant for a mixer (None where it does not apply: the gate for softmax)."""
  if name == "ours":
    return {}
  if name.startswith("indep+"):
    return {**variant(mixer, "indep"), **EXTRAS[name.removeprefix("indep+")]}
  reverted = name.removeprefix("indep-") if name.startswith("indep-") else None
  if reverted == "gate" and mixer not in GATED:
    return None
  out = {}
  for f in FACTORS:
    out.update(_factor(f, mixer, indep=f != reverted))
  return out


VARIANTS = ("ours", "indep") + tuple(f"indep+{e}" for e in EXTRAS) + tuple(f"indep-{f}" for f in FACTORS)


def variant_of(row: dict) -> str:
  """The variant label of a result row (inverse of `variant`)."""
  o = row.get("_overrides", row)
  mixer = o.get("model.mixer")
  keys = ({k for f in FACTORS for side in FACTORS[f] for k in side} | {"model.pos_encoding", "model.max_len"}
          | {k for e in EXTRAS.values() for k in e})
  own = {k: v for k, v in o.items() if k in keys}
  for name in VARIANTS:
    v = variant(mixer, name)
    if v is not None and v == own:
      return name
  return "?"


def get_config(arg: str = ""):
  """configs/mqar.py at lr 1e-3, evaluated every 250 steps (the step where accuracy passes 0.99 is logged)."""
  opts = config_lib.parse_options(arg, OPTIONS)
  if opts.get("tiny"):
    return config_lib.load_config(f"{_MQAR}:tiny=True")
  c = config_lib.apply_overrides(config_lib.load_config(_MQAR), {
      "train.learning_rate": 1e-3, "eval.batch_size": 250, "train.eval_every": 250})
  if opts.get("steps"):
    c = config_lib.apply_overrides(c, {"train.num_steps": int(opts["steps"])})
  return c


def get_sweep(arg: str = ""):
  opts = config_lib.parse_options(arg, OPTIONS)
  mixers = str(opts.get("mixers", "+".join(MIXERS))).split("+")
  names = str(opts.get("variants", "/".join(VARIANTS))).split("/")
  for label, given, valid in (("mixer", mixers, MIXERS), ("variant", names, VARIANTS)):
    unknown = [g for g in given if g not in valid]
    if unknown:
      raise ValueError(f"unknown {label}(s) {unknown}; valid: {', '.join(valid)}")
  width = 16 if opts.get("tiny") else 64
  seeds = range(int(opts.get("seeds", 1 if opts.get("tiny") else 2)))
  points = []
  for s in seeds:  # seed-major, then variant: every cell has one seed before any has two
    for name in names:
      for mixer in mixers:
        v = variant(mixer, name)
        if v is not None:
          points.append({"model.mixer": mixer, "model.d_model": width, **v, "seed": s})
  return points


def get_plots(arg: str = ""):
  del arg
  return []  # the study's result is a table (ablation_table.py)
