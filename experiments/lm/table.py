"""The LM study's tables from its sweep directory (experiments/lm/config.py).

  python experiments/lm/table.py --workdir=runs/lm [--out=experiments/lm/study.md]
      [--archive=experiments/lm/points]   # the default: the archived points are restored into --workdir first

Pilot: every arm's seed-0 validation bits/byte per learning rate, and the rate chosen (config.best_lr).
Main: per arm at its chosen rate, sorted by mean: width, parameters, recurrent state (floats per sequence),
each seed's bits/byte, mean ± std (sample std over the seeds run), train tokens/s and decode ms/token (means over
seeds), the validation loss early and late in the context (position_loss.json). Seed spread: for each arm, the
arms it is better than beyond the seed spread (every seed of one below every seed of the other, both with at
least 2 seeds), the arms whose seeds overlap its own, and those not decided yet (under 2 seeds on a side), with
the difference of means. Length: bits/byte at every evaluation length
(mean ± std over seeds), trained at T=128. Unfinished seeds are shown as '…'.
Also writes every finished point as a CSV row beside --out.
"""
import os

from linear_seq import config_lib
from linear_seq.studies import collect
from linear_seq.studies import common
from linear_seq.studies import tables

ARCHIVE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "points")
PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "config.py")
study = config_lib.load_module(PATH)  # by path: every study's config is named config.py
STAGE = "stage=main"
# Context positions (position_loss.json's, 1-based) averaged for the early / late loss columns.
EARLY = (1, 16)
LATE = (65, 128)


def load_rows(workdir: str) -> list[dict]:
  """Rows of every point stage=main defines that has a sub-workdir (finished or not), chosen as the sweep does."""
  return tables.study_rows(PATH, workdir, STAGE, extra_commands=study.get_extra_commands(STAGE))


def _ok(rows):
  return tables.ok(rows, "bits_per_byte")


def _mean(values, digits=3, std=True):
  return tables.mean_std(values, digits, std)


def _width(rows, arm):
  widths = {r["_overrides"]["model.d_model"] for r in rows if study.label(r) == arm}
  return min(widths) if widths else None


def pilot_table(rows) -> str:
  widths = {arm: _width(rows, arm) for arm in study.DEFAULT_ARMS}
  table = tables.pilot_table(study.TUNING, rows, [(a, w) for a, w in widths.items() if w is not None],
                             lambda r: tables.fmt(float(r["bits_per_byte"])), lambda arm, w: (arm, w), ("arm", "width"))
  lines = table.splitlines()
  lrs = study.RULE.rates()
  missing = {a: f"| {a} | … |" + " |" * len(lrs) + " … |" for a, w in widths.items() if w is None}
  body = iter(lines[2:])
  return "\n".join(lines[:2] + [missing.get(a) or next(body) for a in widths]) + "\n"


def cells(rows):
  """[(arm, width, lr, finished rows at the chosen rate sorted by seed)] for the arms whose rate is decided."""
  out = []
  ok = _ok(rows)
  for arm in study.DEFAULT_ARMS:
    w = _width(rows, arm)
    lr = None if w is None else study.best_lr(rows, arm, w)[0]
    if lr is None:
      continue
    cell = sorted((r for r in ok if study.label(r) == arm and r["_overrides"] == study.point(
        arm, w, lr, r["_overrides"]["seed"])), key=lambda r: r["_overrides"]["seed"])
    out.append((arm, w, lr, cell))
  return sorted(out, key=lambda c: common.mean_std([float(r["bits_per_byte"]) for r in c[3]])[0] if c[3] else 1e9)


def _bits(cell):
  return [float(r["bits_per_byte"]) for r in cell]


def position_loss(row, span) -> float | None:
  """The point's mean validation loss (nats/token) over context positions span[0]..span[1] (position_loss.json)."""
  data = collect.read_json(os.path.join(row.get("_workdir", ""), "position_loss.json")) or {}
  vals = [l for p, l in zip(data.get("position", []), data.get("position_loss", [])) if span[0] <= p <= span[1]]
  return sum(vals) / len(vals) if vals else None


def _values(cell, key):
  return [float(r[key]) for r in cell if isinstance(r.get(key), (int, float))]


def main_table(cs, seeds: int = study.SEEDS) -> str:
  lines = ["| arm | width | params | state (floats/seq) | lr | bits/byte per seed | mean ± std | train tokens/s | "
           f"decode ms/token | loss at positions {EARLY[0]}–{EARLY[1]} → {LATE[0]}–{LATE[1]} |",
           "|---|---|---|---|---|---|---|---|---|---|"]
  for arm, w, lr, cell in cs:
    bits = _bits(cell)
    per_seed = tables.per_seed(bits, seeds)
    first = cell[0] if cell else {}
    params = f"{int(first['num_params']):,}" if "num_params" in first else "…"
    state = f"{int(first['state_size']):,}" if "state_size" in first else "…"
    if arm == "softmax" and cell:
      state += f" (KV cache, T={cell[0]['_config'].get('data.seq_len')})"
    early = [v for v in (position_loss(r, EARLY) for r in cell) if v is not None]
    late = [v for v in (position_loss(r, LATE) for r in cell) if v is not None]
    pos = f"{_mean(early, std=False)} → {_mean(late, std=False)}" if early and late else "…"
    lines.append(f"| {arm} | {w} | {params} | {state} | {lr:g} | {per_seed} | {_mean(bits)} | "
                 f"{_mean(_values(cell, 'tokens_per_sec'), 0, std=False)} | "
                 f"{_mean(_values(cell, 'decode_ms_per_token'), 3, std=False)} | {pos} |")
  return "\n".join(lines) + "\n"


def spread_table(cs) -> str:
  lines = ["| arm | mean | better than (seeds do not overlap) | seeds overlap (Δ mean) | under 2 seeds on a side (Δ mean) |",
           "|---|---|---|---|---|"]
  for arm, _, _, cell in cs:
    a = _bits(cell)
    if not a:
      continue
    ma = sum(a) / len(a)
    worse, within, open_ = [], [], []
    for other, _, _, ocell in cs:
      b = _bits(ocell)
      if other == arm or not b:
        continue
      d = f"{other} ({ma - sum(b) / len(b):+.3f})"
      if len(a) < 2 or len(b) < 2:
        open_.append(d)
      elif tables.separated(a, b):
        if ma < sum(b) / len(b):
          worse.append(d)
      else:
        within.append(d)
    lines.append(f"| {arm} | {ma:.3f} | {', '.join(worse) or '—'} | {', '.join(within) or '—'} | "
                 f"{', '.join(open_) or '—'} |")
  return "\n".join(lines) + "\n"


def lengths(cs) -> list[int]:
  out = set()
  for _, _, _, cell in cs:
    out |= {int(r["eval_seq_len"]) for r in study.by_length(cell)}
  return sorted(out)


def length_table(cs) -> str:
  ts = lengths(cs)
  lines = ["| arm | " + " | ".join(f"T={t:,}" for t in ts) + (f" | T={ts[-1]:,} − T={ts[0]:,} |" if ts else " |"),
           "|---|" + "---|" * (len(ts) + 1)]
  for arm, _, _, cell in cs:
    by = study.by_length(cell)
    at = {t: [float(r["bits_per_byte"]) for r in by if r["eval_seq_len"] == t] for t in ts}
    # the change per seed (the same model evaluated at both lengths), then its mean
    seeds = {r["_overrides"]["seed"]: {} for r in by}
    for r in by:
      seeds[r["_overrides"]["seed"]][r["eval_seq_len"]] = float(r["bits_per_byte"])
    deltas = [v[ts[-1]] - v[ts[0]] for v in seeds.values() if ts and ts[0] in v and ts[-1] in v]
    change = "…" if not deltas else f"{sum(deltas) / len(deltas):+.3f}"
    lines.append(f"| {arm} | " + " | ".join(_mean(at[t]) for t in ts) + f" | {change} |")
  return "\n".join(lines) + "\n"


def length_by_rate_table(rows) -> str:
  """Seed 0's change from T=128 to the longest evaluation length at every pilot rate run (how the length
  behaviour depends on the training, e.g. how far S4D's step sizes moved from their slow initialization)."""
  ok = _ok(rows)
  ts = sorted({int(r["eval_seq_len"]) for r in study.by_length(ok)})
  if len(ts) < 2:
    return "(no evaluation past the training length yet)\n"
  table = {}
  for arm in study.DEFAULT_ARMS:
    w = _width(rows, arm)
    for r in ok:
      o = r["_overrides"]
      if w is not None and o == study.point(arm, w, o["train.learning_rate"], 0):
        at = {b["eval_seq_len"]: float(b["bits_per_byte"]) for b in study.by_length([r])}
        if ts[0] in at and ts[-1] in at:
          table[arm, o["train.learning_rate"]] = at[ts[-1]] - at[ts[0]]
  lrs = sorted({lr for _, lr in table})
  lines = ["| arm | " + " | ".join(f"lr {lr:g}" for lr in lrs) + " |", "|---|" + "---|" * len(lrs)]
  for arm in study.DEFAULT_ARMS:
    if any((arm, lr) in table for lr in lrs):
      lines.append(f"| {arm} | " + " | ".join(f"{table[arm, lr]:+.3f}" if (arm, lr) in table else "" for lr in lrs)
                   + " |")
  return "\n".join(lines) + "\n"


def write(workdir: str, archive_dir: str = ARCHIVE, out: str = "") -> str:
  """Prints and returns the tables (writes them to `out`, the rows as .csv beside it), from the points in `workdir`
  once those of `archive_dir` ('' = none) are restored into it."""
  rows = tables.restored(load_rows, workdir, archive_dir)
  cs = cells(rows)
  text = ("### Pilot (seed 0, validation bits/byte at step 1,200 per learning rate)\n\n" + pilot_table(rows) +
          f"\n### Main (each arm at its chosen rate; seeds {', '.join(map(str, range(study.SEEDS)))}; sorted by "
          "mean)\n\n" + main_table(cs) +
          "\n### Seed spread (a difference counts when the arms' seeds do not overlap)\n\n" + spread_table(cs) +
          "\n### Length generalization (trained at T=128; validation bits/byte, mean ± std over seeds; the last "
          "column is the mean over seeds of each model's change)\n\n" + length_table(cs) +
          "\n### Length change by learning rate (seed 0, the pilot: bits/byte at the longest evaluation length "
          "minus at T=128)\n\n" + length_by_rate_table(rows))
  common.emit_markdown(text, out)
  if out:
    ts = [t for t in lengths(cs) if t != 128]
    tables.write_csv(tables.csv_beside(out), [
        "arm", "width", "lr", "seed", "num_params", "state_size", "bits_per_byte",
        *[f"bits_per_byte@T{t}" for t in ts], "tokens_per_sec", "decode_ms_per_token", "wall_time_s"], [
            [study.label(r), r["_overrides"].get("model.d_model"), r["_overrides"].get("train.learning_rate"),
             r["_overrides"].get("seed"), r.get("num_params"), r.get("state_size"), r.get("bits_per_byte"),
             *[r.get(f"bits_per_byte@T{t}") for t in ts], r.get("tokens_per_sec"), r.get("decode_ms_per_token"),
             r.get("wall_time")] for r in _ok(rows)])
  return text


if __name__ == "__main__":
  tables.run_script(write, "runs/lm", ARCHIVE)
