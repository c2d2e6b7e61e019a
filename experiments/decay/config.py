"""Study 3: how much decay? Retention with fixed gammas (and RetNet's multi-scale default), GLA gate temperatures.

  python -m linear_seq.studies.sweep --config=experiments/decay/config.py --workdir=runs/decay --parallel=2
Run time (measured): 10 runs on MQAR's main point, 46 min on one core (~22 min with --parallel=2);
`:seeds=3` adds 20 runs (44 min measured with --parallel=2): ~67 min for all 30.
  python -m linear_seq.studies.sweep --config=experiments/decay/config.py:task=lm --workdir=runs/decay_lm --parallel=2
(the same arms on the feature-map study's small Shakespeare LM, configs/shakespeare_small.py, ~35 min).
Smoke test: :tiny=True (2 points, ~1 min).

Arms: retention with one gamma for every head in {0.5, 0.9, 0.99, 0.999, 1.0 - 1e-4 ≈ no decay} and the
multi-scale default (gamma_h = 1 - 2^(-5-h)); GLA with gate temperature tau in {1, 4, 16, 64}
(alpha = sigmoid(x W)^(1/tau): a larger tau keeps alpha nearer 1, i.e. less forgetting at init).
Options: task=mqar|lm, tiny=True, seeds=N (or a list: 0+2).
Each point carries its arm (ARMS' label: retention-0.9, retention-multi-scale, gla-tau16, ...).
"""
from linear_seq import config_lib
from linear_seq.studies import protocol

STUDY = "decay"
# task -> (its preset in configs/, this study's overrides): the feature-map study's two tasks (MQAR's main point
# in the setup before the ablation, evaluated in 4 batches; the small Shakespeare LM).
TASKS = {"mqar": ("mqar.py:setup=block-conv", {"eval.batch_size": 250}), "lm": ("shakespeare_small.py", {})}
OPTIONS = ("task", "tiny", "seeds")
GAMMAS = (0.5, 0.9, 0.99, 0.999, 0.9999)
TEMPERATURES = (1.0, 4.0, 16.0, 64.0)
MULTI_SCALE = "multi-scale"
# label -> overrides: one gamma for every head (as its repr: the sub-workdirs' names), the multi-scale default
# (gamma ''), then GLA's temperatures.
ARMS = {
    **{f"retention-{g!r}": {"model.mixer": "retention", "model.gamma": repr(g)} for g in GAMMAS},
    f"retention-{MULTI_SCALE}": {"model.mixer": "retention", "model.gamma": ""},
    **{f"gla-tau{t:g}": {"model.mixer": "gla", "model.gate_temperature": t} for t in TEMPERATURES},
}
TINY_ARMS = ("retention-0.9", "gla-tau4")


def get_config(arg: str = ""):
  """The task's preset (tiny: its smoke test)."""
  opts = config_lib.parse_options(arg, OPTIONS)
  preset, overrides = TASKS[protocol.choice(opts, "task", tuple(TASKS), "mqar")]
  return protocol.task(preset, overrides, tiny=bool(opts.get("tiny")))


def get_sweep(arg: str = ""):
  """Every arm's seeds, arm after arm (tiny: two arms, seed 0)."""
  opts = config_lib.parse_options(arg, OPTIONS)
  arms, seeds = (TINY_ARMS, (0,)) if opts.get("tiny") else (tuple(ARMS), protocol.seeds(opts.get("seeds", 1)))
  return [protocol.point(ARMS, a, {}, None, s) for a in arms for s in seeds]


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
