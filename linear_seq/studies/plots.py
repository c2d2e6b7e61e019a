"""The study plots (matplotlib, Agg backend, PNG), drawn from collect.py's result rows.

A config's `get_plots()` returns a list of specs (dicts); `draw` writes each to DIR/<file>:
  {"kind": "xy", "x": "model.d_model", "y": "accuracy", "group": "model.mixer", "file": "acc_vs_width.png",
   "best_over": ["train.learning_rate"], "where": {"data.seq_len": 64}, "logx": True, "better": "max"}
      y vs x, one line per group (one series without a group), mean ± std over seeds as error bars;
      `best_over` keeps, for each (group, x), the best setting of those keys (e.g. the best learning rate;
      `better` max or min); a non-numeric x draws grouped bars instead.
  {"kind": "curves", "y": "eval_loss", "group": "model.mixer", "file": "curves.png", "x": "step"}
      learning curves from each point's metrics.jsonl (train_loss or eval_* lines), one line per point.
  {"kind": "series", "y": "position_loss", "group": "model.mixer", "file": "loss_vs_position.png",
   "source": "position_loss.json", "xlabel": "position"}
      a per-point list stored in SUB/<source> under key y (e.g. loss per position), one line per point.
x, y and group may also be functions of a row (e.g. an arm label); `where` values may be predicates.
Common keys: title, xlabel, ylabel, logx, logy, where; `"zoom": True` starts an xy bar chart's y axis near
its smallest bar instead of 0 (for close values such as bits/byte). Without specs, one bar chart of the main metric.
"""
import json
import math
import os
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top,wrong-import-position

from linear_seq.studies import collect  # pylint: disable=wrong-import-position
from linear_seq.studies import common  # pylint: disable=wrong-import-position

KINDS = ("xy", "curves", "series")


def _get(row: dict[str, Any], key) -> Any:
  """A column by name (falling back to the point's config), or key(row) when key is a function."""
  return key(row) if callable(key) else collect.value(row, key)


def _label(row: dict[str, Any], group) -> str:
  if callable(group):
    return str(group(row))
  keys = [group] if isinstance(group, str) else list(group or [])
  if not keys:
    return row["name"]
  return ",".join(str(collect.value(row, k)) for k in keys)


def _select(rows: Sequence[dict[str, Any]], where: dict[str, Any] | None) -> list[dict[str, Any]]:
  rows = [r for r in rows if r.get("status") == "ok"]
  for k, v in (where or {}).items():
    rows = [r for r in rows if (v(collect.value(r, k)) if callable(v) else collect.value(r, k) == v)]
  return rows


def _is_number(v: Any) -> bool:
  return isinstance(v, (int, float)) and not isinstance(v, bool) and not math.isnan(float(v))


def xy_points(rows: Sequence[dict[str, Any]], *, x: str, y: str, group=None, best_over: Sequence[str] = (),
              better: str = "max", where=None) -> dict[str, list[tuple[Any, float, float, int]]]:
  """{group label: [(x, mean y, std y, n seeds), ...]} after averaging seeds and picking the best of best_over."""
  if better not in ("max", "min"):
    raise ValueError(f"plot 'better' must be 'max' or 'min', got {better!r}")
  cells: dict[tuple, list[float]] = {}
  for r in _select(rows, where):
    yv = _get(r, y)
    if not _is_number(yv):
      continue
    setting = tuple(repr(collect.value(r, k)) for k in best_over)
    label = "" if group is None else _label(r, group)  # no group: one series, seeds averaged per x
    cells.setdefault((label, _get(r, x), setting), []).append(float(yv))
  best: dict[tuple, tuple[float, float, int]] = {}
  for (g, xv, _), ys in cells.items():
    stat = common.mean_std(ys)
    cur = best.get((g, xv))
    if cur is None or (stat[0] > cur[0] if better == "max" else stat[0] < cur[0]):
      best[(g, xv)] = stat
  out: dict[str, list] = {}
  for (g, xv), (m, s, n) in best.items():
    out.setdefault(g, []).append((xv, m, s, n))
  for g in out:
    if all(_is_number(p[0]) for p in out[g]):
      out[g].sort(key=lambda p: p[0])
  return out


def _draw_xy(ax, rows, spec):
  series = xy_points(rows, x=spec["x"], y=spec["y"], group=spec.get("group"), best_over=spec.get("best_over", ()),
                     better=spec.get("better", "max"), where=spec.get("where"))
  xs_all = [p[0] for pts in series.values() for p in pts]
  if xs_all and all(_is_number(v) for v in xs_all):
    for g, pts in series.items():
      ax.errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=[p[2] for p in pts], marker="o", capsize=3,
                  label=g or None)
  else:  # categorical x: grouped bars
    cats = list(dict.fromkeys(str(v) for v in xs_all))
    width = 0.8 / max(len(series), 1)
    for i, (g, pts) in enumerate(series.items()):
      pos = {str(p[0]): p for p in pts}
      idx = [j for j, c in enumerate(cats) if c in pos]
      ax.bar([j + i * width for j in idx], [pos[cats[j]][1] for j in idx], width,
             yerr=[pos[cats[j]][2] for j in idx], capsize=3, label=g or None)
    ax.set_xticks([j + width * (len(series) - 1) / 2 for j in range(len(cats))], cats, rotation=30, ha="right")
    if spec.get("zoom"):  # bars of close values (e.g. bits/byte): y axis around them, not from 0
      lo = min(p[1] - p[2] for pts in series.values() for p in pts)
      hi = max(p[1] + p[2] for pts in series.values() for p in pts)
      pad = 0.25 * (hi - lo) or 0.05 * abs(hi) or 1.0
      ax.set_ylim(lo - pad, hi + pad)
  ax.set_xlabel(spec.get("xlabel", spec["x"] if isinstance(spec["x"], str) else ""))
  ax.set_ylabel(spec.get("ylabel", spec["y"] if isinstance(spec["y"], str) else ""))
  return bool(series)


def _draw_curves(ax, rows, spec):
  y, x = spec.get("y", "train_loss"), spec.get("x", "step")
  drawn = False
  for r in _select(rows, spec.get("where")):
    pts = [(m[x], m[y]) for m in r.get("_metrics", []) if _is_number(m.get(y)) and x in m]
    if pts:
      ax.plot(*zip(*pts), marker="." if len(pts) < 30 else None, label=_label(r, spec.get("group")))
      drawn = True
  ax.set_xlabel(spec.get("xlabel", x))
  ax.set_ylabel(spec.get("ylabel", y))
  return drawn


def _draw_series(ax, rows, spec):
  y, source = spec["y"], spec.get("source", "position_loss.json")
  drawn = False
  for r in _select(rows, spec.get("where")):
    try:
      with open(os.path.join(r["_workdir"], source)) as f:
        data = json.load(f)
    except (OSError, ValueError):
      continue
    ys = data.get(y) if isinstance(data, dict) else None
    if ys:
      xs = data.get(spec.get("x", "position")) or list(range(1, len(ys) + 1))
      ax.plot(xs, ys, label=_label(r, spec.get("group")))
      drawn = True
  ax.set_xlabel(spec.get("xlabel", spec.get("x", "position")))
  ax.set_ylabel(spec.get("ylabel", y))
  return drawn


def default_plots(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
  """One bar chart of the main metric (accuracy, else eval_loss) per point."""
  metric = "accuracy" if any(_is_number(r.get("accuracy")) for r in rows) else "eval_loss"
  return [{"kind": "xy", "x": "name", "y": metric, "file": f"{metric}.png"}]


def draw(specs: Sequence[dict[str, Any]] | None, rows: Sequence[dict[str, Any]], workdir: str) -> list[str]:
  """Draws each spec to workdir/spec['file']; returns the files written (specs with no data are skipped)."""
  written = []
  for spec in specs if specs is not None else default_plots(rows):
    kind = spec.get("kind", "xy")
    if kind not in KINDS:
      raise ValueError(f"unknown plot kind {kind!r}; valid kinds: {', '.join(KINDS)}")
    if "file" not in spec or not spec["file"].endswith(".png"):
      raise ValueError(f"plot spec needs a 'file' ending in .png, got {spec}")
    fig, ax = plt.subplots(figsize=spec.get("figsize", (6, 4)))
    drawn = {"xy": _draw_xy, "curves": _draw_curves, "series": _draw_series}[kind](ax, rows, spec)
    if drawn:
      if spec.get("logx"):
        ax.set_xscale("log", base=2 if spec.get("logx") == 2 else 10)
      if spec.get("logy"):
        ax.set_yscale("log")
      ax.set_title(spec.get("title", ""))
      ax.grid(alpha=0.3)
      if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
      fig.tight_layout()
      fig.savefig(os.path.join(workdir, spec["file"]), dpi=110)
      written.append(spec["file"])
    plt.close(fig)
  return written
