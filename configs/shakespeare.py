"""The studies' Shakespeare LM budget: configs/default.py's byte-level LM trained 1,200 steps and evaluated on
the whole validation split (experiments/lm, experiments/hybrids task=lm: every arm gets the same tokens).

  python -m linear_seq.main --config=configs/shakespeare.py:mixer=gla --workdir=runs/shakespeare_gla
Options: mixer=... (as configs/default.py), tiny=True (configs/default.py's smoke test, the budget left out).
"""
import ml_collections

from linear_seq import config_lib

OPTIONS = ("mixer", "tiny")  # get_config options
# configs/default.py with the budget: 1200 steps for every mixer, evaluated every 300, the whole validation split.
BUDGET = {
    "train.num_steps": 1200, "train.warmup_steps": 100,
    "train.log_every": 50, "train.eval_every": 300, "train.checkpoint_every": 300,
    "eval.batch_size": 32, "eval.max_batches": 0,
}


def get_config(arg: str = "") -> ml_collections.ConfigDict:
  opts = config_lib.parse_options(arg, OPTIONS)
  c = config_lib.load_sibling(__file__, "default").get_config(arg)
  return c if opts.get("tiny") else config_lib.apply_overrides(c, BUDGET)
