"""The MQAR ablation's tables from a sweep directory (experiments/mqar/ablation.py).

  python experiments/mqar/ablation_table.py --workdir=runs/mqar_ablation [--arg=...] [--out=experiments/mqar/ablation.md]

Per mixer and variant: final accuracy of every seed, its mean, seeds ≥ 0.99, the first evaluated step with
accuracy ≥ 0.99 (evaluations every 250 steps), and Δ = mean(variant) − mean(indep): what reverting that one
factor to our old choice costs. Unfinished points are shown as '…'. Also writes the rows as CSV beside --out.
"""
import csv
import os
import statistics

from absl import app
from absl import flags

from linear_seq import config_lib
from linear_seq.studies import collect, sweep

# the ablation's study config beside this file, by path
ablation = config_lib.load_module(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ablation.py"))
THRESHOLD = 0.99


def rows_by_cell(workdir: str, arg: str) -> dict[tuple[str, str], list[dict]]:
  base = config_lib.load_config(os.path.join(os.path.dirname(os.path.abspath(__file__)), f"ablation.py:{arg}"))
  points = sweep.make_points("ablation.py", workdir, ablation.get_sweep(arg), base_config=base)
  cells: dict[tuple[str, str], list[dict]] = {}
  for row in collect.collect(points):
    o = row["_overrides"]
    cells.setdefault((o["model.mixer"], ablation.variant_of(row)), []).append(row)
  return cells


def first_step(row: dict, threshold: float = THRESHOLD):
  for m in row["_metrics"]:
    if m.get("eval_accuracy") is not None and m["eval_accuracy"] >= threshold:
      return int(m["step"])
  return None


def summarize(cells):
  out = []
  for (mixer, name), rows in sorted(cells.items(), key=lambda kv: (kv[0][0], ablation.VARIANTS.index(kv[0][1])
                                                                    if kv[0][1] in ablation.VARIANTS else 99)):
    done = sorted((r for r in rows if r.get("status") == "ok"), key=lambda r: r["_overrides"]["seed"])
    accs = [float(r["accuracy"]) for r in done]
    steps = [first_step(r) for r in done]
    out.append(dict(mixer=mixer, variant=name, seeds=len(accs), of=len(rows), accuracies=accs,
                    seed_ids=[r["_overrides"]["seed"] for r in done],
                    mean=statistics.fmean(accs) if accs else None,
                    reach=sum(a >= THRESHOLD for a in accs), first_steps=steps,
                    wall_s=sum(float(r.get("wall_time") or 0) for r in done)))
  means = {(s["mixer"], s["variant"]): s["mean"] for s in out}
  for s in out:
    ref = means.get((s["mixer"], "indep"))
    s["delta"] = None if s["mean"] is None or ref is None else s["mean"] - ref
  return out


def markdown(summary) -> str:
  fmt = lambda v: "…" if v is None else f"{v:.3f}"  # noqa: E731
  lines = ["| mixer | variant | accuracy per seed | mean | Δ vs indep | seeds ≥ 0.99 | first step ≥ 0.99 |",
           "|---|---|---|---|---|---|---|"]
  for s in summary:
    per_seed = " / ".join([f"{a:.3f}" for a in s["accuracies"]] + ["…"] * (s["of"] - s["seeds"]))
    steps = " / ".join("—" if t is None else str(t) for t in s["first_steps"])
    delta = "" if s["variant"] == "indep" else ("…" if s["delta"] is None else f"{s['delta']:+.3f}")
    lines.append(f"| {s['mixer']} | {s['variant']} | {per_seed} | {fmt(s['mean'])} | {delta} | "
                 f"{s['reach']}/{s['seeds']} | {steps} |")
  return "\n".join(lines) + "\n"


def write(workdir: str, arg: str = "", out: str = "") -> str:
  """Prints and returns the tables (writes them to `out` too, the rows as .csv beside it)."""
  summary = summarize(rows_by_cell(workdir, arg))
  text = markdown(summary)
  print(text)
  if out:
    with open(out, "w") as f:
      f.write(text)
    with open(os.path.splitext(out)[0] + ".csv", "w", newline="") as f:
      w = csv.writer(f)
      w.writerow(["mixer", "variant", "seed", "accuracy", "first_step_0.99", "delta_mean_vs_indep"])
      for s in summary:
        for seed, a, t in zip(s["seed_ids"], s["accuracies"], s["first_steps"]):
          w.writerow([s["mixer"], s["variant"], seed, a, t, s["delta"]])
  return text


def main(argv):
  del argv
  write(flags.FLAGS.workdir, flags.FLAGS.arg, flags.FLAGS.out)


if __name__ == "__main__":   # flags defined here only, as in table.py (a process may load several study scripts)
  flags.DEFINE_string("workdir", "runs/mqar_ablation", "The ablation sweep's directory.")
  flags.DEFINE_string("arg", "", "The study config's options, as given to the sweep (e.g. 'seeds=3').")
  flags.DEFINE_string("out", "", "Write the markdown here (and the rows as .csv beside it); '' = stdout only.")
  app.run(main)
