"""The MQAR ablation's tables from a sweep directory (experiments/mqar/ablation.py).

  python experiments/mqar/ablation_table.py --workdir=runs/mqar_ablation [--arg=...] [--out=experiments/mqar/ablation.md]
  python -m linear_seq.studies.tables --table=experiments/mqar/ablation_table.py[:arg] --workdir=runs/mqar_ablation \
      [--out=...]     # the same through the studies' tables CLI (the ablation keeps no points folder)

Per mixer and variant: final accuracy of every seed, its mean, seeds ≥ 0.99, the first evaluated step with
accuracy ≥ 0.99 (evaluations every 250 steps), and Δ = mean(variant) − mean(indep): what reverting that one
factor to our old choice costs. Points still to run are shown as '…'. Also writes the rows as CSV beside --out.
"""
import os

from linear_seq import config_lib
from linear_seq.studies import common
from linear_seq.studies import tables

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ablation.py")
ablation = config_lib.load_module(PATH)  # the ablation's study config beside this file, by path
THRESHOLD = 0.99


def summarize(rows: list[dict], arg: str = "") -> list[dict]:
  """Per (mixer, variant) of the study's points, by mixer then variant: the finished seeds' accuracies and first
  steps ≥ THRESHOLD, the points planned, the mean and Δ = mean − mean(indep) of the same mixer."""
  planned: dict[tuple[str, str], int] = {}
  for p in ablation.get_sweep(arg):
    cell = (p["model.mixer"], p.arm)
    planned[cell] = planned.get(cell, 0) + 1
  order = lambda cell: (cell[0], ablation.VARIANTS.index(cell[1]) if cell[1] in ablation.VARIANTS else 99)
  out = []
  for mixer, name in sorted(planned, key=order):
    done = sorted((r for r in tables.ok(rows, "accuracy") if (r["_overrides"]["model.mixer"], ablation.variant_of(r))
                   == (mixer, name)), key=lambda r: r["_overrides"]["seed"])
    accs = [float(r["accuracy"]) for r in done]
    out.append(dict(mixer=mixer, variant=name, of=planned[mixer, name], accuracies=accs,
                    seed_ids=[r["_overrides"]["seed"] for r in done],
                    mean=common.mean_std(accs)[0] if accs else None,
                    first_steps=[tables.first_step(r, THRESHOLD) for r in done]))
  means = {(s["mixer"], s["variant"]): s["mean"] for s in out}
  for s in out:
    ref = means.get((s["mixer"], "indep"))
    s["delta"] = None if s["mean"] is None or ref is None else s["mean"] - ref
  return out


def markdown(summary: list[dict]) -> str:
  body = []
  for s in summary:
    delta = "" if s["variant"] == "indep" else (tables.MISSING if s["delta"] is None else f"{s['delta']:+.3f}")
    body.append([s["mixer"], s["variant"], tables.per_seed(s["accuracies"], s["of"]), tables.fmt(s["mean"]), delta,
                 f"{sum(a >= THRESHOLD for a in s['accuracies'])}/{len(s['accuracies'])}",
                 " / ".join("—" if t is None else str(t) for t in s["first_steps"])])
  return tables.markdown(["mixer", "variant", "accuracy per seed", "mean", "Δ vs indep", f"seeds ≥ {THRESHOLD}",
                          f"first step ≥ {THRESHOLD}"], body)


def write(workdir: str, archive_dir: str = "", out: str = "", arg: str = "") -> str:
  """Prints and returns the table of the points of ablation.py:`arg` that have a sub-workdir in `workdir` (writes
  it to `out` too, the rows as .csv beside it)."""
  summary = summarize(tables.restored(lambda wd: tables.study_rows(PATH, wd, arg), workdir, archive_dir), arg)
  if out:
    tables.write_csv(tables.csv_beside(out), ["mixer", "variant", "seed", "accuracy", f"first_step_{THRESHOLD}",
                                              "delta_mean_vs_indep"],
                     [[s["mixer"], s["variant"], seed, a, t, s["delta"]] for s in summary
                      for seed, a, t in zip(s["seed_ids"], s["accuracies"], s["first_steps"])])
  return common.emit_markdown(markdown(summary), out)


if __name__ == "__main__":   # flags defined here only, as in table.py (a process may load several study scripts)
  tables.run_script(write, "runs/mqar_ablation", "", arg="")
