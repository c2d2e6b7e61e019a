"""The small Shakespeare LM of the feature-map and decay studies: configs/default.py's byte-level LM at 2 layers,
width 128, 4 heads, T=256, batch 16, 1,000 steps (100 warmup), evaluated every 500 steps on 50 validation batches
of 16, with a short causal conv (width 4) before each mixer (without it linear attention cannot tell which byte
came last: the LM study measured plain linear attention at 3.37 bits/byte).

  python -m linear_seq.main --config=configs/shakespeare_small.py:mixer=gla --workdir=runs/shakespeare_small_gla
Options: mixer=... (as configs/default.py), tiny=True (configs/default.py's smoke test, with the conv).
"""
import ml_collections

from linear_seq import config_lib

OPTIONS = ("mixer", "tiny")  # get_config options
SMALL = {
    "model.d_model": 128, "model.num_layers": 2, "model.num_heads": 4,
    "data.seq_len": 256, "data.batch_size": 16,
    "train.num_steps": 1000, "train.warmup_steps": 100, "train.eval_every": 500, "train.checkpoint_every": 500,
    "eval.batch_size": 16, "eval.max_batches": 50,
}
CONV = {"model.conv_width": 4}


def get_config(arg: str = "") -> ml_collections.ConfigDict:
  opts = config_lib.parse_options(arg, OPTIONS)
  c = config_lib.load_sibling(__file__, "default").get_config(arg)
  return config_lib.apply_overrides(c, CONV if opts.get("tiny") else {**SMALL, **CONV})
