"""The length check's tables (experiments/lm/length_check.py) from its sweep directory.

  python experiments/lm/length_table.py --workdir=runs/lm_length [--out=experiments/lm/length_check.md]
      [--archive=experiments/lm/points_length]   # the default: archived points are restored into --workdir first
  python -m linear_seq.studies.tables --table=experiments/lm/length_table.py --workdir=runs/lm_length \
      --out=experiments/lm/length_check.md      # the same, through the studies' tables CLI

Per point (arm and learning rate, seed 0): validation bits/byte at the training length and at every evaluation length; the loss per
position band of the longest evaluation (mean nats/byte over the band's positions, every row of the split);
and for S4D the trained kernels' share past the training length (s4_memory.json: mean over channels, share of
channels above 0.1, share of modes with an e-folding horizon past 128 and 2,048 tokens, median horizon).
"""
import os

from linear_seq import config_lib
from linear_seq.studies import collect
from linear_seq.studies import common
from linear_seq.studies import tables

HERE = os.path.dirname(os.path.abspath(__file__))
PATH = os.path.join(HERE, "length_check.py")
ARCHIVE = os.path.join(HERE, "points_length")
study = config_lib.load_module(PATH)  # by path: a study config is loaded as a file, not a package module


def load_rows(workdir: str) -> list[dict]:
  """Rows of every point of the study that has a sub-workdir, with its position-loss files (`_position_loss`:
  {T: [loss per position]})."""
  rows = tables.study_rows(PATH, workdir, extra_commands=study.get_extra_commands(""))
  for r in rows:
    r["_position_loss"] = {}
    for t in study.LENGTHS:
      data = collect.read_json(os.path.join(r["_workdir"], f"position_loss_validation_T{t}.json")) or {}
      if data.get("position_loss"):
        r["_position_loss"][t] = data["position_loss"]
  return rows


def band_mean(losses: list[float], lo: int, hi: int) -> float | None:
  """Mean of positions lo..hi (1-based, inclusive), None if the list is shorter."""
  if len(losses) < hi:
    return None
  part = losses[lo - 1:hi]
  return sum(part) / len(part)


def length_table(rows) -> str:
  ts = study.LENGTHS
  body = []
  for r in rows:
    base = r.get("bits_per_byte")
    at = [r.get(f"bits_per_byte@T{t}") for t in ts]
    change = at[-1] - base if tables.is_number(at[-1]) and tables.is_number(base) else None
    body.append([study.point_label(r), tables.fmt(base), *map(tables.fmt, at),
                 tables.MISSING if change is None else f"{change:+.3f}"])
  return tables.markdown(["arm", "T=128", *(f"T={t:,}" for t in ts), f"T={ts[-1]:,} − T=128"], body)


def band_table(rows) -> str:
  t = study.LENGTHS[-1]
  return tables.markdown(["arm", *(f"positions {lo:,}–{hi:,}" for lo, hi in study.BANDS)], [
      [study.point_label(r), *(tables.fmt(band_mean(r["_position_loss"].get(t, []), lo, hi)) for lo, hi in study.BANDS)]
      for r in rows])


MEMORY_KEYS = (("s4_tail_mean", "kernel share past 128 lags (mean over channels)"),
               ("s4_channels_tail_gt_0.1", "channels with share > 0.1"),
               ("s4_modes_horizon_gt_128", "modes with horizon > 128"),
               ("s4_modes_horizon_gt_2048", "modes with horizon > 2,048"),
               ("s4_horizon_median", "median mode horizon (tokens)"))


def memory_table(rows) -> str:
  return tables.markdown(["arm", *(words for _, words in MEMORY_KEYS)], [
      [study.point_label(r), *(tables.fmt(r.get(k), 1 if k == "s4_horizon_median" else 3) for k, _ in MEMORY_KEYS)]
      for r in rows if r.get("s4_layers")])


def write(workdir: str, archive_dir: str = ARCHIVE, out: str = "") -> str:
  """The three tables, printed and written to `out` ('' = print only), the archived points restored first."""
  rows = tables.restored(load_rows, workdir, archive_dir)
  t = study.LENGTHS[-1]
  text = ("# The S4D length check (experiments/lm/length_check.py; README: experiments/lm/README.md)\n\n"
          "Commands: `python -m linear_seq.studies.sweep --config=experiments/lm/length_check.py --workdir=runs/lm_length "
          "--archive=experiments/lm/points_length --parallel=2`, then `python experiments/lm/length_table.py "
          "--workdir=runs/lm_length --out=experiments/lm/length_check.md`.\n\n"
          "### Validation bits/byte by evaluation length (trained at T=128, seed 0)\n\n" + length_table(rows) +
          f"\n### Loss per position band at T={t:,} (nats/byte, mean over the band's positions)\n\n" +
          band_table(rows) + "\n### S4D kernels after training (s4_memory.json)\n\n" + memory_table(rows))
  return common.emit_markdown(text, out)


if __name__ == "__main__":   # flags defined here only (the tests load several table scripts in one process)
  tables.run_script(write, "runs/lm_length", ARCHIVE)
