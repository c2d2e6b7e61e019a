"""The MQAR study's tables from its sweep directory (experiments/mqar/config.py).

  python experiments/mqar/table.py --workdir=runs/mqar [--out=experiments/mqar/study.md]
      [--archive=experiments/mqar/points]   # the default: the archived points are restored into --workdir first

Pilot: every arm's seed-0 accuracy at width 64 per learning rate, and the rate chosen (config.best_lr).
Main (64, 4) and hard (128, 8) points: per arm and width at the chosen rate, the recurrent state size
(floats per sequence), each seed's final accuracy, mean ± std (sample std over the seeds run), how many
seeds reach 0.9, and the first evaluated step at which each seed reached 0.9 (evaluations every 250 steps).
Unfinished points are shown as '…'. The lrcheck stage's points: seed 0 at width 32 per learning rate; the
seedcheck stage's: a split cell's failing seed per learning rate (main grid; hard=True's: the hard grid).
Also writes every finished point as a CSV row beside --out.
"""
import os

from linear_seq import config_lib
from linear_seq.studies import common
from linear_seq.studies import tables

ARCHIVE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "points")
THRESHOLD = 0.9
PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "config.py")
study = config_lib.load_module(PATH)  # by path: every study's config is named config.py


def load_rows(workdir: str) -> list[dict]:
  """Rows of every point the stages define that has a sub-workdir (finished or not), the follow-up rounds of
  every stage replayed (main needs the pilot's 1e-2 rows)."""
  return tables.study_rows(PATH, workdir, followup_args=study.FOLLOWUP_ARGS)


def first_step(row: dict, threshold: float = THRESHOLD):
  """The first evaluated step at which the point reached `threshold` (tables.first_step)."""
  return tables.first_step(row, threshold)


def _cell(row, missing: str = "…") -> str:
  """A point's final accuracy, ↑ when still rising; `missing` when it has not run."""
  return missing if row is None else tables.fmt(float(row["accuracy"])) + (" ↑" if study.still_rising(row) else "")


def pilot_table(rows) -> str:
  return tables.pilot_table(study.TUNING, rows, [(arm, None) for arm in study.ARMS], _cell)


def grid(rows, hard: bool):
  """[(arm, width, lr, state_size, finished rows sorted by seed, seeds planned)] at each arm's chosen lr."""
  seeds = study.HARD_SEEDS if hard else study.SEEDS
  widths = study.HARD_WIDTHS if hard else study.WIDTHS
  steps = study.HARD_STEPS if hard else study.get_config("").train.num_steps   # seedcheck's longer runs stay out
  out = []
  for arm in study.ARMS:
    lr, _ = study.best_lr(rows, arm)
    if lr is None:
      continue
    for w in widths:
      cell = [r for r in rows if study.arm_of(r) == arm and r["_overrides"].get("model.d_model") == w
              and r["_overrides"].get("train.learning_rate") == lr
              and (r["_overrides"].get("data.seq_len") == 128) == hard and r.get("status") == "ok"
              and r["_config"].get("train.num_steps") == steps]
      cell.sort(key=lambda r: r["_overrides"]["seed"])
      size = next((r.get("state_size") for r in cell if r.get("state_size") is not None), None)
      out.append((arm, w, lr, size, cell, len(seeds)))
  return out


def grid_table(cells) -> str:
  body = []
  for arm, w, lr, size, cell, planned in cells:
    accs = [float(r["accuracy"]) for r in cell]
    steps = " / ".join("—" if t is None else str(t) for t in map(first_step, cell))
    body.append([arm, w, f"{lr:g}", "…" if size is None else f"{int(size):,}", tables.per_seed(accs, planned),
                 tables.mean_std(accs, one=" (1 seed)"), f"{sum(a >= THRESHOLD for a in accs)}/{len(accs)}", steps])
  return tables.markdown(["arm", "width", "lr", "state (floats)", "accuracy per seed", "mean ± std",
                          f"seeds ≥ {THRESHOLD}", f"first step ≥ {THRESHOLD}"], body)


def lrcheck_table(rows) -> str:
  """Seed 0 at CHECK_WIDTH per learning rate, for the arms the lrcheck stage ran (config.collapses_small)."""
  lrs = study.CHECK_LRS
  lines = ["| arm | chosen lr (width 64) | " + " | ".join(f"lr {lr:g}" for lr in lrs) + " |",
           "|---|---|" + "---|" * len(lrs)]
  for arm in study.ARMS:
    lr, _ = study.best_lr(rows, arm)
    if lr is None or not study.collapses_small(rows, arm, lr):
      continue
    cells = [_cell(study.main_row(rows, arm, study.CHECK_WIDTH, x)) for x in lrs]
    lines.append(f"| {arm} | {lr:g} | " + " | ".join(cells) + " |")
  return "\n".join(lines) + "\n"


def seedcheck_table(rows, hard: bool = False) -> str:
  """Each main-grid (hard: hard-grid) cell whose seeds split (config.split_seeds): the failing seed at every rate
  of CHECK_LRS and at the chosen rate for SEEDCHECK_STEPS, beside the cell's other seeds at the chosen rate."""
  lrs = study.CHECK_LRS
  extra = study.grid_extra(hard)
  seeds, widths = (study.HARD_SEEDS, study.HARD_WIDTHS) if hard else (study.SEEDS, study.WIDTHS)
  lines = ["| arm | width | chosen lr | other seeds at it | seed | " + " | ".join(f"lr {lr:g}" for lr in lrs) +
           f" | chosen lr, {study.SEEDCHECK_STEPS:,} steps |", "|---|---|---|---|---|" + "---|" * (len(lrs) + 1)]
  for arm in study.ARMS:
    lr, _ = study.best_lr(rows, arm)
    if lr is None:
      continue
    for w in widths:
      failing = study.split_seeds(rows, arm, w, lr, seeds, hard=hard)
      for seed in failing:
        others = [(s, r) for s in seeds if s != seed and (r := study.main_row(rows, arm, w, lr, s, **extra))]
        other = ", ".join(f"{s}: {tables.fmt(float(r['accuracy']))}" for s, r in others)
        cells = [_cell(study.main_row(rows, arm, w, x, seed, **extra)) for x in lrs]
        longer = {**extra, "train.num_steps": study.SEEDCHECK_STEPS}
        cells.append(_cell(study.main_row(rows, arm, w, lr, seed, **longer)))
        lines.append(f"| {arm} | {w} | {lr:g} | {other} | {seed} | " + " | ".join(cells) + " |")
  return "\n".join(lines) + "\n"


def write(workdir: str, archive_dir: str = ARCHIVE, out: str = "") -> str:
  """Prints and returns the tables (writes them to `out`, the rows as .csv beside it), from the points in `workdir`
  once those of `archive_dir` ('' = none) are restored into it."""
  rows = tables.restored(load_rows, workdir, archive_dir)
  text = ("### Pilot (width 64, (64, 4), seed 0; ↑ = still rising)\n\n" + pilot_table(rows) +
          "\n### Main point (T=64, 4 kv pairs, 1,500 steps)\n\n" + grid_table(grid(rows, hard=False)) +
          f"\n### Hard point (T=128, 8 kv pairs, {study.HARD_STEPS:,} steps)\n\n" + grid_table(grid(rows, hard=True)) +
          f"\n### Learning-rate check at width {study.CHECK_WIDTH} (seed 0; arms below 0.5 there and ≥ 0.9 at "
          f"width 64; ↑ = still rising)\n\n" + lrcheck_table(rows) +
          "\n### Seed check (a cell with one seed ≥ 0.9 and another below 0.5: the failing seed at each rate, and "
          f"at the chosen rate for {study.SEEDCHECK_STEPS:,} steps; ↑ = still rising)\n\n" + seedcheck_table(rows) +
          f"\n### Seed check, hard point (T=128, 8 kv pairs: the same check on the hard grid, its rates at "
          f"{study.HARD_STEPS:,} steps; ↑ = still rising)\n\n" + seedcheck_table(rows, hard=True))
  common.emit_markdown(text, out)
  if out:
    tables.write_csv(tables.csv_beside(out), [
        "arm", "seq_len", "num_kv_pairs", "width", "lr", "seed", "steps", "state_size", "accuracy",
        f"first_step_{THRESHOLD}", "wall_time_s"], [
            [study.arm_of(r), r["_config"].get("data.seq_len"), r["_config"].get("data.num_kv_pairs"),
             r["_overrides"].get("model.d_model"), r["_overrides"].get("train.learning_rate"), r["_overrides"].get("seed"),
             r["_config"].get("train.num_steps"), r.get("state_size"), r.get("accuracy"), first_step(r),
             r.get("wall_time")] for r in rows if r.get("status") == "ok"])
  return text


if __name__ == "__main__":
  tables.run_script(write, "runs/mqar", ARCHIVE)
