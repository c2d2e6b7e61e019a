"""The study plots (matplotlib, Agg backend), drawn from collect.py's result rows, each saved as PNG and PDF.

A config's `get_plots()` returns a list of specs (dicts); `draw` writes each to DIR/<file> and DIR/<file>.pdf:
  {"kind": "xy", "x": "model.d_model", "y": "accuracy", "group": "model.mixer", "file": "acc_vs_width.png",
   "best_over": ["train.learning_rate"], "where": {"data.seq_len": 64}, "logx": True, "better": "max"}
      y vs x, one colour per group (one series without a group): every seed as a point, their mean as the
      line; `best_over` keeps, for each (group, x), the best setting of those keys (e.g. the best learning
      rate; `better` max or min); a non-numeric x draws a dot plot (seeds as points, the mean as a tick; the
      y axis spans the values, no bar hiding differences behind a zero baseline).
  {"kind": "curves", "y": "eval_loss", "group": "model.mixer", "file": "curves.png", "x": "step"}
      learning curves from each point's metrics.jsonl (train_loss or eval_* lines), one line per point.
  {"kind": "series", "y": "position_loss", "group": "model.mixer", "file": "loss_vs_position.png",
   "source": "position_loss.json", "xlabel": "position"}
      a per-point list stored in SUB/<source> under key y (e.g. loss per position), one line per point.
x, y and group may also be functions of a row (e.g. an arm label); `where` values may be predicates; `select`, a
function of the whole list of rows returning the rows to draw, chooses across rows (e.g. each arm's pilot lr).
Common keys: title (its `{key}` placeholders, e.g. "trained at T={data.seq_len}", filled from the drawn rows:
the value they share, or their values joined by '/', so a title says what the points ran), subtitle (default:
the setup read from the rows: task, length, steps, seeds, the best-over keys), xlabel, ylabel (default: LABELS, words with units), logx, logy, where, figsize, groups (every
group label of the study in order: a group's colour is its place there, so an arm keeps its colour in a plot
that draws a subset; otherwise groups take colours in the order they appear). Accuracy
axes stay inside [0, 1]; legends sit outside the axes. Without specs, one dot plot of the main metric.
"""
import json
import math
import os
import re
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top,wrong-import-position
import matplotlib.ticker  # pylint: disable=g-import-not-at-top,wrong-import-position

from linear_seq.studies import collect  # pylint: disable=wrong-import-position
from linear_seq.studies import common  # pylint: disable=wrong-import-position

KINDS = ("xy", "curves", "series")
FORMATS = ("png", "pdf")

# Axis labels in words with units for the columns and config keys the studies plot.
LABELS = {
    "accuracy": "validation accuracy (fraction of answers)",
    "bits_per_byte": "validation bits/byte",
    "eval_loss": "validation loss (nats/token)",
    "train_loss": "training loss (nats/token)",
    "final_train_loss": "final training loss (nats/token)",
    "perplexity": "validation perplexity",
    "position_loss": "validation loss (nats/token)",
    "position": "position in the context (tokens)",
    "step": "training step",
    "state_size": "recurrent state (floats/sequence)",
    "num_params": "parameters",
    "tokens_per_sec": "training throughput (tokens/s)",
    "wall_time": "wall time (s)",
    "model.d_model": "model width d_model",
    "model.mixer": "mixer",
    "model.feature_map": "feature map",
    "model.gamma": "retention decay γ",
    "model.gate_temperature": "gate temperature τ",
    "train.learning_rate": "peak learning rate",
    "data.seq_len": "training length T (tokens)",
}
# The natural range of a metric: its axis does not run past it.
RANGES = {"accuracy": (0.0, 1.0)}
_COLORS = plt.rcParams["axes.prop_cycle"].by_key()["color"]


def label(key, fallback: str = "") -> str:
  """The axis label of a column / config key: LABELS, else the key itself ('' for a function)."""
  return LABELS.get(key, key) if isinstance(key, str) else fallback


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


def xy_values(rows: Sequence[dict[str, Any]], *, x, y, group=None, best_over: Sequence[str] = (),
              better: str = "max", where=None) -> dict[str, list[tuple[Any, list[float]]]]:
  """{group label: [(x, [y of each seed]), ...]} for the best setting of `best_over` (by the seeds' mean)."""
  if better not in ("max", "min"):
    raise ValueError(f"plot 'better' must be 'max' or 'min', got {better!r}")
  cells: dict[tuple, list[float]] = {}
  for r in _select(rows, where):
    yv = _get(r, y)
    if not _is_number(yv):
      continue
    setting = tuple(repr(collect.value(r, k)) for k in best_over)
    name = "" if group is None else _label(r, group)  # no group: one series, seeds averaged per x
    cells.setdefault((name, _get(r, x), setting), []).append(float(yv))
  best: dict[tuple, list[float]] = {}
  for (g, xv, _), ys in cells.items():
    cur = best.get((g, xv))
    mean = common.mean_std(ys)[0]
    if cur is None or (mean > common.mean_std(cur)[0] if better == "max" else mean < common.mean_std(cur)[0]):
      best[(g, xv)] = ys
  out: dict[str, list] = {}
  for (g, xv), ys in best.items():
    out.setdefault(g, []).append((xv, ys))
  for g in out:
    if all(_is_number(p[0]) for p in out[g]):
      out[g].sort(key=lambda p: p[0])
  return out


def xy_points(rows: Sequence[dict[str, Any]], **kwargs) -> dict[str, list[tuple[Any, float, float, int]]]:
  """{group label: [(x, mean y, std y, n seeds), ...]}: xy_values summarized."""
  return {g: [(xv, *common.mean_std(ys)) for xv, ys in pts] for g, pts in xy_values(rows, **kwargs).items()}


def _draw_xy(ax, rows, spec):
  series = xy_values(rows, x=spec["x"], y=spec["y"], group=spec.get("group"), best_over=spec.get("best_over", ()),
                     better=spec.get("better", "max"), where=spec.get("where"))
  xs_all = [p[0] for pts in series.values() for p in pts]
  numeric = bool(xs_all) and all(_is_number(v) for v in xs_all)
  cats = list(dict.fromkeys(str(v) for v in xs_all))
  for i, (g, pts) in enumerate(series.items()):
    color = _color(spec, g, i)
    if numeric:
      xs = [p[0] for p in pts]
    else:  # dot plot: categories side by side, the groups a little apart
      offset = (i - (len(series) - 1) / 2) * min(0.6 / max(len(series), 1), 0.2)
      xs = [cats.index(str(p[0])) + offset for p in pts]
    seeds = max(len(ys) for _, ys in pts) > 1
    if seeds:  # every seed a dot (one seed: the mean's marker is its dot)
      seed_x = [_jitter(xv, i, len(series), spec, xs_all) if numeric else xv
                for xv, (_, ys) in zip(xs, pts) for _ in ys]
      seed_y = [v for _, ys in pts for v in ys]
      ax.scatter(seed_x, seed_y, s=16, color=color, alpha=0.45, linewidths=0, zorder=3)
    means = [common.mean_std(ys)[0] for _, ys in pts]
    if numeric:
      ax.plot(xs, means, marker="o", markersize=4, color=color, label=g or None, zorder=4)
    else:  # the mean as a tick across the seeds' dots, or the one seed as a dot
      ax.plot(xs, means, linestyle="none", marker="_" if seeds else "o", markersize=16 if seeds else 6,
              markeredgewidth=2 if seeds else 1, color=color, label=g or None, zorder=4)
  if not numeric and cats:
    ax.set_xticks(range(len(cats)), cats, rotation=30 if max(map(len, cats)) > 6 else 0,
                  ha="right" if max(map(len, cats)) > 6 else "center")
    ax.set_xlim(-0.5, len(cats) - 0.5)
  ax.set_xlabel(spec.get("xlabel", label(spec["x"])))
  ax.set_ylabel(spec.get("ylabel", label(spec["y"])))
  return bool(series)


def _jitter(x: float, i: int, n: int, spec: dict[str, Any], xs_all: Sequence[float]) -> float:
  """Group i of n's seed points moved a little sideways (a fraction of an octave on a log axis, of the x range
  otherwise), so that the groups' seeds at one x do not hide each other."""
  step = i - (n - 1) / 2
  if len(set(xs_all)) < 2:  # one x: nothing to scale the shift by
    return x
  if spec.get("logx"):
    return x * 2.0 ** (0.025 * step)
  span = (max(xs_all) - min(xs_all)) or 1.0
  return x + 0.006 * span * step


def _plain_log_ticks(axis) -> None:
  """Log-axis ticks as plain numbers (32, 64, 0.001), not powers."""
  axis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
  axis.set_minor_formatter(matplotlib.ticker.NullFormatter())


def _color(spec: dict[str, Any], group: str, i: int) -> str:
  """Group `group`'s colour: its place in spec['groups'] when listed there, else i (its place in this plot)."""
  order = [str(g) for g in spec.get("groups", ())]
  return _COLORS[(order.index(group) if group in order else i) % len(_COLORS)]


def _lines_by_group(ax, lines: list[tuple[str, list, list]], spec: dict[str, Any]) -> None:
  """One colour per group; with several points (seeds) in a group, each is a thin line and, where they share
  their x values, the mean is the thick one."""
  groups: dict[str, list] = {}
  for g, xs, ys in lines:
    groups.setdefault(g, []).append((xs, ys))
  for i, (g, members) in enumerate(groups.items()):
    color = _color(spec, g, i)
    if len(members) == 1:
      ax.plot(*members[0], color=color, marker="." if len(members[0][0]) < 30 else None, label=g)
      continue
    for xs, ys in members:
      ax.plot(xs, ys, color=color, alpha=0.35, linewidth=0.8)
    if all(list(xs) == list(members[0][0]) for xs, _ in members):
      mean = [sum(v) / len(v) for v in zip(*(ys for _, ys in members))]
      ax.plot(members[0][0], mean, color=color, linewidth=1.8, label=f"{g} (mean of {len(members)})")
    else:
      ax.plot([], [], color=color, label=g)


def _draw_curves(ax, rows, spec):
  y, x = spec.get("y", "train_loss"), spec.get("x", "step")
  lines = []
  for r in _select(rows, spec.get("where")):
    pts = [(m[x], m[y]) for m in r.get("_metrics", []) if _is_number(m.get(y)) and x in m]
    if pts:
      lines.append((_label(r, spec.get("group")), *map(list, zip(*pts))))
  _lines_by_group(ax, lines, spec)
  ax.set_xlabel(spec.get("xlabel", label(x)))
  ax.set_ylabel(spec.get("ylabel", label(y)))
  return bool(lines)


def _draw_series(ax, rows, spec):
  y, source = spec["y"], spec.get("source", "position_loss.json")
  lines = []
  for r in _select(rows, spec.get("where")):
    data = r.get("_series", {}).get(source)  # a row rebuilt from results.csv + curves.json
    if data is None:
      if not r.get("_workdir"):
        continue
      try:
        with open(os.path.join(r["_workdir"], source)) as f:
          data = json.load(f)
      except (OSError, ValueError):
        continue
    ys = data.get(y) if isinstance(data, dict) else None
    if ys:
      xs = data.get(spec.get("x", "position")) or list(range(1, len(ys) + 1))
      lines.append((_label(r, spec.get("group")), xs, ys))
  _lines_by_group(ax, lines, spec)
  ax.set_xlabel(spec.get("xlabel", label(spec.get("x", "position"))))
  ax.set_ylabel(spec.get("ylabel", label(y)))
  return bool(lines)


def setup_line(rows: Sequence[dict[str, Any]], spec: dict[str, Any]) -> str:
  """The subtitle: the task and its length, training steps, seeds (points) and mean (line), best-over keys."""
  sel = _select(rows, spec.get("where"))
  if not sel:
    return ""
  parts = []
  datasets = sorted({str(r["dataset"]) for r in sel if r.get("dataset")})
  lengths = sorted({int(r["eval_seq_len"]) for r in sel if _is_number(r.get("eval_seq_len"))})
  if datasets:
    parts.append(", ".join(datasets) + (f" T={'/'.join(map(str, lengths))}" if lengths else ""))
  steps = sorted({int(r["step"]) for r in sel if _is_number(r.get("step"))})
  if steps:
    parts.append(f"{'/'.join(f'{s:,}' for s in steps)} training steps")
  seeds = sorted({repr(collect.value(r, "seed")) for r in sel if collect.value(r, "seed") is not None})
  if spec.get("kind", "xy") == "xy":
    counts = [len(ys) for pts in xy_values(rows, x=spec["x"], y=spec["y"], group=spec.get("group"),
                                           best_over=spec.get("best_over", ()), better=spec.get("better", "max"),
                                           where=spec.get("where")).values() for _, ys in pts]
    lo, hi = (min(counts), max(counts)) if counts else (1, 1)
    n = f"{lo}" if lo == hi else f"{lo}-{hi}"
    parts.append(f"{n} seeds per point: seeds as dots, mean as {'line' if _numeric_x(sel, spec) else 'tick'}"
                 if hi > 1 else "1 seed")
  elif len(seeds) > 1:
    parts.append(f"{len(seeds)} seeds")
  if spec.get("best_over"):
    parts.append("best " + ", ".join(label(k) for k in spec["best_over"]) + " per point")
  return " · ".join(parts)


def _numeric_x(rows, spec) -> bool:
  return all(_is_number(_get(r, spec["x"])) for r in rows)


def _clamp_to_range(ax, y) -> None:
  """An axis of a bounded metric (accuracy) does not run past its range (a little margin for the points)."""
  if not isinstance(y, str) or y not in RANGES:
    return
  lo, hi = RANGES[y]
  pad = 0.03 * (hi - lo)
  cur_lo, cur_hi = ax.get_ylim()
  ax.set_ylim(max(cur_lo, lo - pad), min(cur_hi, hi + pad))


def legend_outside(ax, title: str = "") -> None:
  """The legend to the right of the axes, outside the data (nothing if no line is labelled)."""
  if ax.get_legend_handles_labels()[0]:
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, frameon=False,
              title=title or None, title_fontsize=8)


def save(fig, workdir: str, png: str) -> list[str]:
  """Writes `png` and its PDF twin (vector) into workdir, with no timestamps (the same plot gives the same
  file); returns both names."""
  base = os.path.splitext(png)[0]
  fig.savefig(os.path.join(workdir, base + ".png"), dpi=150, bbox_inches="tight", metadata={"Software": None})
  fig.savefig(os.path.join(workdir, base + ".pdf"), bbox_inches="tight",
              metadata={"CreationDate": None, "ModDate": None, "Producer": None, "Creator": None})
  return [base + "." + ext for ext in FORMATS]


def fill_title(title: str, rows: Sequence[dict[str, Any]]) -> str:
  """`title` with each `{key}` (or `{key:format}`, e.g. `{train.num_steps:,}`) replaced by the rows' value of that
  column or config key (collect.value; several values joined by '/', in order of appearance; '?' for none)."""
  def values(match) -> str:
    seen = [v for v in dict.fromkeys(collect.value(r, match.group(1)) for r in rows) if v is not None]
    return "/".join(format(v, match.group(2) or "") for v in seen) or "?"
  return re.sub(r"\{([\w.@]+)(?::([^{}]*))?\}", values, title)


def titles(fig, ax, title: str, subtitle: str) -> None:
  """The title above the axes and the setup in a smaller grey line under it."""
  if subtitle:
    ax.set_title(subtitle, fontsize=8, color="0.35", loc="left")
  if title:
    fig.suptitle(title, fontsize=11, x=ax.get_position().x0, ha="left")


def default_plots(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
  """One dot plot of the main metric (accuracy, else eval_loss) per point."""
  metric = "accuracy" if any(_is_number(r.get("accuracy")) for r in rows) else "eval_loss"
  return [{"kind": "xy", "x": "name", "y": metric, "file": f"{metric}.png", "xlabel": "sweep point"}]


def draw(specs: Sequence[dict[str, Any]] | None, rows: Sequence[dict[str, Any]], workdir: str) -> list[str]:
  """Draws each spec to workdir/spec['file'] (+ its .pdf; workdir is made if need be); returns the files written,
  PNG then PDF (specs with no data are skipped)."""
  written = []
  os.makedirs(workdir, exist_ok=True)
  for spec in specs if specs is not None else default_plots(rows):
    kind = spec.get("kind", "xy")
    if kind not in KINDS:
      raise ValueError(f"unknown plot kind {kind!r}; valid kinds: {', '.join(KINDS)}")
    if "file" not in spec or not spec["file"].endswith(".png"):
      raise ValueError(f"plot spec needs a 'file' ending in .png (a .pdf is written beside it), got {spec}")
    kept = list(spec["select"](rows)) if spec.get("select") else rows
    fig, ax = plt.subplots(figsize=spec.get("figsize", (6.4, 4)))
    drawn = {"xy": _draw_xy, "curves": _draw_curves, "series": _draw_series}[kind](ax, kept, spec)
    if drawn:
      if spec.get("logx"):
        ax.set_xscale("log", base=2 if spec.get("logx") == 2 else 10)
        _plain_log_ticks(ax.xaxis)
      if spec.get("logy"):
        ax.set_yscale("log")
      _clamp_to_range(ax, spec.get("y"))
      ax.grid(alpha=0.3)
      group = spec.get("group")
      legend_outside(ax, label(group) if isinstance(group, str) else "")
      titles(fig, ax, fill_title(spec.get("title", ""), kept), spec.get("subtitle", setup_line(kept, spec)))
      written += save(fig, workdir, spec["file"])
    plt.close(fig)
  return written
