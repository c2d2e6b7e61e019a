"""Study 2: linear attention's feature map, on MQAR and on the Shakespeare LM.

  python -m linear_seq.studies.sweep --config=experiments/feature_maps/config.py:task=mqar --workdir=runs/fmaps_mqar --parallel=2
  python -m linear_seq.studies.sweep --config=experiments/feature_maps/config.py:task=lm --workdir=runs/fmaps_lm --parallel=2
Run time (2 cores, measured): task=mqar ≈ 40 min (8 runs; taylor alone ≈ 32 min), task=lm ≈ 52 min (8 runs;
taylor alone ≈ 50 min beside the other seven's 46 min; `maps=` without taylor: ≈ 25 min).
Smoke test: :task=mqar,tiny=True (2 points, ~1 min).

Maps: identity relu elu1 exp sincos taylor favor rbf. Maps that can go negative (identity, sincos) run with
an output norm instead of the D⁻¹ denominator (it can divide by ~0); the positive maps use the denominator.
The `model.normalize` column of the table says which each row used. task=mqar: the MQAR study's main point
(T=64, 4 kv pairs, width 64, conv 4, lr 1e-2); task=lm: a 2-layer, width-128 byte-level LM on Shakespeare
(T=256, batch 16, 1000 steps, lr 3e-3) with the same short conv 4 (the LM study shows plain linear attention
without it at 3.37 bits/byte: an unordered prefix sum).
Options: task=mqar|lm, tiny=True, seeds=N, maps=elu1+relu (a subset).
"""
import os

from linear_seq import config_lib

STUDY = "feature_maps"
_HERE = os.path.dirname(os.path.abspath(__file__))
_CONFIGS = os.path.join(_HERE, "..", "..", "configs")
OPTIONS = ("task", "tiny", "seeds", "maps")
TASKS = ("mqar", "lm")
MAPS = ("identity", "relu", "elu1", "exp", "sincos", "taylor", "favor", "rbf")
SIGNED_MAPS = ("identity", "sincos")  # can go negative: output norm, not the denominator
TINY_MAPS = ("elu1", "sincos")


def _opts(arg: str) -> dict:
  opts = config_lib.parse_options(arg, OPTIONS)
  if opts.get("task", "mqar") not in TASKS:
    raise ValueError(f"unknown task {opts['task']!r}; valid: {', '.join(TASKS)}")
  return opts


def get_config(arg: str = ""):
  opts = _opts(arg)
  tiny = ",tiny=True" if opts.get("tiny") else ""
  if opts.get("task", "mqar") == "mqar":
    c = config_lib.load_sibling(os.path.join(_HERE, "..", "mqar", "config.py"), "config").get_config(tiny[1:])
  else:
    c = config_lib.load_sibling(os.path.join(_CONFIGS, "default.py"), "default").get_config(tiny[1:])
    if not opts.get("tiny"):
      c.model.d_model, c.model.num_layers, c.model.num_heads = 128, 2, 4
      c.data.seq_len, c.data.batch_size = 256, 16
      c.train.num_steps, c.train.warmup_steps = 1000, 100
      c.train.eval_every = c.train.checkpoint_every = 500
      c.eval.batch_size, c.eval.max_batches = 16, 50
    c.model.conv_width = 4  # as on MQAR: without it linear attention cannot tell which byte came last
  c.model.mixer = "linear"
  c.model.num_features = 64  # favor / rbf random features per head
  return c


def get_sweep(arg: str = ""):
  opts = _opts(arg)
  maps = TINY_MAPS if opts.get("tiny") else str(opts.get("maps", "+".join(MAPS))).split("+")
  unknown = [m for m in maps if m not in MAPS]
  if unknown:
    raise ValueError(f"unknown feature map(s) {unknown}; valid: {', '.join(MAPS)}")
  seeds = range(int(opts.get("seeds", 1)))
  maps = sorted(maps, key=lambda m: m != "taylor")  # the slowest first: the other points run beside it
  return [{"model.feature_map": m, "model.normalize": "norm" if m in SIGNED_MAPS else "denominator", "seed": s}
          for m in maps for s in seeds]


def get_plots(arg: str = ""):
  metric = "accuracy" if _opts(arg).get("task", "mqar") == "mqar" else "bits_per_byte"
  return [
      {"kind": "xy", "x": "model.feature_map", "y": metric, "file": f"{metric}_by_feature_map.png",
       "title": f"linear attention: {metric} by feature map", "xlabel": "feature map", "zoom": metric != "accuracy"},
      {"kind": "curves", "y": "eval_loss", "group": "model.feature_map", "file": "eval_loss_curves.png",
       "title": "eval loss during training"},
  ]
