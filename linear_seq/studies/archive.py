"""A sweep's finished points kept as small files that can be committed (`sweep --archive=DIR`).

A sweep's sub-workdirs (checkpoints, TensorBoard logs) stay out of git and are lost with the machine that ran
them; a study that takes several sittings must not lose its finished points with them. So each finished point
is also written as one JSON file, DIR/<point name>.json, holding the sub-workdir's small result files:
every top-level *.json (eval.json, config.json, sweep_point.json, the extra commands' outputs such as
position_loss.json or eval_validation_T512.json; not the trainer's checkpointed.json, which would claim
checkpoints the record does not have) and metrics.jsonl, at most MAX_FILE_BYTES each.

When a sweep starts (and for each follow-up round), a point whose sub-workdir has no final eval.json but whose
record is in DIR is restored into its sub-workdir from the record (no checkpoints: it can be reported and
plotted, not resumed or evaluated again), so it is skipped and its row is the same as if it had run there. A
record is used only if it has a config.json that agrees with the point's resolved config on every field both
hold (except IGNORED ones, which do not change results): a record made under another base config or other
global --config flags is refused with a warning and the point runs again, and its result is not archived over
the record; a point that finished under a config other than the point's is not archived either. A field the
record lacks (added to the config after it was made) is not compared. Records are written atomically (a
temporary file of the writer's own + rename) when a point finishes.

A restored point has no checkpoints: if its record later stops being usable (more steps, a new extra output),
the trainer refuses its sub-workdir (progress without a checkpoint) and sync says to delete the sub-workdir.
"""
import json
import os
import tempfile
from typing import Any, Callable, Sequence

from linear_seq import config_lib
from linear_seq.studies import collect

VERSION = 1
METRICS_FILE = "metrics.jsonl"
MAX_FILE_BYTES = 2 << 20   # a larger file (none of the trainer's or studies' outputs today) is left out
SKIPPED_FILES = ("checkpointed.json",)
# Fields that do not change a point's results (checkpointing, profiling, debug checks, where the data is, plug-in
# imports, the device mesh): a record made with other values of them is still the point's. Prefixes end in '.'.
IGNORED = ("train.keep_checkpoints", "train.checkpoint_every", "train.profile_steps", "train.debug_checks",
           "data.data_dir", "imports", "mesh.")


def record_path(archive_dir: str, name: str) -> str:
  return os.path.join(archive_dir, f"{name}.json")


def _files(workdir: str) -> list[str]:
  try:
    names = sorted(os.listdir(workdir))
  except OSError:
    return []
  return [n for n in names if (n.endswith(".json") or n == METRICS_FILE) and n not in SKIPPED_FILES
          and os.path.isfile(os.path.join(workdir, n))]


def make_record(workdir: str, name: str, overrides: dict[str, Any]) -> dict[str, Any]:
  """The record of a finished sub-workdir: {'version', 'name', 'overrides', 'files': {file: parsed content}}
  (metrics.jsonl as a list of its lines' dicts)."""
  files: dict[str, Any] = {}
  for fname in _files(workdir):
    path = os.path.join(workdir, fname)
    if os.path.getsize(path) > MAX_FILE_BYTES:
      continue
    if fname == METRICS_FILE:
      files[fname] = collect.read_metrics(workdir)   # a line cut off by a kill is skipped
    elif (content := collect.read_json(path)) is not None:
      files[fname] = content
  return {"version": VERSION, "name": name, "overrides": overrides, "files": files}


def _replace(path: str, write: Callable[[Any], None]) -> None:
  """Writes `path` atomically through a temporary file of this writer's own (two sweeps saving the same point
  do not share one) and a rename."""
  directory = os.path.dirname(path) or "."
  os.makedirs(directory, exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".part")
  try:
    with os.fdopen(fd, "w") as f:
      write(f)
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.remove(tmp)
    raise


def _write_json(path: str, obj: Any, **kw) -> None:
  def write(f):
    json.dump(obj, f, **kw)
    f.write("\n")
  _replace(path, write)


def write_record(archive_dir: str, record: dict[str, Any]) -> str:
  """Writes (or replaces) DIR/<record's name>.json, atomically; returns its path."""
  path = record_path(archive_dir, record["name"])
  _write_json(path, record, separators=(",", ":"), sort_keys=True)
  return path


def save(archive_dir: str, workdir: str, name: str, overrides: dict[str, Any]) -> str:
  """Writes (or replaces) DIR/<name>.json from the sub-workdir; returns its path."""
  return write_record(archive_dir, make_record(workdir, name, overrides))


def save_point(archive_dir: str, point: Any, log: Callable[[str], None] = print) -> bool:
  """Archives a finished sweep point (.workdir, .name, .overrides, .flat_config) unless it finished under another
  config than the point's, or DIR already holds a record of it made with another config: that one is kept (a
  sweep run with other global --config flags must not replace a study's committed points). Either refusal is
  logged. Returns whether it was written."""
  record = make_record(point.workdir, point.name, point.overrides)
  ran = config_mismatch(record, point.flat_config)
  if ran or config_lib.CONFIG_FILE not in record["files"]:
    log(f"[archive] not archiving {point.name}: it finished under another config than the point's "
        f"({'; '.join(ran[:3]) or 'no config.json'})")
    return False
  old = load(archive_dir, point.name)
  diff = config_mismatch(old, point.flat_config) if old is not None else []
  if diff:
    log(f"[archive] not archiving {point.name}: {record_path(archive_dir, point.name)} holds it with another "
        f"config ({'; '.join(diff[:3])})")
    return False
  write_record(archive_dir, record)
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


def _plain(value: Any) -> Any:
  """Lists as tuples, at every depth (JSON gives lists back where the config held tuples)."""
  if isinstance(value, (list, tuple)):
    return tuple(_plain(v) for v in value)
  if isinstance(value, dict):
    return {k: _plain(v) for k, v in value.items()}
  return value


def _ignored(key: str) -> bool:
  return any(key.startswith(i) if i.endswith(".") else key == i for i in IGNORED)


def config_mismatch(record: dict[str, Any], flat_config: dict[str, Any]) -> list[str]:
  """'key: archived vs wanted' for every field the record's config.json and the point's resolved config
  both hold with different values (IGNORED fields aside)."""
  saved = config_lib.flatten(record["files"].get(config_lib.CONFIG_FILE) or {})
  out = []
  for k in sorted(set(saved) & set(flat_config)):
    a, b = _plain(saved[k]), _plain(flat_config[k])
    if a != b and not _ignored(k):
      out.append(f"{k}: {a!r} vs {b!r}")
  return out


def usable(record: dict[str, Any] | None, num_steps: int, outputs: Sequence[str],
           flat_config: dict[str, Any]) -> tuple[bool, str]:
  """(whether the record stands for the finished point, why not)."""
  if record is None:
    return False, "no record"
  if config_lib.CONFIG_FILE not in record["files"]:
    return False, f"it has no {config_lib.CONFIG_FILE}"
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
    content = files[fname]
    if fname == METRICS_FILE:
      write = lambda f, lines=content: f.writelines(json.dumps(line) + "\n" for line in lines)
    else:
      write = lambda f, obj=content: json.dump(obj, f, indent=1)
    _replace(os.path.join(workdir, fname), write)


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
      restored_here = (os.path.exists(os.path.join(p.workdir, "eval.json"))
                       and not os.path.isdir(os.path.join(p.workdir, "checkpoints")))
      log(f"[archive] not using {record_path(archive_dir, p.name)}: {why}; the point runs"
          + (f" (its sub-workdir {p.workdir} has results but no checkpoints, as a restored point has: delete it "
             "first, or the trainer refuses it)" if restored_here else ""))
      continue
    restore(record, p.workdir)
    restored += 1
  if restored or saved:
    log(f"[archive] restored from {archive_dir}: {restored} points; archived there: {saved}")
  return restored, saved


def restore_all(archive_dir: str, workdir: str, log: Callable[[str], None] = print) -> int:
  """Restores every record in DIR into WORKDIR/<name> where that sub-workdir does not exist yet (for tools that
  read a study's sub-workdirs, e.g. --plots_only or a study's table script, on a machine that did not run them;
  an existing sub-workdir, finished, partly trained or running, is never written to). No config check here:
  the records are taken as the study wrote them. Returns how many."""
  if not os.path.isdir(archive_dir):
    raise FileNotFoundError(f"no archive folder {archive_dir!r}")
  n = 0
  for fname in sorted(os.listdir(archive_dir)):
    if not fname.endswith(".json"):
      continue
    record = load(archive_dir, fname[:-len(".json")])
    sub = os.path.join(workdir, record["name"])
    if not os.path.exists(sub):
      restore(record, sub)
      n += 1
  if n:
    log(f"[archive] restored from {archive_dir} into {workdir}: {n} points")
  return n
