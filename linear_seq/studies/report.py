"""Collects a sweep's points into DIR/results.csv and DIR/results.md (+ the study's plots).

Per point it reads SUB/eval.json (linear_seq.evaluate), SUB/config.json and SUB/metrics.jsonl (the trainer)
and SUB/sweep_point.json (the sweep runner: status, wall time). results.csv has one row per point;
results.md has the table averaged over seeds (mean ± std where a `seed` override varies), the plots, the
per-point table, failures, and the command, library versions and XLA flags the sweep ran with.
"""
import csv
import datetime
import importlib.metadata
import json
import math
import os
import platform
import statistics
from typing import Any, Iterable, Sequence

from linear_seq import config_lib

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
LIBRARIES = ("jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "numpy", "ml-collections", "grain")


def _read_json(path: str) -> dict[str, Any] | None:
  try:
    with open(path) as f:
      return json.load(f)
  except (OSError, ValueError):
    return None


def read_metrics(workdir: str) -> list[dict[str, Any]]:
  """SUB/metrics.jsonl as a list of dicts (missing file -> [])."""
  out = []
  try:
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
      for line in f:
        line = line.strip()
        if line:
          try:
            out.append(json.loads(line))
          except ValueError:
            pass  # a line cut off by a kill
  except OSError:
    pass
  return out


def collect_point(workdir: str, overrides: dict[str, Any], name: str, status: str = "",
                  extra_files: Sequence[str] = ()) -> dict[str, Any]:
  """One result row: overrides, eval.json's scalars, tokens/s, wall time, status; '_config'/'_metrics' attached."""
  ev = _read_json(os.path.join(workdir, "eval.json")) or {}
  for extra in extra_files:  # outputs of a study's extra per-point commands (e.g. probe.json)
    ev = {**(_read_json(os.path.join(workdir, extra)) or {}), **ev}
  rec = _read_json(os.path.join(workdir, "sweep_point.json")) or {}
  config = _read_json(os.path.join(workdir, "config.json")) or {}
  metrics = read_metrics(workdir)
  row: dict[str, Any] = {"name": name, **overrides}
  for k, v in ev.items():
    if isinstance(v, (int, float, str, bool)) or v is None:  # lists (e.g. loss per position) stay in their file
      row.setdefault(k, v)
  train = [m for m in metrics if "train_loss" in m]
  if train:
    row["final_train_loss"] = train[-1]["train_loss"]
  if row.get("tokens_per_sec") is None:
    speeds = [m["tokens_per_sec"] for m in train[1:] or train if m.get("tokens_per_sec")]  # first includes compile
    row["tokens_per_sec"] = statistics.median(speeds) if speeds else None
  if row.get("wall_time") is None:
    row["wall_time"] = rec.get("wall_time")
  if ev:
    row["status"] = "ok" if status in ("", "ok", "skipped") else status
  elif status == "failed" or rec.get("status") == "failed":
    row["status"] = "failed"
  else:
    row["status"] = "no eval.json"
  row["_overrides"] = dict(overrides)
  row["_config"] = config_lib.flatten(config)
  row["_metrics"] = metrics
  row["_workdir"] = workdir
  return row


def collect(points: Sequence[Any], statuses: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
  """Rows for sweep.Point objects (with .workdir, .overrides, .name), in sweep order."""
  statuses = statuses or {}
  return [collect_point(p.workdir, p.overrides, p.name, statuses.get(p.name, {}).get("status", ""),
                        getattr(p, "outputs", ())) for p in points]


def value(row: dict[str, Any], key: str) -> Any:
  """A row's column, falling back to the point's resolved config (e.g. 'model.d_model')."""
  if key in row:
    return row[key]
  return row.get("_config", {}).get(key)


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
      groups.setdefault(tuple(repr(value(r, k)) for k in group_keys), []).append(r)
  out = []
  for members in groups.values():
    agg: dict[str, Any] = {k: value(members[0], k) for k in group_keys}
    agg["seeds"] = [tuple(m.get(k) for k in seed_keys) if len(seed_keys) > 1 else m.get(seed_keys[0])
                    for m in members] if seed_keys else []
    for k in metrics:
      vals = [float(m[k]) for m in members if isinstance(m.get(k), (int, float)) and m.get(k) is not None]
      vals = [v for v in vals if not math.isnan(v)]
      if vals:
        agg[k] = (statistics.fmean(vals), statistics.stdev(vals) if len(vals) > 1 else 0.0, len(vals))
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


def _fmt_agg(v: Any, key: str = "") -> str:
  if isinstance(v, tuple):
    mean, std, n = v
    exact = key in ("num_params", "state_size")  # the same for every seed
    return _fmt(int(mean) if exact else mean) if n == 1 or exact else f"{_fmt(mean)} ± {_fmt(std)}"
  return _fmt(v)


def _md_table(header: Sequence[str], body: Sequence[Sequence[str]]) -> list[str]:
  lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
  lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in body]
  return lines


def environment(point_env: dict[str, str] | None = None) -> dict[str, str]:
  """Library versions, Python, platform and the XLA flags of the sweep process (and of its points)."""
  env = {"python": platform.python_version(), "platform": platform.platform(), "cpus": str(os.cpu_count())}
  for lib in LIBRARIES:
    try:
      env[lib] = importlib.metadata.version(lib)
    except importlib.metadata.PackageNotFoundError:
      env[lib] = "not installed"
  env["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "")
  if point_env:
    env["XLA_FLAGS (points)"] = point_env.get("XLA_FLAGS", "")
    env["points"] = "single-threaded, one CPU core each (affinity)"
  return env


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
  seeds = sorted({repr(s) for a in agg for s in a["seeds"]})
  lines = [f"# Results: {study}", "",
           f"Command: `{command}`" if command else "",
           f"Written {datetime.datetime.now().isoformat(timespec='seconds')}: {len(rows)} points, {ok} finished.", ""]
  title = "## Results" + (f" (mean ± std over seeds {', '.join(seeds)})" if any(len(a['seeds']) > 1 for a in agg)
                          else (f" (seed {', '.join(seeds)})" if seeds else ""))
  lines += [title, ""]
  header = [*group_keys, *(METRIC_COLUMNS.get(m, m) for m in metrics)] + (["seeds"] if seeds else [])
  body = [[_fmt(a["_members"][0].get(k)) for k in group_keys] + [_fmt_agg(a.get(m), m) for m in metrics]
          + ([", ".join(_fmt(s) for s in a["seeds"])] if seeds else []) for a in agg]
  lines += _md_table(header, body) + [""]
  defaults = []
  for k in group_keys:
    plain = next((r for r in rows if k not in r.get("_overrides", {})), None)
    if plain is not None and value(plain, k) is not None:
      defaults.append(f"{k}={_fmt(value(plain, k))}")
  if defaults:
    lines += ["Blank override cells take the study config's value: " + ", ".join(defaults)
              + " (a field a mixer does not use is ignored by it).", ""]
  if plot_files:
    lines += ["## Plots", ""] + [f"![{os.path.splitext(p)[0]}]({p})" for p in plot_files] + [""]
  if any(len(a["seeds"]) > 1 for a in agg):
    lines += ["## Per point", ""]
    lines += _md_table(["point", "status", *(METRIC_COLUMNS.get(m, m) for m in metrics)],
                       [[r["name"], r.get("status", ""), *(_fmt(r.get(m)) for m in metrics)] for r in rows])
    lines += [""]
  failed = [r for r in rows if r.get("status") != "ok"]
  if failed:
    lines += ["## Not finished", ""] + [f"- `{r['name']}`: {r.get('status')} (log: `{r['_workdir']}/log.txt`)"
                                         for r in failed] + [""]
  lines += ["## Environment", ""] + [f"- {k}: `{v}`" for k, v in env.items()] + [""]
  return "\n".join(lines)


def write_report(workdir: str, rows: Sequence[dict[str, Any]], *, study: str, command: str = "",
                 plots: Sequence[dict[str, Any]] | None = None, point_env: dict[str, str] | None = None) -> list[str]:
  """Writes results.csv, the plots and results.md into `workdir`; returns the written file names."""
  from linear_seq.studies import plots as plots_lib  # pylint: disable=g-import-not-at-top

  write_csv(os.path.join(workdir, "results.csv"), rows)
  plot_files = plots_lib.draw(plots, rows, workdir)
  env = environment(point_env)
  with open(os.path.join(workdir, "results.md"), "w") as f:
    f.write(markdown(rows, study=study, command=command, env=env, plot_files=plot_files))
  return ["results.csv", "results.md", *plot_files]
