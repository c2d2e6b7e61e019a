"""Archive records (linear_seq.studies.archive) for the MQAR study's points that ran before the sweep had
--archive, rebuilt from the committed study.csv and study.md (2026-12-02).

  python experiments/mqar/import_rows.py [--archive=experiments/mqar/points]

The sub-workdirs of the pilot, main-grid, lrcheck and seedcheck points were lost with the machine that ran
them; study.csv kept each finished point's final accuracy, state size, first evaluated step >= 0.9 and wall
time, and study.md's tables marked the points still rising at the end (↑). A record made here holds those values
only: eval.json = {step, accuracy, state_size, first_step_0.9, still_rising, imported_from}, sweep_point.json =
{status, wall_time}, config.json = the point's resolved config under this study's config today (so a later
change to the study's config refuses the record, as for any other), and no learning curve (metrics.jsonl
empty). config.still_rising and table.first_step read the two carried values when a row has no curve, so the
learning-rate choices, the follow-up points and the tables come out as before. Points already in the archive
are left alone.
"""
import csv
import os
import re

from absl import app
from absl import flags

from linear_seq import config_lib
from linear_seq.studies import archive
from linear_seq.studies import sweep

HERE = os.path.dirname(os.path.abspath(__file__))
# the study config beside this file, by path (every study's is named config.py)
study = config_lib.load_module(os.path.join(HERE, "config.py"))

SOURCE = "experiments/mqar/study.csv + study.md (2026-12-02; sub-workdir lost, no learning curve)"


def _key(arm, width, lr, seed, steps, seq_len):
  return (arm, int(width), float(lr), int(seed), int(steps), int(seq_len))


def rising_marks(md: str) -> dict[tuple, bool]:
  """{(arm, width, lr, seed, steps, seq_len): still rising} from the pilot, lrcheck and seedcheck tables' cells."""
  main = study.get_config("")
  steps, seq_len = main.train.num_steps, main.data.seq_len
  out, section, lrs = {}, "", []
  for line in md.splitlines():
    if line.startswith("### "):
      section, lrs = line, []
      continue
    if line.startswith("| arm |"):
      lrs = [float(x) for x in re.findall(r"\| lr ([0-9.e-]+) ", line)]
      continue
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if not line.startswith("| ") or set(cells[0]) <= set("-"):
      continue
    if section.startswith("### Pilot"):
      for lr, cell in zip(lrs, cells[1:]):
        if cell:
          out[_key(cells[0], study.PILOT_WIDTH, lr, 0, steps, seq_len)] = "↑" in cell
    elif section.startswith("### Learning-rate check"):
      for lr, cell in zip(lrs, cells[2:]):
        out[_key(cells[0], study.CHECK_WIDTH, lr, 0, steps, seq_len)] = "↑" in cell
    elif section.startswith("### Seed check"):
      hard = section.startswith("### Seed check, hard point")
      t, n = (study.HARD["data.seq_len"], study.HARD_STEPS) if hard else (seq_len, steps)
      arm, width, chosen, seed = cells[0], int(cells[1]), float(cells[2]), int(cells[4])
      for lr, cell in zip(lrs, cells[5:5 + len(lrs)]):
        out[_key(arm, width, lr, seed, n, t)] = "↑" in cell
      out[_key(arm, width, chosen, seed, study.SEEDCHECK_STEPS, t)] = "↑" in cells[5 + len(lrs)]
  return out


def import_rows(archive_dir: str, csv_path: str, md_path: str) -> tuple[int, int]:
  """Writes a record for each row of csv_path not in archive_dir yet; returns (written, already there)."""
  with open(md_path) as f:
    marks = rising_marks(f.read())
  base = study.get_config("")
  made = kept = 0
  with open(csv_path, newline="") as f:
    rows = list(csv.DictReader(f))
  for r in rows:
    steps, hard = int(r["steps"]), int(r["seq_len"]) == study.HARD["data.seq_len"]
    more = {**study.HARD, "train.num_steps": steps} if hard else (
        {} if steps == base.train.num_steps else {"train.num_steps": steps})
    overrides = study.point(r["arm"], int(r["width"]), float(r["lr"]), int(r["seed"]), **more)
    name = sweep.point_name(overrides)
    if archive.load(archive_dir, name) is not None:
      kept += 1
      continue
    first = r["first_step_0.9"]
    ev = {"step": steps, "accuracy": float(r["accuracy"]), "state_size": int(r["state_size"]),
          "first_step_0.9": int(first) if first else None,
          "still_rising": marks.get(_key(r["arm"], r["width"], r["lr"], r["seed"], steps, r["seq_len"]), False),
          "imported_from": SOURCE}
    record = {"version": archive.VERSION, "name": name, "overrides": overrides, "files": {
        "eval.json": ev,
        "sweep_point.json": {"name": name, "status": "ok", "wall_time": float(r["wall_time_s"]),
                             "imported_from": SOURCE},
        config_lib.CONFIG_FILE: config_lib.to_dict(sweep.resolve(base, overrides)),
        archive.METRICS_FILE: [],
    }}
    archive.write_record(archive_dir, record)
    made += 1
  return made, kept


def main(argv):
  del argv
  f = flags.FLAGS
  made, kept = import_rows(f.archive, f.csv, f.md)
  print(f"{made} records written to {f.archive}, {kept} already there")


if __name__ == "__main__":   # flags defined here only (a test imports this module beside the study config)
  flags.DEFINE_string("archive", os.path.join(HERE, "points"), "The study's archive folder.")
  flags.DEFINE_string("csv", os.path.join(HERE, "study.csv"), "The committed rows.")
  flags.DEFINE_string("md", os.path.join(HERE, "study.md"), "The committed tables (for the ↑ marks).")
  app.run(main)
