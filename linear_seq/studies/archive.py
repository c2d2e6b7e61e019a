"""A sweep's finished points kept as small files that can be committed (`sweep --archive=DIR`).

A sweep's sub-workdirs (checkpoints, TensorBoard logs) stay out of git and are lost with the machine that ran
them; a study that takes several sittings must not lose its finished points with them. So each finished point
is also written as one JSON file, DIR/<point name>.json, holding the sub-workdir's small result files:
every top-level *.json (eval.json, config.json, sweep_point.json, the extra commands' outputs such as
position_loss.json or eval_validation_T512.json) and metrics.jsonl, at most MAX_FILE_BYTES each.

When a sweep starts (and for each follow-up round), a point whose sub-workdir has no final eval.json but whose
record is in DIR is restored into its sub-workdir from the record (no checkpoints: it can be reported and
plotted, not resumed or evaluated again), so it is skipped and its row is the same as if it had run there. A
record is used only if its config.json agrees with the point's resolved config on every field both hold: a
record made under another base config or other global --config flags is refused with a warning and the point
runs again, and its result is not archived over the record. Records are written atomically (tmp file + rename)
when a point finishes.
"""
import json
import os
from typing import Any, Callable, Sequence

from linear_seq import config_lib

VERSION = 1
METRICS_FILE = "metrics.jsonl"
MAX_FILE_BYTES = 2 << 20   # a larger file (none of the trainer's or studies' outputs today) is left out


def record_path(archive_dir: str, name: str) -> str:
  return os.path.join(archive_dir, f"{name}.json")


def _files(workdir: str) -> list[str]:
  try:
    names = sorted(os.listdir(workdir))
  except OSError:
    return []
  return [n for n in names if (n.endswith(".json") or n == METRICS_FILE) and not n.endswith(".tmp")
          and os.path.isfile(os.path.join(workdir, n))]


def make_record(workdir: str, name: str, overrides: dict[str, Any]) -> dict[str, Any]:
  """The record of a finished sub-workdir: {'version', 'name', 'overrides', 'files': {file: parsed content}}
  (metrics.jsonl as a list of its lines' dicts)."""
  files: dict[str, Any] = {}
  for fname in _files(workdir):
    path = os.path.join(workdir, fname)
    if os.path.getsize(path) > MAX_FILE_BYTES:
      continue
    with open(path) as f:
      if fname == METRICS_FILE:
        lines = []
        for line in f:
          try:
            lines.append(json.loads(line))
          except ValueError:
            pass   # a line cut off by a kill, as collect.read_metrics skips it
        files[fname] = lines
      else:
        try:
          files[fname] = json.load(f)
        except ValueError:
          pass
  return {"version": VERSION, "name": name, "overrides": overrides, "files": files}


def _write_json(path: str, obj: Any, **kw) -> None:
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  tmp = path + ".tmp"
  with open(tmp, "w") as f:
    json.dump(obj, f, **kw)
    f.write("\n")
  os.replace(tmp, path)


def write_record(archive_dir: str, record: dict[str, Any]) -> str:
  """Writes (or replaces) DIR/<record's name>.json, atomically; returns its path."""
  path = record_path(archive_dir, record["name"])
  _write_json(path, record, separators=(",", ":"), sort_keys=True)
  return path


def save(archive_dir: str, workdir: str, name: str, overrides: dict[str, Any]) -> str:
  """Writes (or replaces) DIR/<name>.json from the sub-workdir; returns its path."""
  return write_record(archive_dir, make_record(workdir, name, overrides))


def save_point(archive_dir: str, point: Any, log: Callable[[str], None] = print) -> bool:
  """Archives a finished sweep point (.workdir, .name, .overrides, .flat_config) unless DIR already holds a record
  of it made with another config: that one is kept (a sweep run with other global --config flags must not
  replace a study's committed points) and a warning is logged. Returns whether it was written."""
  old = load(archive_dir, point.name)
  diff = config_mismatch(old, point.flat_config) if old is not None else []
  if diff:
    log(f"[archive] not archiving {point.name}: {record_path(archive_dir, point.name)} holds it with another "
        f"config ({'; '.join(diff[:3])})")
    return False
  save(archive_dir, point.workdir, point.name, point.overrides)
  return True


def load(archive_dir: str, name: str) -> dict[str, Any] | None:
  """The record of point `name`, or None if there is none. A record that does not parse raises ValueError
  naming the file (a damaged archive is reported, not silently rerun over)."""
  path = record_path(archive_dir, name)
  if not os.path.exists(path):
    return None
  try:
    with open(path) as f:
      record = json.load(f)
  except ValueError as e:
    raise ValueError(f"archived point {path} does not parse ({e}); fix or delete it") from None
  if not isinstance(record, dict) or record.get("version") != VERSION or not isinstance(record.get("files"), dict):
    raise ValueError(f"archived point {path} is not a version-{VERSION} record (keys 'version', 'files')")
  return record


def final_step(record: dict[str, Any]) -> int:
  ev = record["files"].get("eval.json") or {}
  try:
    return int(ev.get("step", -1))
  except (TypeError, ValueError):
    return -1


def config_mismatch(record: dict[str, Any], flat_config: dict[str, Any]) -> list[str]:
  """'key: archived vs wanted' for every field the record's config.json and the point's resolved config
  both hold with different values."""
  saved = config_lib.flatten(record["files"].get(config_lib.CONFIG_FILE) or {})
  out = []
  for k in sorted(set(saved) & set(flat_config)):
    a, b = saved[k], flat_config[k]
    if isinstance(a, list):
      a = tuple(a)
    if isinstance(b, list):
      b = tuple(b)
    if a != b:
      out.append(f"{k}: {a!r} vs {b!r}")
  return out


def usable(record: dict[str, Any] | None, num_steps: int, outputs: Sequence[str],
           flat_config: dict[str, Any]) -> tuple[bool, str]:
  """(whether the record stands for the finished point, why not)."""
  if record is None:
    return False, "no record"
  if final_step(record) < num_steps:
    return False, f"its eval.json is at step {final_step(record)}, not {num_steps}"
  missing = [o for o in outputs if o not in record["files"]]
  if missing:
    return False, f"it lacks {', '.join(missing)}"
  diff = config_mismatch(record, flat_config)
  if diff:
    return False, "its config differs: " + "; ".join(diff[:3]) + (f" (+{len(diff) - 3} more)" if len(diff) > 3 else "")
  return True, ""


def restore(record: dict[str, Any], workdir: str) -> None:
  """Writes the record's files into the sub-workdir (eval.json last, so a partial restore is not 'finished')."""
  os.makedirs(workdir, exist_ok=True)
  files = record["files"]
  for fname in sorted(files, key=lambda n: n == "eval.json"):
    path = os.path.join(workdir, fname)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
      if fname == METRICS_FILE:
        for line in files[fname]:
          f.write(json.dumps(line) + "\n")
      else:
        json.dump(files[fname], f, indent=1)
    os.replace(tmp, path)


def sync(points: Sequence[Any], archive_dir: str, is_finished: Callable[[Any], bool],
         log: Callable[[str], None] = print) -> tuple[int, int]:
  """Before a round runs: restores each unfinished point that DIR holds a usable record of, and archives each
  finished point that DIR has no record of (e.g. run before --archive was given). Returns (restored, saved)."""
  restored = saved = 0
  for p in points:
    if is_finished(p):
      if not os.path.exists(record_path(archive_dir, p.name)):
        saved += save_point(archive_dir, p, log)
      continue
    record = load(archive_dir, p.name)
    if record is None:
      continue
    ok, why = usable(record, p.num_steps, p.outputs, p.flat_config)
    if not ok:
      log(f"[archive] not using {record_path(archive_dir, p.name)}: {why}; the point runs")
      continue
    restore(record, p.workdir)
    restored += 1
  if restored or saved:
    log(f"[archive] restored from {archive_dir}: {restored} points; archived there: {saved}")
  return restored, saved


def restore_all(archive_dir: str, workdir: str, log: Callable[[str], None] = print) -> int:
  """Restores every record in DIR into WORKDIR/<name> whose sub-workdir has no eval.json at the record's step
  (for tools that read a study's sub-workdirs, e.g. --plots_only or a study's table script, on a machine that did
  not run them). No config check here: the records are taken as the study wrote them. Returns how many."""
  if not os.path.isdir(archive_dir):
    raise FileNotFoundError(f"no archive folder {archive_dir!r}")
  n = 0
  for fname in sorted(os.listdir(archive_dir)):
    if not fname.endswith(".json"):
      continue
    record = load(archive_dir, fname[:-len(".json")])
    sub = os.path.join(workdir, record["name"])
    try:
      with open(os.path.join(sub, "eval.json")) as f:
        have = int(json.load(f).get("step", -1))
    except (OSError, ValueError, TypeError):
      have = -1
    if have < final_step(record):
      restore(record, sub)
      n += 1
  if n:
    log(f"[archive] restored from {archive_dir} into {workdir}: {n} points")
  return n
