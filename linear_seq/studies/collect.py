"""Collects a sweep's points into result rows, one dict per point.

Per point it reads SUB/eval.json (linear_seq.evaluate), SUB/config.json and SUB/metrics.jsonl (the trainer),
the outputs of the study's extra commands and SUB/sweep_point.json (the sweep runner: status, wall time).
An extra command's evaluation at another length (evaluate's eval_validation_T512.json) gives columns with the
length appended (bits_per_byte@T512), next to eval.json's; so does the trainer's final evaluation at its
eval.lengths (metrics.jsonl's eval_accuracy_T80 -> accuracy@T80; `by_length` turns those into one row per length).
A row holds the point's overrides and scalar results; '_overrides', '_config' (flattened), '_metrics' and
'_workdir' ride along for the report and the plots, and '_arm' (the study's arm label) for a point that carries
one (linear_seq.studies.protocol.Point).
"""
import csv
import json
import os
import re
import statistics
from typing import Any, Sequence

from linear_seq import config_lib


def read_json(path: str) -> dict[str, Any] | None:
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
  ev = read_json(os.path.join(workdir, "eval.json")) or {}
  for extra in extra_files:  # outputs of a study's extra per-point commands (e.g. probe.json)
    out = read_json(os.path.join(workdir, extra)) or {}
    suffix = other_eval_suffix(extra)
    if suffix:  # an evaluation at another length / split: its columns side by side with eval.json's
      out = {f"{k}{suffix}": v for k, v in out.items()}
    ev = {**out, **ev}
  rec = read_json(os.path.join(workdir, "sweep_point.json")) or {}
  config = read_json(os.path.join(workdir, "config.json")) or {}
  metrics = read_metrics(workdir)
  row: dict[str, Any] = {"name": name, **overrides}
  for k, v in ev.items():
    if isinstance(v, (int, float, str, bool)) or v is None:  # lists (e.g. loss per position) stay in their file
      row.setdefault(k, v)
  for k, v in at_lengths(metrics, ev.get("step")).items():  # the trainer's final evaluation at eval.lengths
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


# The trainer's evaluation keys at each of eval.lengths (train.py: eval_accuracy_T80) -> evaluate's key.
_AT_LENGTH = re.compile(r"(eval_accuracy|bits_per_byte|eval_loss|eval_tokens)_T(\d+)")
_AT_LENGTH_NAMES = {"eval_accuracy": "accuracy"}


def at_lengths(metrics: Sequence[dict[str, Any]], step: Any) -> dict[str, Any]:
  """The training run's final evaluation at its eval.lengths (the metrics.jsonl line at `step`, eval.json's):
  eval_accuracy_T80 -> accuracy@T80, eval_loss_T80 -> eval_loss@T80, bits_per_byte_T80 -> bits_per_byte@T80,
  the columns an extra command's evaluation at that length (eval_validation_T80.json) gives. {} without a step."""
  if step is None:
    return {}
  out = {}
  for m in metrics:
    if m.get("step") != step:
      continue
    for k, v in m.items():
      match = _AT_LENGTH.fullmatch(k)
      if match:
        out[f"{_AT_LENGTH_NAMES.get(match.group(1), match.group(1))}@T{match.group(2)}"] = v
  return out


def by_length(rows: Sequence[dict[str, Any]], metric: str, lengths: Sequence[int]) -> list[dict[str, Any]]:
  """One row per (row, length) for plotting a metric against the evaluation length: a copy of each row with
  'length' and `metric` its value there (`metric` itself at the row's eval_seq_len, the training length, else
  the column metric@T<length>); a length the row has no value at is left out."""
  out = []
  for r in rows:
    for length in lengths:
      v = r.get(metric) if length == r.get("eval_seq_len") else r.get(f"{metric}@T{length}")
      if isinstance(v, (int, float)):
        out.append({**r, "length": length, metric: v})
  return out


def other_eval_suffix(filename: str) -> str:
  """'@T512' for evaluate's eval_validation_T512.json, '@test_T512' for eval_test_T512.json, else ''."""
  m = re.fullmatch(r"eval_(\w+?)_T(\d+)\.json", os.path.basename(filename))
  if not m:
    return ""
  return f"@T{m.group(2)}" if m.group(1) == "validation" else f"@{m.group(1)}_T{m.group(2)}"


def collect(points: Sequence[Any], statuses: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
  """Rows for sweep points (with .workdir, .overrides, .name and .outputs), in sweep order."""
  statuses = statuses or {}
  rows = [collect_point(p.workdir, p.overrides, p.name, statuses.get(p.name, {}).get("status", ""),
                        getattr(p, "outputs", ())) for p in points]
  for p, row in zip(points, rows):
    if getattr(p, "arm", ""):   # the study's arm label, carried by a protocol point
      row["_arm"] = p.arm
  return rows


def value(row: dict[str, Any], key: str) -> Any:
  """A row's column, falling back to the point's resolved config (e.g. 'model.d_model')."""
  if key in row:
    return row[key]
  return row.get("_config", {}).get(key)


def _cell(text: str) -> Any:
  """A results.csv cell back as a number where it is one ('' -> None)."""
  if text == "":
    return None
  for cast in (int, float):
    try:
      return cast(text)
    except ValueError:
      pass
  return {"True": True, "False": False}.get(text, text)


def rows_from_csv(path: str, base_config, known: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
  """Result rows rebuilt from a committed results.csv (report.write_csv), for redrawing a study's plots without
  its sub-workdirs: a row's overrides are its sweep point's (`known`, by name) or its non-empty override cells
  typed by the config (config_lib.parse_value), its '_config' the base config with them applied. Learning
  curves and per-point files are not in the CSV: '_metrics' is empty and '_workdir' is ''."""
  with open(path, newline="") as f:
    reader = csv.DictReader(f)
    fields = reader.fieldnames or []
    table = list(reader)
  if "name" not in fields or "status" not in fields:
    raise ValueError(f"{path}: not a sweep's results.csv (needs the name and status columns)")
  override_keys = fields[fields.index("name") + 1:fields.index("status")]
  flat_base = config_lib.flatten(config_lib.to_dict(base_config))
  rows = []
  for cells in table:
    name = cells["name"]
    if known and name in known:
      overrides = dict(known[name])
    else:
      overrides = {k: config_lib.parse_value(k, flat_base.get(k), cells[k]) for k in override_keys if cells[k] != ""}
    row: dict[str, Any] = {"name": name, **overrides}
    for k, v in cells.items():
      if k not in override_keys and k != "name":
        row[k] = _cell(v)
    row["_overrides"] = overrides
    row["_config"] = config_lib.flatten(config_lib.to_dict(config_lib.apply_overrides(base_config, overrides)))
    row["_metrics"] = []
    row["_workdir"] = ""
    rows.append(row)
  curves = read_json(os.path.join(os.path.dirname(path), CURVES_FILE)) or {}
  for row in rows:  # learning curves and per-point series, where the sweep saved them (write_curves)
    saved = curves.get(row["name"], {})
    row["_metrics"] = saved.get("metrics", [])
    row["_series"] = saved.get("series", {})
  return rows


CURVES_FILE = "curves.json"
_CURVE_KEYS = ("step", "train_loss", "eval_loss", "eval_accuracy", "eval_bits_per_byte", "accuracy", "bits_per_byte")


def write_curves(workdir: str, rows: Sequence[dict[str, Any]], sources: Sequence[str] = ()) -> str:
  """DIR/curves.json: each point's learning curves (the loss/accuracy keys of its metrics.jsonl lines) and its
  per-point series files (`sources`, e.g. position_loss.json), so that --plots_only can redraw every plot from
  the committed study folder without the sub-workdirs. Returns the file name."""
  out = {}
  for r in rows:
    series = {src: read_json(os.path.join(r["_workdir"], src)) for src in sources}
    out[r["name"]] = {"metrics": [{k: m[k] for k in _CURVE_KEYS if k in m} for m in r.get("_metrics", [])],
                      "series": {k: v for k, v in series.items() if v is not None}}
  with open(os.path.join(workdir, CURVES_FILE), "w") as f:
    json.dump(out, f, separators=(",", ":"))
  return CURVES_FILE
