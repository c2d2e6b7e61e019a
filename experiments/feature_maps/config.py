"""Study 2: linear attention's feature map, on MQAR and on the Shakespeare LM.

  python -m linear_seq.studies.sweep --config=experiments/feature_maps/config.py:task=mqar \
      --workdir=runs/fmaps_mqar --parallel=2
  python -m linear_seq.studies.sweep --config=experiments/feature_maps/config.py:task=lm \
      --workdir=runs/fmaps_lm --parallel=2
Run time (2 cores, measured): task=mqar ≈ 40 min (8 runs; taylor alone ≈ 32 min), task=lm ≈ 52 min (8 runs;
taylor alone ≈ 50 min beside the other seven's 46 min; `maps=` without taylor: ≈ 25 min).
Smoke test: :task=mqar,tiny=True (2 points, ~1 min).

Maps: identity relu elu1 exp sincos taylor favor rbf. Maps that can go negative (identity, sincos) run with
an output norm instead of the D⁻¹ denominator (it can divide by ~0); the positive maps use the denominator.
The `model.normalize` column of the table says which each row used. task=mqar: the MQAR study's main point
(T=64, 4 kv pairs, width 64, conv 4, lr 1e-2); task=lm: configs/shakespeare_small.py, a 2-layer, width-128
byte-level LM (T=256, batch 16, 1000 steps, lr 3e-3) with the same short conv 4 (the LM study shows plain linear
attention without it at 3.37 bits/byte: an unordered prefix sum).
Options: task=mqar|lm, tiny=True, seeds=N (or a list: 0+2), maps=elu1+relu (a subset).
Each point carries its map as its arm (linear_seq.studies.protocol.Point).
"""
from linear_seq import config_lib
from linear_seq.studies import protocol

STUDY = "feature_maps"
OPTIONS = ("task", "tiny", "seeds", "maps")
MAPS = ("identity", "relu", "elu1", "exp", "sincos", "taylor", "favor", "rbf")
SIGNED_MAPS = ("identity", "sincos")  # can go negative: output norm, not the denominator
TINY_MAPS = ("elu1", "sincos")
LINEAR = {"model.mixer": "linear", "model.num_features": 64}  # favor / rbf: 64 random features per head
# The arms: each map, with the denominator where it is positive and an output norm where it can go negative.
ARMS = {m: {"model.feature_map": m, "model.normalize": "norm" if m in SIGNED_MAPS else "denominator"} for m in MAPS}
# task -> (its preset in configs/, this study's overrides): the MQAR study's main point (as experiments/mqar:
# 1000 examples in 4 batches, the setup these results were run with, 2026-11), or the small Shakespeare LM.
TASKS = {"mqar": ("mqar.py:setup=block-conv", {"eval.batch_size": 250}), "lm": ("shakespeare_small.py", {})}


def _opts(arg: str) -> dict:
  opts = config_lib.parse_options(arg, OPTIONS)
  protocol.choice(opts, "task", tuple(TASKS), "mqar")
  return opts


def get_config(arg: str = ""):
  """The task's preset (tiny: its smoke test) with linear attention (LINEAR)."""
  opts = _opts(arg)
  preset, overrides = TASKS[opts.get("task", "mqar")]
  return config_lib.apply_overrides(protocol.task(preset, overrides, tiny=bool(opts.get("tiny"))), LINEAR)


def point(feature_map: str, seed: int) -> protocol.Point:
  """The point of one map and seed (the task's learning rate)."""
  return protocol.point(ARMS, feature_map, {}, None, seed)


def get_sweep(arg: str = ""):
  opts = _opts(arg)
  maps = TINY_MAPS if opts.get("tiny") else config_lib.parse_subset(opts, "maps", MAPS, MAPS, "feature map")
  maps = sorted(maps, key=lambda m: m != "taylor")  # the slowest first: the other points run beside it
  seeds = protocol.seeds(opts.get("seeds", 1))
  return [point(m, s) for m in maps for s in seeds]


METRIC_WORDS = {"accuracy": "MQAR accuracy", "bits_per_byte": "Shakespeare bits/byte"}


def get_plots(arg: str = ""):
  metric = "accuracy" if _opts(arg).get("task", "mqar") == "mqar" else "bits_per_byte"
  return [
      {"kind": "xy", "x": "model.feature_map", "y": metric, "file": f"{metric}_by_feature_map.png",
       "title": f"linear attention: {METRIC_WORDS[metric]} by feature map", "xlabel": "feature map φ"},
      {"kind": "curves", "y": "eval_loss", "group": "model.feature_map", "file": "eval_loss_curves.png",
       "title": "linear attention: validation loss during training",
       **({} if metric == "accuracy" else {"ylabel": "validation loss (nats/byte)"})},   # byte-level: a token is a byte
  ]
