"""Issue 47: is Mamba-2's MQAR failure the GPT-2 init the study's setup imposes? model.init=gpt2 vs 'torch'.

  python -m linear_seq.studies.sweep --config=experiments/mqar/init_check.py:stage=confirm \
      --workdir=runs/mqar_init --archive=experiments/mqar/init_points --parallel=2
  (stage=factors, stage=pilot[,arms=...] the same way; results: experiments/mqar/README.md)

Every point is experiments/mqar/config.py's (configs/mqar.py, setup 2026-12, evaluated every 250 steps) with a
`model.init` override (linear_seq/param_init.py): 'torch' is the published Mamba-2 init of the mixer's
projections (PyTorch's nn.Linear default U(±1/√fan_in), as mamba_ssm's Mamba2 layer and HF's Mamba2Mixer leave
in_proj and out_proj), the rest of the model as 'gpt2'. The study's own points (model.init=gpt2, the config's
default) are in experiments/mqar/points/ and are not rerun here, except the hard point's seed 2, which the
study did not run.
Stages (each arm at its chosen rate, CHOSEN_LR, from the study's pilot):
  confirm: mamba2 at width 64, the hard point (T=128, 8 pairs, 1,500 steps; seeds 0, 1, 2) and the main point
           (T=64, 4 pairs; seeds 0, 1, 2) with init=torch, and the hard point's seed 2 with init=gpt2.
           Ordered so a partial run answers first what matters most (hard seeds 0, 1; main seed 1). only=main
           (only=hard): its main-point (hard-point) points alone, in that order.
  factors: mamba2, hard point, width 64, seed 0 with init=torch_in (torch's in-projection, GPT-2's scaled
           output projection), init=torch_out (GPT-2's 0.02 in-projection, torch's output projection) and
           init=mamba_ssm (torch with out_proj / √num_layers, mamba_ssm's MixerModel default).
  pilot:   the other arms (arms=..., default all but mamba2) at the main point, width 64, seed 0, init=torch:
           the init protocol's pilot over {gpt2 (the study's point), the mixer's published init}.
  hf:      issue 46's reruns of Mamba-2's failing points with the HF Mamba-2 conventions on top of init=torch: at
           this size (n_groups = 1, no time_step_limit) linear_seq/parity.py's options differ from the arm's only
           by model.A_init=arange (A_h = h + 1 where the arm draws A ~ U[1, 16]). The hard point at width 64,
           seeds 0 and 1, then the main point's seed 1 at widths 64 and 128.
  afactor: HF's A init alone: the hard point at width 64, seed 0, init=gpt2 with model.A_init=arange.
The grids with `torch` are the study's own points now (config.py's INIT: mamba2 and s4 run `torch`): the study's
sweep runs them (its pilot first, then stage=main and stage=hard with arms=mamba2+s4).
"""
import os

from linear_seq import config_lib

STUDY = "mqar_init"
_STUDY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "config.py")
OPTIONS = ("tiny", "stage", "arms", "only")
STAGES = ("confirm", "factors", "pilot", "hf", "afactor")
# The HF Mamba-2 conventions the arm lacks at this size (linear_seq/parity.py options("mamba2", ...)).
HF_MAMBA2 = {"model.A_init": "arange"}
# Each arm's rate as the study's pilot chose it (experiments/mqar/README.md's pilot table, config.best_lr).
CHOSEN_LR = {"softmax": 3e-3, "linear-elu1": 3e-3, "linear-relu": 3e-3, "retention": 1e-3, "gla": 1e-3,
             "s4": 1e-2, "deltanet": 1e-3, "deltanet-scalar": 1e-3, "deltanet-channel": 1e-3, "mamba2": 3e-3}


def _study():
  return config_lib.load_module(_STUDY)


def get_config(arg: str = ""):
  """experiments/mqar/config.py's config (tiny: its tiny setup)."""
  tiny = config_lib.parse_options(arg, OPTIONS).get("tiny")
  return _study().get_config("tiny=True" if tiny else "")


def point(arm: str, width: int, seed: int, init: str, hard: bool) -> dict:
  """The study's point (config.point + grid_extra) with model.init = init."""
  s = _study()
  return {**s.point(arm, width, CHOSEN_LR[arm], seed, **s.grid_extra(hard)), "model.init": init}


def get_sweep(arg: str = ""):
  opts = config_lib.parse_options(arg, OPTIONS)
  stage = str(opts.get("stage", "confirm"))
  if stage not in STAGES:
    raise ValueError(f"unknown stage {stage!r}; valid: {', '.join(STAGES)}")
  if opts.get("tiny"):
    return [{"model.mixer": "mamba2", "model.d_model": 16, "seed": 0, "model.init": i} for i in ("gpt2", "torch")]
  if stage == "confirm":
    order = [(True, 0), (True, 1), (False, 1), (False, 0), (False, 2), (True, 2)]
    points = [point("mamba2", 64, s, "torch", h) for h, s in order] + [point("mamba2", 64, 2, "gpt2", True)]
    only = opts.get("only")
    if only not in (None, "main", "hard"):
      raise ValueError(f"only={only}: valid: main, hard")
    return [p for p in points if only is None or (p.get("data.seq_len") == 128) == (only == "hard")]
  if stage == "factors":
    return [point("mamba2", 64, 0, i, True) for i in ("torch_in", "torch_out", "mamba_ssm")]
  if stage == "pilot":
    others = [a for a in CHOSEN_LR if a != "mamba2"]
    arms = config_lib.parse_subset(opts, "arms", list(CHOSEN_LR), others, "arm")
    return [point(a, 64, 0, "torch", False) for a in arms]
  if stage == "hf":
    return [{**point("mamba2", w, sd, "torch", h), **HF_MAMBA2} for h, w, sd in
            [(True, 64, 0), (True, 64, 1), (False, 64, 1), (False, 128, 1)]]
  return [{**point("mamba2", 64, 0, "gpt2", True), **HF_MAMBA2}]   # afactor


def get_plots(arg: str = ""):
  del arg
  return []  # the result is a table (experiments/mqar/init_table.py, experiments/mqar/README.md)
