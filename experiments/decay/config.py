"""Study 3: how much decay? Retention with fixed gammas (and RetNet's multi-scale default), GLA gate temperatures.

  python -m linear_seq.studies.sweep --config=experiments/decay/config.py --workdir=runs/decay --parallel=2
Run time (measured): 10 runs on MQAR's main point, 46 min on one core (~22 min with --parallel=2);
`:seeds=3` adds 20 runs (44 min measured with --parallel=2): ~67 min for all 30.
  python -m linear_seq.studies.sweep --config=experiments/decay/config.py:task=lm --workdir=runs/decay_lm --parallel=2
(the same arms on the Shakespeare LM of the feature-map study, ~35 min).
Smoke test: :tiny=True (2 points, ~1 min).

Arms: retention with one gamma for every head in {0.5, 0.9, 0.99, 0.999, 1.0 - 1e-4 ≈ no decay} and the
multi-scale default (gamma_h = 1 - 2^(-5-h)); GLA with gate temperature tau in {1, 4, 16, 64}
(alpha = sigmoid(x W)^(1/tau): a larger tau keeps alpha nearer 1, i.e. less forgetting at init).
Options: task=mqar|lm, tiny=True, seeds=N.
"""
import os

from linear_seq import config_lib

STUDY = "decay"
# The feature-map study's config holds both tasks' setups (MQAR main point, small Shakespeare LM).
_FEATURE_MAPS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "feature_maps", "config.py")
OPTIONS = ("task", "tiny", "seeds")
GAMMAS = (0.5, 0.9, 0.99, 0.999, 0.9999)
TEMPERATURES = (1.0, 4.0, 16.0, 64.0)
MULTI_SCALE = "multi-scale"


def get_config(arg: str = ""):
  opts = config_lib.parse_options(arg, OPTIONS)
  task = ",".join(f"{k}={v}" for k, v in opts.items() if k in ("task", "tiny"))
  return config_lib.load_config(f"{_FEATURE_MAPS}:{task}")


def get_sweep(arg: str = ""):
  opts = config_lib.parse_options(arg, OPTIONS)
  seeds = range(int(opts.get("seeds", 1)))
  if opts.get("tiny"):
    return [{"model.mixer": "retention", "model.gamma": "0.9", "seed": 0},
            {"model.mixer": "gla", "model.gate_temperature": 4.0, "seed": 0}]
  points = [{"model.mixer": "retention", "model.gamma": repr(g), "seed": s}
            for g in GAMMAS for s in seeds]
  points += [{"model.mixer": "retention", "model.gamma": "", "seed": s} for s in seeds]
  points += [{"model.mixer": "gla", "model.gate_temperature": t, "seed": s} for t in TEMPERATURES for s in seeds]
  return points


def gamma_of(row: dict) -> str:
  """The retention arm's label: its single gamma, or 'multi-scale'."""
  gamma = row.get("_overrides", row).get("model.gamma", "")
  return gamma if gamma else MULTI_SCALE


def get_plots(arg: str = ""):
  opts = config_lib.parse_options(arg, OPTIONS)
  metric = "accuracy" if opts.get("task", "mqar") == "mqar" else "bits_per_byte"
  words = "MQAR accuracy" if metric == "accuracy" else "bits/byte"
  return [
      {"kind": "xy", "x": gamma_of, "y": metric, "where": {"model.mixer": "retention"},
       "file": f"retention_{metric}_vs_gamma.png", "title": f"retention: {words} vs its fixed decay γ",
       "xlabel": "decay γ (the same in every head; multi-scale: one per head)"},
      {"kind": "xy", "x": "model.gate_temperature", "y": metric, "where": {"model.mixer": "gla"}, "logx": 2,
       "file": f"gla_{metric}_vs_temperature.png", "title": f"GLA: {words} vs its gate temperature",
       "xlabel": "gate temperature τ (log α = log σ(x) / τ)"},
  ]
