"""Writes a sweep's result rows (collect.py) as DIR/results.csv and DIR/results.md.

results.csv has one row per point; results.md has the table averaged over seeds (mean ± std where a `seed`
override varies; the seeds listed by value), a descriptive column with one value in every row (an override,
params, state size, the seeds) said once in a line above the table instead, the plots (drawn before, by
plots.py), the per-point table, failures, and the command, library versions and XLA flags the sweep ran with.
"""
import csv
import datetime
import math
import os
from typing import Any, Iterable, Sequence

from linear_seq.studies import collect
from linear_seq.studies import common

# Table columns (eval.json / derived keys) in display order, with their headers.
METRIC_COLUMNS = {
    "num_params": "params",
    "state_size": "state size",
    "eval_loss": "eval loss",
    "accuracy": "accuracy",
    "bits_per_byte": "bits/byte",
    "perplexity": "perplexity",
    "final_train_loss": "train loss",
    "tokens_per_sec": "tokens/s",
    "decode_ms_per_token": "decode ms/token",
    "wall_time": "wall time (s)",
}
_NOT_METRICS = {"step", "split", "status", "name", "workdir", "returncode"}
# eval.json bookkeeping kept in results.csv but not in the markdown table.
_CSV_ONLY = {"eval_batches", "eval_tokens", "eval_seq_len", "decode_context"}


def is_seed_key(key: str) -> bool:
  return key == "seed" or key.endswith(".seed") or key.endswith("_seed")


def override_keys(rows: Iterable[dict[str, Any]]) -> list[str]:
  """Override columns in first-seen order."""
  keys: list[str] = []
  for r in rows:
    keys += [k for k in r.get("_overrides", {}) if k not in keys]
  return keys


def metric_keys(rows: Sequence[dict[str, Any]]) -> list[str]:
  """Numeric result columns present in any ok row: the known ones in order, then any others from eval.json."""
  ok = [r for r in rows if r.get("status") == "ok"]
  overrides = set(override_keys(rows))
  present = [k for k in METRIC_COLUMNS if any(isinstance(r.get(k), (int, float)) for r in ok)]
  extra = sorted({k for r in ok for k, v in r.items() if isinstance(v, (int, float)) and not isinstance(v, bool)
                  and not k.startswith("_") and k not in METRIC_COLUMNS and k not in _NOT_METRICS
                  and k not in overrides})
  return present + extra


def aggregate(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
  """Groups ok rows over seed overrides: each metric becomes (mean, std, n); 'seeds' lists the seeds."""
  keys = override_keys(rows)
  group_keys = [k for k in keys if not is_seed_key(k)]
  seed_keys = [k for k in keys if is_seed_key(k)]
  metrics = metric_keys(rows)
  groups: dict[tuple, list[dict[str, Any]]] = {}
  for r in rows:
    if r.get("status") == "ok":
      groups.setdefault(tuple(repr(collect.value(r, k)) for k in group_keys), []).append(r)
  out = []
  for members in groups.values():
    agg: dict[str, Any] = {k: collect.value(members[0], k) for k in group_keys}
    agg["seeds"] = [tuple(m.get(k) for k in seed_keys) if len(seed_keys) > 1 else m.get(seed_keys[0])
                    for m in members] if seed_keys else []
    for k in metrics:
      vals = [float(m[k]) for m in members if isinstance(m.get(k), (int, float)) and m.get(k) is not None]
      vals = [v for v in vals if not math.isnan(v)]
      if vals:
        agg[k] = common.mean_std(vals)
    agg["_members"] = members
    out.append(agg)
  return out


def _fmt(v: Any) -> str:
  if v is None:
    return ""
  if isinstance(v, bool) or isinstance(v, str):
    return str(v)
  if isinstance(v, int):
    return f"{v:,}" if abs(v) >= 10_000 else str(v)
  if isinstance(v, float):
    if math.isnan(v) or math.isinf(v):
      return str(v)
    if abs(v) >= 10_000:
      return f"{v:,.0f}"
    return f"{v:.4g}"
  return str(v)


# Result columns that are the same for every seed of a row (shown as one number, not mean ± std).
_EXACT = ("num_params", "state_size")


def _seed_list(seeds: Sequence[Any]) -> str:
  """The seeds by value: '0, 1, 2'."""
  return ", ".join(_fmt(s) for s in seeds)


def _constant(header: str, cell: str, override: bool) -> str:
  """A constant column's entry in the line above the table: 'model.d_model=64', 'params 99,136', 'seeds 0, 1'
  (an empty override cell: the study config's value)."""
  if override:
    return f"{header}=" + (cell if cell else "(the study config's)")
  return f"{header} {cell}"


def _fmt_agg(v: Any, key: str = "") -> str:
  if isinstance(v, tuple):
    mean, std, n = v
    exact = key in _EXACT  # the same for every seed
    return _fmt(int(mean) if exact else mean) if n == 1 or exact else f"{_fmt(mean)} ± {_fmt(std)}"
  return _fmt(v)


def write_csv(path: str, rows: Sequence[dict[str, Any]]) -> None:
  keys = ["name", *override_keys(rows), "status", "step", *metric_keys(rows)]
  extra = sorted({k for r in rows for k in r if not k.startswith("_") and k not in keys})
  with open(path, "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=keys + extra, extrasaction="ignore")
    w.writeheader()
    for r in rows:
      w.writerow({k: r.get(k) for k in keys + extra})


def markdown(rows: Sequence[dict[str, Any]], *, study: str, command: str, env: dict[str, str],
             plot_files: Sequence[str] = ()) -> str:
  """The results.md text."""
  okeys = override_keys(rows)
  metrics = [m for m in metric_keys(rows) if m not in _CSV_ONLY]
  group_keys = [k for k in okeys if not is_seed_key(k)]
  agg = aggregate(rows)
  ok = sum(r.get("status") == "ok" for r in rows)
  by_value = lambda s: (0, s, "") if isinstance(s, int) else (1, 0, repr(s))   # numbers in order, then the rest
  seeds = sorted({s for a in agg for s in a["seeds"]}, key=by_value)
  seed_lists = {tuple(a["seeds"]) for a in agg}
  lines = [f"# Results: {study}", "",
           f"Command: `{command}`" if command else "",
           f"Written {datetime.datetime.now().isoformat(timespec='seconds')}: {len(rows)} points, {ok} finished.", ""]
  if any(len(a["seeds"]) > 1 for a in agg):
    title = "## Results (mean ± std over " + (f"seeds {_seed_list(seeds)})" if len(seed_lists) == 1
                                               else f"each row's seeds, column seeds; {_seed_list(seeds)} in all)")
  else:
    title = "## Results" + (f" (seed {_seed_list(seeds)})" if seeds else "")
  lines += [title, ""]
  columns = [*((k, k, lambda a, k=k: _fmt(a["_members"][0].get(k))) for k in group_keys),
             *((m, METRIC_COLUMNS.get(m, m), lambda a, m=m: _fmt_agg(a.get(m), m)) for m in metrics),
             *([("seeds", "seeds", lambda a: _seed_list(a["seeds"]))] if seeds else [])]
  cells = [[cell(a) for _, _, cell in columns] for a in agg]
  # a descriptive column (an override, params, state size, the seeds) with one value in every row of two or more
  # is said once, in a line above the table
  constant = [i for i, (key, _, _) in enumerate(columns) if len(agg) > 1 and len({c[i] for c in cells}) == 1
              and (key in group_keys or key in _EXACT or key == "seeds")]
  if constant:
    lines += ["In every row: " + "; ".join(_constant(columns[i][1], cells[0][i], columns[i][0] in group_keys)
                                       for i in constant)
              + ".", ""]
  keep = [i for i in range(len(columns)) if i not in constant]
  lines += common.md_table([columns[i][1] for i in keep], [[c[i] for i in keep] for c in cells]) + [""]
  defaults = []
  for k in group_keys:
    plain = next((r for r in rows if k not in r.get("_overrides", {})), None)
    if plain is not None and collect.value(plain, k) is not None:
      defaults.append(f"{k}={_fmt(collect.value(plain, k))}")
  if defaults:
    lines += ["Blank override cells take the study config's value: " + ", ".join(defaults)
              + " (a field a mixer does not use is ignored by it).", ""]
  if plot_files:
    lines += ["## Plots", ""] + [f"![{os.path.splitext(p)[0]}]({p})" for p in plot_files if p.endswith(".png")]
    pdfs = [p for p in plot_files if p.endswith(".pdf")]
    lines += ["", "(Each plot also as PDF: " + ", ".join(pdfs) + ".)", ""] if pdfs else [""]
  if any(len(a["seeds"]) > 1 for a in agg):
    lines += ["## Per point", ""]
    lines += common.md_table(["point", "status", *(METRIC_COLUMNS.get(m, m) for m in metrics)],
                       [[r["name"], r.get("status", ""), *(_fmt(r.get(m)) for m in metrics)] for r in rows])
    lines += [""]
  failed = [r for r in rows if r.get("status") != "ok"]
  if failed:
    lines += ["## Not finished", ""] + [f"- `{r['name']}`: {r.get('status')} (log: `{r['_workdir']}/log.txt`)"
                                         for r in failed] + [""]
  lines += ["## Environment", ""] + [f"- {k}: `{v}`" for k, v in env.items()] + [""]
  return "\n".join(lines)


def write_report(workdir: str, rows: Sequence[dict[str, Any]], *, study: str, command: str = "",
                 plot_files: Sequence[str] = (), point_env: dict[str, str] | None = None) -> list[str]:
  """Writes results.csv and results.md (linking `plot_files`) into `workdir`; returns the written file names."""
  write_csv(os.path.join(workdir, "results.csv"), rows)
  env = common.environment(point_env)
  with open(os.path.join(workdir, "results.md"), "w") as f:
    f.write(markdown(rows, study=study, command=command, env=env, plot_files=plot_files))
  return ["results.csv", "results.md"]
