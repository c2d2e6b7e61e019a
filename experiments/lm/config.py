"""Study 4: language modelling on Shakespeare — every mixer at (nearly) equal parameter count, same tokens,
each at its own learning rate, 3 seeds, evaluated at its training length and beyond.

The commands (pilot, main, the tables) and the arms' rationale, widths and history: README.md. Smoke test:
:tiny=True (2 points, ~1-2 min). The task: configs/shakespeare.py's LM budget (1200 steps, T=128).
Options: stage=pilot|main (default main), seeds=N or seeds=0+2 (a count or the seeds; default 3), arms=softmax+gla
(a subset of ARMS), lengths=512+2048 (the extra evaluation lengths; '' none), tiny=True. What each stage runs,
what each point measures and the tables write() prints: README.md's "Stages, measurements and tables".
"""
import functools
import os

from linear_seq import config_lib
from linear_seq.studies import params
from linear_seq.studies import protocol
from linear_seq.studies import tables

STUDY = "lm"
_HERE = os.path.dirname(os.path.abspath(__file__))
ARCHIVE = os.path.join(_HERE, "points")
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
# Each arm's rate, from seed 0 at its matched width (the pilot): the lowest validation bits/byte of PILOT_LRS and
# one step past either edge (3e-4, 3e-2) when the best is there, so that it is bracketed unless the step wins too.
PILOT_LRS = (1e-3, 3e-3, 1e-2)
RULE = protocol.LrRule(PILOT_LRS, metric="bits_per_byte", direction="min", edge="both")
LENGTHS = (512, 2048, 8192)  # evaluation lengths past the training length (128)
EVAL_TOKENS = 8192  # tokens per evaluation batch at those lengths (batch = EVAL_TOKENS // T, at least 1)
TINY_LENGTH = 64  # tiny=True: one extra evaluation at twice its training length
# Context positions (position_loss.json's, 1-based) averaged for the tables' early / late loss columns.
EARLY, LATE = (1, 16), (65, 128)


def get_config(arg: str = ""):
  """The task: configs/shakespeare.py's LM budget (tiny: its smoke test)."""
  return protocol.task("shakespeare.py", tiny=bool(config_lib.parse_options(arg, OPTIONS).get("tiny")))


# label(row): a point's arm label (ARMS): the one its point carries, else the most specific arm its overrides match.
label = functools.partial(protocol.arm_of, arms=ARMS)


def _opts(arg: str) -> dict:
  opts = protocol.options(arg, OPTIONS, ARMS, DEFAULT_ARMS, TINY_ARMS, SEEDS, STAGES)
  default = (TINY_LENGTH,) if opts.get("tiny") else LENGTHS
  return {**opts, "lengths": () if opts.get("lengths") == "" else protocol.numbers(opts, "lengths", default)}


@functools.lru_cache(maxsize=None)
def _keys(arms: tuple[str, ...]) -> list[tuple[str, int]]:
  """(arm, its width: parameters nearest softmax's at 128) for `arms`, the slowest first (s4: packed rows run its
  exact reset scan); cached: both hooks ask."""
  arms = sorted(arms, key=lambda a: a != "s4")
  reference = (ARMS[REFERENCE[0]], REFERENCE[1])
  return list(zip(arms, params.matched_widths(get_config(), [ARMS[a] for a in arms], WIDTHS, reference)))


def point(arm: str, width: int, lr: float, seed: int) -> dict:
  return protocol.point(ARMS, arm, {"model.d_model": width}, lr, seed)


TUNING = protocol.Tuning(RULE, lambda arm, width, lr: point(arm, width, lr, 0))
best_lr = TUNING.best   # best_lr(rows, arm, width) -> (its rate or None, the seed-0 points still to run)
# pilot: seed 0 of every arm at its width and each rate of PILOT_LRS, then the steps past the edge; main: every
# seed at each arm's chosen rate, seed-major (seed 0's is its pilot point).
SWEEP = protocol.Study(_opts, TUNING, keys=lambda opts: _keys(tuple(opts["arms"])), point=point,
                       tiny=lambda arm: {**ARMS[arm], "seed": 0}, stages={"pilot": None}, arm_of=label,
                       cell_of=lambda r: r["_overrides"].get("model.d_model"))
get_sweep, get_followup_sweep = SWEEP.get_sweep, SWEEP.get_followup_sweep
# chosen(rows): the rows at their arm's chosen rate, which the plots compare (tiny=True's kept, undecided left out).
chosen = functools.partial(SWEEP.chosen, arms=ARMS)


def get_eval_args():
  return ["--position_loss"]


def get_extra_commands(arg: str = ""):
  opts = _opts(arg)
  steps = 4 if opts.get("tiny") else 32
  decode = (["-m", "linear_seq.studies.speed", "--decode_workdir={workdir}", f"--decode_steps={steps}"], "decode.json")
  # length generalization, from the final checkpoint
  return [decode, *(protocol.length_eval(t, EVAL_TOKENS, bool(opts.get("tiny"))) for t in opts["lengths"])]


# arms left out of the zoomed length plot: they lose 0.7 (deltanet) and 3.7 (softmax) bits/byte by T=8,192
ZOOM_LEFT_OUT = ("softmax", "deltanet")


def get_plots():
  """Every plot at each arm's chosen learning rate (the pilot's other rates left out)."""
  arms = {"group": label, "groups": list(ARMS), "select": chosen}
  lengths = {"kind": "xy", "x": "eval_seq_len", "y": "bits_per_byte", **arms, "logx": 2,
             "xlabel": "evaluation length (bytes)", "ylabel": "validation bits/byte"}
  return [
      {"kind": "curves", "y": "eval_loss", **arms, "file": "eval_loss_curves.png",
       "title": "Shakespeare: validation loss during training", "ylabel": "validation loss (nats/byte)"},
      {"kind": "curves", "y": "train_loss", **arms, "file": "train_loss_curves.png",
       "title": "Shakespeare: training loss", "ylabel": "training loss (nats/byte)"},
      {"kind": "series", "y": "position_loss", **arms, "source": "position_loss.json",
       "file": "loss_vs_position.png", "logx": 2, "title": "validation loss vs position in the context",
       "xlabel": "position in the context (bytes)", "ylabel": "validation loss (nats/byte)"},
      {"kind": "xy", "x": label, "y": "bits_per_byte", "select": chosen, "file": "bits_per_byte.png",
       "title": "Shakespeare: validation bits/byte", "xlabel": "mixer (arm)"},
      {**lengths, "select": lambda rows: tables.by_length(chosen(rows)), "file": "bits_per_byte_vs_length.png",
       "title": "Shakespeare: trained at T={data.seq_len}, evaluated at longer T"},
      {**lengths, "select": lambda rows: [r for r in tables.by_length(chosen(rows)) if label(r) not in ZOOM_LEFT_OUT],
       "file": "bits_per_byte_vs_length_zoom.png",
       "title": f"the same without {' and '.join(ZOOM_LEFT_OUT)} (their rise hides the others' changes)"},
  ]


def load_rows(workdir: str) -> list[dict]:
  """Rows of every point stage=main defines that has a sub-workdir (finished or not), chosen as the sweep does."""
  return tables.study_rows(os.path.join(_HERE, "config.py"), workdir, "stage=main",
                           extra_commands=get_extra_commands("stage=main"))


def _widths(rows) -> list[tuple[str, int | None]]:
  """(arm, the narrowest width its rows have; None without rows) per arm of DEFAULT_ARMS."""
  return [(a, min((r["_overrides"]["model.d_model"] for r in rows if label(r) == a), default=None))
          for a in DEFAULT_ARMS]


def pilot_table(rows) -> str:
  return tables.pilot_table(TUNING, rows, _widths(rows), lambda r: tables.fmt(float(r["bits_per_byte"])),
                            lambda arm, w: (arm, tables.MISSING if w is None else w), ("arm", "width"))


def cells(rows) -> list[tables.Cell]:
  """A Cell (width, chosen rate, finished rows at it sorted by seed) per arm whose rate is decided, sorted by mean
  bits/byte."""
  keys = [(a, w) for a, w in _widths(rows) if w is not None]
  mean = lambda c: sum(tables.values(c.rows, "bits_per_byte")) / len(c.rows) if c.rows else 1e9
  return sorted(tables.cells(TUNING, rows, keys, "bits_per_byte", point), key=mean)


def main_table(cs, seeds: int = SEEDS) -> str:
  kv = lambda c: f" (KV cache, T={c.rows[0]['_config'].get('data.seq_len')})" if c.arm == "softmax" and c.rows else ""
  means = lambda c, key, digits: tables.mean_std(tables.values(c.rows, key), digits, std=False)
  return tables.columns(cs, [
      *tables.matched_columns(state=kv),
      *tables.seed_columns(lambda c: tables.values(c.rows, "bits_per_byte"), seeds, "bits/byte"),
      ("train tokens/s", lambda c: means(c, "tokens_per_sec", 0)),
      ("decode ms/token", lambda c: means(c, "decode_ms_per_token", 3)),
      (f"loss at positions {EARLY[0]}–{EARLY[1]} → {LATE[0]}–{LATE[1]}",
       lambda c: tables.early_to_late(c.rows, EARLY, LATE))])


def spread_table(cs) -> str:
  return tables.spread_table({c.arm: tables.values(c.rows, "bits_per_byte") for c in cs}, "min")


def length_table(cs) -> str:
  return tables.length_table({c.arm: c.rows for c in cs})


def length_by_rate_table(rows) -> str:
  """Seed 0's change from T=128 to the longest evaluation length at every pilot rate run (how the length
  behaviour depends on the training, e.g. how far S4D's step sizes moved from their slow initialization)."""
  return tables.length_change_by_rate(TUNING, rows, _widths(rows))


def write(workdir: str, archive_dir: str = "", out: str = "") -> str:
  """Prints and returns the tables (writes them to `out`, every finished point as a row of the .csv beside it),
  from the points in `workdir` once those of `archive_dir` ('' = none) are restored into it."""
  rows = tables.restored(load_rows, workdir, archive_dir)
  cs = cells(rows)
  ts = sorted({int(r["eval_seq_len"]) for c in cs for r in tables.by_length(c.rows)} - {128})
  get, over = tables.field, tables.override
  return tables.report(out, [
      ("Pilot (seed 0, validation bits/byte at step 1,200 per learning rate)", pilot_table(rows)),
      (f"Main (each arm at its chosen rate; seeds {', '.join(map(str, range(SEEDS)))}; sorted by mean)",
       main_table(cs)),
      ("Seed spread (a difference counts when the arms' seeds do not overlap)", spread_table(cs)),
      ("Length generalization (trained at T=128; validation bits/byte, mean ± std over seeds; the last column is "
       "the mean over seeds of each model's change)", length_table(cs)),
      ("Length change by learning rate (seed 0, the pilot: bits/byte at the longest evaluation length minus at "
       "T=128)", length_by_rate_table(rows))], tables.ok(rows, "bits_per_byte"), [
      ("arm", label), ("width", over("model.d_model")), ("lr", over("train.learning_rate")), ("seed", over("seed")),
      *((k, get(k)) for k in ("num_params", "state_size", "bits_per_byte", *(f"bits_per_byte@T{t}" for t in ts),
                              "tokens_per_sec", "decode_ms_per_token")), ("wall_time_s", get("wall_time"))])
