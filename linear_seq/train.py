"""train_and_evaluate(config, workdir): the training loop with evaluation, checkpoints and metrics.

A workdir holds config.json, metrics.jsonl, tensorboard/ and checkpoints/<step>/. Starting in a workdir with
checkpoints resumes from the latest intact one (train state and data iterator), so N steps + restart + N steps
gives the same losses as 2N steps straight. One run at a time holds the workdir (workdir.py's lock); a workdir
with progress but no restorable checkpoint is refused unless restart=True; an evaluation interrupted after
its step's checkpoint is run on resume. A non-finite loss or gradient norm stops the run naming the step;
nothing after the last finite step is saved. An evaluation that cannot run raises validation.ConfigError.

Preemption: SIGTERM, SIGHUP or SIGINT (in the main thread) lets the current step finish, saves its checkpoint
and waits for the commit, writes a metrics line {step, stopped: SIGTERM}, releases the lock and raises
Preempted (the entry point's one line; a rerun resumes). A second signal while that checkpoint is being saved
raises SaveAborted (the save is abandoned uncommitted; the previous checkpoint stays: its background commit is
finished before the preemption save starts). The handlers only set a
flag, so no signal interrupts a library mid-call (a Ctrl-C inside tensorboardX's queue used to hang the exit).
With several processes, a signal on any of them stops all at the same step (one all-gather of a flag per step).

Fine-tuning: train.init_from=DIR starts a workdir without checkpoints from DIR's model (init_from.py: verified,
architecture checked, DIR only read; a bad DIR is a ConfigError or CheckpointError before the workdir is
created) with a fresh optimizer state at step 0; metrics.jsonl notes {step: 0, init_from: {workdir, step}}.
Once the workdir has a checkpoint, resuming from it takes precedence (init_from is then not read; logged), so
a fine-tuning run resumes exactly like any other.
"""
import contextlib
import dataclasses
import gc
import os
import signal
import threading
import time
from typing import Any, Optional

from absl import logging
from flax import nnx
import jax
from jax.experimental import multihost_utils
import ml_collections
import numpy as np

from linear_seq import checkpoint
from linear_seq import config_lib
from linear_seq import data
from linear_seq import eval_lib
from linear_seq import init_from as init_from_lib
from linear_seq import metrics as metrics_lib
from linear_seq import model as model_lib
from linear_seq import optim
from linear_seq import platform
from linear_seq import profiling
from linear_seq import sharding
from linear_seq import steps
from linear_seq import validation
from linear_seq.data import hf_tokenizer
from linear_seq.mixers import random_projection
from linear_seq import workdir as workdir_lib

# Config fields whose change makes a workdir's checkpoints unusable (the model's shapes or the data stream; other
# changes, e.g. train.num_steps or the learning rate, are fine: the optimizer state has a fixed structure; a
# changed train.num_steps is warned about and recorded in metrics.jsonl, as it recomputes the schedule).
_INCOMPATIBLE = ("model.", "seed", "data.dataset", "data.path", "data.vocab_size", "data.tokenizer",
                 "data.text_column",
                 # The data position is a batch index: with another batch size, row length, shuffle or number of
                 # synthetic examples it would point elsewhere (examples skipped or repeated).
                 "data.batch_size", "data.seq_len", "data.shuffle_seed", "data.num_train")


class Preempted(RuntimeError):
  """Training stopped on a signal after saving (and committing) the checkpoint of the step it finished."""


class SaveAborted(BaseException):  # (BaseException, as KeyboardInterrupt: no library's `except Exception` eats it)
  """A second signal arrived while the preemption checkpoint was being saved: the save was abandoned."""


class _Signals:
  """SIGTERM / SIGHUP / SIGINT handlers for one training run (installed only in the main thread; the previous
  handlers are restored on exit). The first signal sets `name`; a second one raises SaveAborted while `saving`."""

  SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)

  def __init__(self):
    self.name: Optional[str] = None
    self.saving = False
    self._previous = {}

  def __enter__(self):
    if threading.current_thread() is threading.main_thread():
      for sig in self.SIGNALS:
        self._previous[sig] = signal.signal(sig, self._handle)
    return self

  def __exit__(self, *exc):
    for sig, handler in self._previous.items():
      signal.signal(sig, handler)

  def _handle(self, signum, frame):  # pylint: disable=unused-argument
    name = signal.Signals(signum).name
    if self.name is None:
      self.name = name
      # (os.write: a signal handler must not take the logging lock the interrupted code may hold)
      os.write(2, f"{name} received: stopping after this step with a checkpoint ({name} again during that "
                  "save abandons it)\n".encode())
    elif self.saving:
      raise SaveAborted(f"{name} received again while saving the checkpoint: the save was abandoned")
    else:
      os.write(2, f"{name} received again: already stopping\n".encode())

  def requested(self) -> Optional[str]:
    """The signal's name if this process (or, with several, any process) received one."""
    if jax.process_count() == 1:
      return self.name
    if int(np.max(multihost_utils.process_allgather(np.int32(self.name is not None)))):
      return self.name or "a signal on another process"
    return None


def make_mesh(config: ml_collections.ConfigDict) -> jax.sharding.Mesh:
  """The data × seq mesh of config.mesh (1-D 'data' over every device by default), with its checks: T splits
  over seq, and S4 (whose FFT form is not sequence-local) refuses mesh.seq > 1."""
  m = config.get("mesh") or {}
  data, seq = int(m.get("data", 0)), int(m.get("seq", 1))
  try:
    mesh = sharding.make_mesh(data=data, seq=seq)
    sharding.check_seq_len(int(config.data.seq_len), mesh)
    sharding.check_seq_len(eval_lib.eval_seq_len(config), mesh, "eval.seq_len (0 = data.seq_len)")
    for length in eval_lib.eval_lengths(config):
      sharding.check_seq_len(length, mesh, "eval.lengths")
  except ValueError as e:
    raise validation.ConfigError(str(e)) from e
  if seq > 1 and "s4" in validation.layer_mixer_names(config.model):
    raise validation.ConfigError(f"mesh.seq={seq}: the s4 mixer cannot split T (its FFT convolution is not sequence-local); "
                      "use mesh.seq=1 or a linear mixer (linear, retention, gla)")
  return mesh


def _check_micro_batch(config: ml_collections.ConfigDict, mesh: jax.sharding.Mesh) -> None:
  """train.grad_accum_steps = N must split data.batch_size into N micro-batches that split over the data axis."""
  n, batch = int(config.train.get("grad_accum_steps", 1)), int(config.data.batch_size)
  if n > 1:
    if batch % n:
      raise validation.ConfigError(f"train.grad_accum_steps={n} must divide data.batch_size={batch}")
    try:
      sharding.check_batch_size(batch // n, mesh, f"data.batch_size / train.grad_accum_steps = {batch}/{n}")
    except ValueError as e:
      raise validation.ConfigError(str(e)) from e


def _check_workdir_config(config: ml_collections.ConfigDict, workdir: str) -> ml_collections.ConfigDict:
  """Refuses (ConfigError) to resume with a changed _INCOMPATIBLE field (or without config.json); warns about the
  other changed fields but train.init_from. Returns the saved config."""
  try:
    saved = config_lib.load_saved(workdir)
  except FileNotFoundError as e:  # (called only when the workdir holds checkpoints)
    raise validation.ConfigError(f"{workdir} holds checkpoints but no config.json (the config they were trained "
                                 "with): restore it, or start over with --restart") from e
  except (ValueError, OSError) as e:  # invalid JSON, unreadable
    raise validation.ConfigError(f"cannot read the config this run was trained with: {e}; restore config.json, "
                                 "or start over with --restart") from e
  changed = config_lib.diff(saved, config)
  # Fields added to the code after this run saved its config: the run had their defaults (ModelConfig's for
  # model.*, which reproduce the older behaviour), so they are changes only where the value now differs.
  saved_keys = set(config_lib.flatten(config_lib.to_dict(saved)))
  added = [k for k in changed if k not in saved_keys]
  model_defaults = {f"model.{f.name}": f.default for f in dataclasses.fields(model_lib.ModelConfig)
                    if f.default is not dataclasses.MISSING}
  changed = [k for k in changed if k in saved_keys
             or (k in model_defaults and _get(config, k) != model_defaults[k])]
  if added:
    logging.warning("%s/config.json predates the fields %s: taken at their current values", workdir,
                    ", ".join(added))
  bad = [k for k in changed if k.startswith(_INCOMPATIBLE)
         and not (k == "data.path" and workdir_lib.same_folder(workdir, saved.data.path, config.data.path))
         and not (k == "data.num_train" and data.DATASETS.get(config.data.dataset) == "text")]  # (unused there)
  if bad:
    raise validation.ConfigError(f"{workdir} holds checkpoints of a different model or data: {', '.join(bad)} changed "
                      f"(e.g. {bad[0]}: saved {_get(saved, bad[0])!r}, now {_get(config, bad[0])!r}); "
                      "use a new --workdir or the saved values")
  if "train.num_steps" in changed:
    logging.warning("train.num_steps changed from %s to %s: the learning-rate schedule (warmup, then cosine to "
                    "step train.num_steps) is recomputed from the resumed step on (recorded in metrics.jsonl)",
                    saved.train.num_steps, config.train.num_steps)
  # (train.init_from is not read on resume: dropping or changing it there changes nothing)
  others = [k for k in changed if k not in ("train.num_steps", "train.init_from")]
  if others:
    logging.warning("resuming %s with changed config fields: %s", workdir, ", ".join(others))
  return saved


def _get(config, dotted: str):
  for k in dotted.split("."):
    config = config.get(k) if hasattr(config, "get") else None
  return config


def _has_checkpoint(workdir: str) -> bool:
  """Whether workdir/checkpoints holds a committed step folder (the run will resume rather than start)."""
  directory = checkpoint.checkpoint_dir(workdir)
  return os.path.isdir(directory) and any(n.isdigit() for n in os.listdir(directory))


def resolve_tokenizer_dir(config: ml_collections.ConfigDict, workdir: str) -> ml_collections.ConfigDict:
  """config with data.tokenizer_dir filled in for data.tokenizer=hf when it is '' (the workdir's own
  hf_tokenizer.json, else train.init_from's: data/hf_tokenizer.py); other configs unchanged. For running only:
  config.json keeps the config as given."""
  return hf_tokenizer.with_resolved_dir(config, [workdir, config.train.get("init_from", "")])


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str, *, restart: bool = False) -> dict[str, Any]:
  """Trains config.train.num_steps steps (resuming from workdir's latest checkpoint, else from
  train.init_from's model when set; restart=True removes the workdir's checkpoints and metrics first); returns
  the final metrics {step, train_loss, eval_loss, (bits_per_byte | eval_accuracy), num_params, ...}. The
  config, both data splits and train.init_from are checked before the workdir is created or locked (a
  ConfigError or an init_from CheckpointError leaves nothing behind). Holds the workdir's lock throughout
  (WorkdirError at once if another run holds it)."""
  given = config
  source = config.train.get("init_from", "")
  starting = restart or not _has_checkpoint(workdir)   # (else resuming: train.init_from is not read)
  if source and starting:
    init_from_lib.check_source(source)   # (first: a missing folder is named as such, not as a missing tokenizer)
  config = resolve_tokenizer_dir(config, workdir)
  info = validation.check_config(config)
  try:
    platform.apply(config.train)   # matmul precision, the ops' tuning overrides: once, before any tracing
  except ValueError as e:
    raise validation.ConfigError(str(e)) from e
  mesh = make_mesh(config)
  try:
    sharding.check_batch_size(int(config.data.batch_size), mesh)
    sharding.check_batch_size(int(config.eval.batch_size), mesh, "eval.batch_size")
  except ValueError as e:
    raise validation.ConfigError(str(e)) from e
  _check_micro_batch(config, mesh)
  validation.check_data(config)
  setup = steps.setup(config, info.vocab_size, mesh)
  init = None
  if source and starting:  # (read before the workdir exists: nothing written)
    init = (source, *init_from_lib.restore(source, config, info.vocab_size, mesh, setup[1]))
  with contextlib.ExitStack() as stack:
    signals = stack.enter_context(_Signals())
    if jax.process_index() == 0:
      stack.enter_context(workdir_lib.lock(workdir))
    return _train_and_evaluate(config, given, workdir, info, mesh, setup, init, restart=restart, signals=signals)


def _init_state(static: steps.Static, shardings, params, rest) -> steps.State:
  """Step 0 with these params and rest (put on this run's shardings) and a fresh optimizer state."""
  params, rest = jax.device_put(params, shardings["params"]), jax.device_put(rest, shardings["rest"])
  opt_state = jax.jit(static.tx.init, out_shardings=shardings["opt_state"])(params)
  step = jax.device_put(np.zeros((), np.int32), shardings["step"])
  return {"step": step, "params": params, "rest": rest, "opt_state": opt_state}


@dataclasses.dataclass
class _Run:
  """What the steps of one training run share, set up once by _open_run (the loop's changing state is
  _Progress)."""
  config: ml_collections.ConfigDict   # the config to run (resolve_tokenizer_dir's)
  workdir: str
  info: data.DatasetInfo
  mesh: jax.sharding.Mesh
  static: steps.Static
  shardings: Any
  train_it: Any                       # the training split's iterator (its state is checkpointed)
  ckpt: checkpoint.Checkpointer
  signals: _Signals
  is_primary: bool                    # process 0: the one that writes the workdir's files
  num_steps: int
  schedule: Any                       # the learning rate per step (for the train lines)
  tokens_per_step: int


@dataclasses.dataclass
class _Progress:
  """The training loop's state from step to step."""
  state: steps.State
  final: dict[str, Any]               # the metrics train_and_evaluate returns, updated by every line written
  last_good: Optional[int]            # the latest saved step (a non-finite loss's error names it)
  wall_base: float                    # the resumed run's wall_time
  t0: float                           # perf_counter() at the loop's start
  last_log_step: int
  last_log_time: float
  # (step, loss, grad norm) not yet checked on the host
  pending: list[tuple[int, jax.Array, jax.Array]] = dataclasses.field(default_factory=list)
  interval: list[float] = dataclasses.field(default_factory=list)  # checked losses since the last train line
  paused: float = 0.0                 # evaluation / checkpoint seconds since the last train line


def _train_and_evaluate(config: ml_collections.ConfigDict, given: ml_collections.ConfigDict, workdir: str,
                        info: data.DatasetInfo, mesh: jax.sharding.Mesh, setup, init, *, restart: bool,
                        signals: _Signals) -> dict[str, Any]:
  """config: the config to run (resolve_tokenizer_dir's); given: as passed (saved, and compared on resume);
  setup: steps.setup's triple; init: (source, its step, params, rest) from train.init_from, or None.

  The steps: _open_run (iterator, --restart, checkpointer), _restore_or_init (this workdir's checkpoint, else
  init's model, else a fresh init), _open_metrics (config.json, tokenizer, metrics writer), then
  _evaluate_interrupted, _train_loop and _final_evaluation."""
  static, abstract, _ = setup
  run, refusal = _open_run(config, workdir, info, mesh, setup, restart=restart, signals=signals)
  start, state, saved = _restore_or_init(run, given, abstract, init, refusal)
  n_params = steps.num_params(state)
  writer = _open_metrics(run, given, start, n_params, saved, init)
  wall_base = float(_last_logged(workdir).get("wall_time", 0.0)) if start else 0.0  # (read after the truncation)
  t0 = time.perf_counter()
  progress = _Progress(state=state, final={"step": start, "num_params": n_params}, last_good=run.ckpt.latest_step(),
                       wall_base=wall_base, t0=t0, last_log_step=start, last_log_time=t0)
  profiler = profiling.Profiler(config.train.get("profile_steps", ""), workdir)
  aborted = False
  try:
    _evaluate_interrupted(run, writer, progress, start)
    _train_loop(run, writer, profiler, progress, start)
    if start < run.num_steps:
      _final_evaluation(run, writer, progress)
  except SaveAborted:
    aborted = True
    raise
  finally:
    profiler.close()
    writer.close()
    if not aborted:  # (ckpt.close() would wait for the abandoned save)
      run.ckpt.close()
  if start >= run.num_steps:
    logging.info("%s is already trained to step %d (train.num_steps=%d)", workdir, start, run.num_steps)
    progress.final.update(_last_logged(workdir))
  return progress.final


def _open_run(config: ml_collections.ConfigDict, workdir: str, info: data.DatasetInfo, mesh: jax.sharding.Mesh,
              setup, *, restart: bool, signals: _Signals) -> tuple[_Run, Optional[Exception]]:
  """Setup: the training iterator; restart=True empties the workdir (process 0); its progress is read before the
  Checkpointer creates checkpoints/. Returns the _Run and the error to raise if nothing can be restored (a
  workdir with progress but no checkpoint), else None."""
  is_primary = jax.process_index() == 0
  static, _, shardings = setup
  train_it = data.make_iterator(config.data, "train", batch_size=int(config.data.batch_size),
                                seq_len=int(config.data.seq_len), seed=int(config.data.shuffle_seed),
                                shard_index=jax.process_index(), shard_count=jax.process_count(), repeat=True)
  if restart and is_primary:
    workdir_lib.restart(workdir)
  found = workdir_lib.progress(workdir)  # (before the Checkpointer creates checkpoints/)
  refusal = workdir_lib.no_checkpoint_error(workdir, found) if found else None
  ckpt = checkpoint.Checkpointer(workdir, keep=int(config.train.keep_checkpoints))
  run = _Run(config=config, workdir=workdir, info=info, mesh=mesh, static=static, shardings=shardings,
             train_it=train_it, ckpt=ckpt, signals=signals, is_primary=is_primary,
             num_steps=int(config.train.num_steps), schedule=optim.make_schedule(config.train),
             tokens_per_step=int(config.data.batch_size) * int(config.data.seq_len))
  return run, refusal


def _restore_or_init(run: _Run, given: ml_collections.ConfigDict, abstract, init,
                     refusal: Optional[Exception]) -> tuple[int, steps.State, Optional[ml_collections.ConfigDict]]:
  """(start step, train state, the saved config or None): the workdir's latest checkpoint (_resume) when it has
  one; else (refusal raised if set) step 0 from init's params (train.init_from) with a fresh optimizer state,
  or a fresh init. The corpus fingerprint is checked or recorded either way."""
  corpus = data.corpus_fingerprint(run.config.data)
  if run.ckpt.latest_step() is not None:
    return _resume(run, given, abstract, corpus)
  if refusal is not None:
    run.ckpt.close()
    raise refusal
  if run.is_primary and corpus:
    workdir_lib.check_corpus(run.workdir, *corpus, resuming=False)
  if init is not None:
    logging.info("initialized the model from %s (its step %d); fresh optimizer state, step 0", init[0], init[1])
    return 0, _init_state(run.static, run.shardings, *init[2:]), None
  return 0, steps.init_state(run.config, run.info.vocab_size, run.static, run.shardings), None


def _resume(run: _Run, given: ml_collections.ConfigDict, abstract,
            corpus) -> tuple[int, steps.State, ml_collections.ConfigDict]:
  """The latest intact checkpoint's (step, state, saved config), the iterator set to its data position; a
  changed incompatible config field or a corpus that changed is refused, a damaged checkpoint quarantined."""
  saved = _check_workdir_config(given, run.workdir)
  try:
    start, state, data_state = run.ckpt.restore(checkpoint.abstract_like(abstract, run.shardings), quarantine=True)
  except checkpoint.CheckpointError as e:
    run.ckpt.close()
    raise checkpoint.CheckpointError(f"{e}\nnot resuming; to start over on purpose pass --restart (removes "
                                     "its checkpoints and metrics) or use a new --workdir") from e
  if run.is_primary and corpus:
    workdir_lib.check_corpus(run.workdir, *corpus, resuming=True)
  if data_state:  # (a converted model's step-0 checkpoint has none: its data starts at the beginning)
    run.train_it.set_state(data_state)
  logging.info("resumed from %s at step %d", run.ckpt.directory, start)
  if run.config.train.get("init_from", ""):
    logging.info("train.init_from=%s is not read: this workdir's own checkpoint takes precedence",
                 run.config.train.init_from)
  return start, state, saved


def _open_metrics(run: _Run, given: ml_collections.ConfigDict, start: int, n_params: int,
                  saved: Optional[ml_collections.ConfigDict], init) -> metrics_lib.MetricsWriter:
  """Writes config.json (as given) and the tokenizer (process 0); the metrics writer from `start` on (truncating
  what a crashed run logged after it), with its notes: a changed train.num_steps, the init_from source."""
  config, num_steps = run.config, run.num_steps
  if run.is_primary:
    config_lib.save_config(given, run.workdir)
    data.save_tokenizer(run.info, run.workdir)
  if start < num_steps:
    logging.info("%s: %d parameters, %d devices, steps %d..%d", ",".join(validation.layer_mixer_names(config.model)),
                 n_params, run.mesh.size, start + 1, num_steps)
  writer = metrics_lib.MetricsWriter(run.workdir, start_step=start, total_steps=num_steps, enabled=run.is_primary)
  if saved is not None and int(saved.train.num_steps) != num_steps:
    writer.note(start, {"num_steps_changed": {"from": int(saved.train.num_steps), "to": num_steps}})
  if init is not None and start == 0:
    writer.note(0, {"init_from": {"workdir": os.path.abspath(init[0]), "step": int(init[1])}})
  return writer


def _evaluate_interrupted(run: _Run, writer: metrics_lib.MetricsWriter, progress: _Progress, start: int) -> None:
  """A resumed step that was due an evaluation but has none in metrics.jsonl (the run stopped between its
  checkpoint and its evaluation) is evaluated now."""
  every = run.config.train.eval_every
  if start and (start % every == 0 or start == run.num_steps) and not _evaluated(run.workdir, start):
    logging.info("step %d was checkpointed but not evaluated (interrupted): evaluating it now", start)
    _write_eval(run, writer, progress, start, interim=start != run.num_steps)


def _train_loop(run: _Run, writer: metrics_lib.MetricsWriter, profiler: profiling.Profiler, progress: _Progress,
                start: int) -> None:
  """Steps start + 1 .. num_steps: a train line every train.log_every steps and at the last, a checkpoint every
  train.checkpoint_every and at the last, an interim evaluation every train.eval_every (after the checkpoint, so
  a failing evaluation loses no steps; the last step's is _final_evaluation's). Losses are checked finite at
  each of those. A signal: the step's checkpoint is saved and committed, then Preempted."""
  config = run.config
  for step in range(start + 1, run.num_steps + 1):
    out = _train_step(run, profiler, progress, step, first=step == start + 1)
    writer.advance(step)
    run.ckpt.check()  # a failed background save (e.g. a full disk) stops the run now, naming its step
    is_last = step == run.num_steps
    stop = None if is_last else run.signals.requested()  # (the last step: the run ends normally anyway)
    log = step % config.train.log_every == 0 or is_last
    interim_eval = step % config.train.eval_every == 0 and not is_last and not stop
    save = step % config.train.checkpoint_every == 0 or is_last or bool(stop)
    if not (log or interim_eval or save):
      continue
    progress.interval += _check_finite(progress.pending, progress.last_good, run.ckpt.directory)
    progress.pending = []
    progress.final["step"] = step
    if log:
      _write_train_line(run, writer, progress, step, out)
    tic = time.perf_counter()
    if save:  # before the evaluation, so a failing evaluation cannot lose the steps since the last save
      _save(run, step, progress.state, stop)
      progress.last_good = step
    if stop:
      writer.write(step, {"stopped": stop})
      raise Preempted(f"stopped by {stop} after step {step}: its checkpoint is saved in "
                      f"{os.path.join(run.ckpt.directory, str(step))}; rerun the same command to resume")
    if interim_eval:
      _write_eval(run, writer, progress, step, interim=True)
    progress.paused += time.perf_counter() - tic  # evaluation and saving are not training throughput


def _train_step(run: _Run, profiler: profiling.Profiler, progress: _Progress, step: int, *,
                first: bool) -> dict[str, jax.Array]:
  """One training step on the next batch (random projections redrawn first when due); its loss and gradient
  norm join progress.pending. first: this run's first step (it waits for the compile). Returns its outputs."""
  progress.state = _maybe_redraw(progress.state, run.static, run.shardings, run.config, step)
  local = next(run.train_it)
  validation.check_loss_positions(local, run.config)
  batch = sharding.global_batch(local, run.mesh)
  profiler.before(step)
  if first:
    logging.info("compiling the training step (step %d waits for it)…", step)
  with jax.set_mesh(run.mesh):   # the mixers' op calls find the seq axis here (mixers/seq_shard.py)
    progress.state, out = run.static.train_step(progress.state, batch)
  profiler.after(step, out)
  progress.pending.append((step, out["loss"], out["grad_norm"]))
  return out


def _write_train_line(run: _Run, writer: metrics_lib.MetricsWriter, progress: _Progress, step: int,
                      out: dict[str, jax.Array]) -> None:
  """The train line: mean checked loss since the last one, learning rate, gradient norm, tokens per second of
  training (evaluation and saving excluded), wall time (continuing a resumed run's)."""
  now = time.perf_counter()
  seconds = max(now - progress.last_log_time - progress.paused, 1e-9)
  line = {"train_loss": float(np.mean(progress.interval)), "learning_rate": float(run.schedule(step - 1)),
          "grad_norm": float(out["grad_norm"]),
          "tokens_per_sec": run.tokens_per_step * (step - progress.last_log_step) / seconds,
          "wall_time": progress.wall_base + now - progress.t0}
  writer.write(step, line)
  progress.final.update(line)
  progress.interval, progress.last_log_step, progress.last_log_time, progress.paused = [], step, now, 0.0


def _save(run: _Run, step: int, state: steps.State, stop: Optional[str]) -> None:
  """Saves step's checkpoint with the iterator's position (in the background); after a signal (`stop`) waits
  for its commit, and a second signal meanwhile raises SaveAborted. The previous save's commit is waited for
  before that second signal can abandon anything: it abandons this save only, never the previous checkpoint."""
  if stop:
    run.ckpt.wait()
  run.signals.saving = bool(stop)
  # A second signal raises SaveAborted from its handler wherever Python is; inside a gc callback (jax
  # registers one) it would be printed as "Exception ignored" and lost, so no collection runs meanwhile.
  collecting = gc.isenabled() and bool(stop)
  if collecting:
    gc.disable()
  try:
    run.ckpt.save(step, state, run.train_it.get_state())
    if stop:
      run.ckpt.wait()  # committed (with its manifest) before we say so
  finally:
    run.signals.saving = False
    if collecting:
      gc.enable()


def _final_evaluation(run: _Run, writer: metrics_lib.MetricsWriter, progress: _Progress) -> None:
  """The last step's evaluation (eval.max_batches, not the interim cap), after its checkpoint."""
  _write_eval(run, writer, progress, run.num_steps, interim=False)


def _write_eval(run: _Run, writer: metrics_lib.MetricsWriter, progress: _Progress, step: int, *,
                interim: bool) -> None:
  line = _eval_line(progress.state, run.static, run.config, run.info, step, interim=interim)
  writer.write(step, line)
  progress.final.update(line)


def _eval_line(state, static, config, info, step: int, *, interim: bool = False) -> dict[str, float]:
  """eval_loss, eval_tokens and bits_per_byte | eval_accuracy at eval.seq_len, then the same with a _T<L> suffix
  at each of eval.lengths; interim (before the last step): each capped at eval.interim_max_batches."""
  line = {}
  for length in (None,) + eval_lib.eval_lengths(config):
    at = config if length is None else config_lib.apply_overrides(config, {"eval.seq_len": length})
    try:
      with jax.set_mesh(static.mesh):   # the mixers' op calls find the seq axis here (mixers/seq_shard.py)
        result = eval_lib.run_eval(state, static, at, info, interim=interim)
    except ValueError as e:  # e.g. a validation split that gives no tokens: a config problem, one line
      raise validation.ConfigError(f"evaluation at step {step} failed: {e}") from e
    suffix = "" if length is None else f"_T{length}"
    line[f"eval_loss{suffix}"] = result["eval_loss"]
    line[f"eval_tokens{suffix}"] = result["eval_tokens"]
    line.update({f"bits_per_byte{suffix}": result["bits_per_byte"]} if "bits_per_byte" in result
                else {f"eval_accuracy{suffix}": result["accuracy"]})
  return line


def _evaluated(workdir: str, step: int) -> bool:
  return any(r.get("step") == step and "eval_loss" in r for r in metrics_lib.read_metrics(workdir, quiet=True))


def _check_finite(pending: list[tuple[int, jax.Array, jax.Array]], last_good: Optional[int],
                  directory: str) -> list[float]:
  """Host values of the pending losses; a non-finite loss or gradient norm (which would poison the params
  with a finite loss) raises FloatingPointError naming its step."""
  values = jax.device_get([(loss, norm) for _, loss, norm in pending])
  for (step, _, _), (loss, norm) in zip(pending, values):
    for what, v in (("training loss", float(loss)), ("gradient norm", float(norm))):
      if not np.isfinite(v):
        kept = (f"the last good checkpoint is step {last_good} in {directory}" if last_good is not None
                else "no checkpoint was saved")
        raise FloatingPointError(f"non-finite {what} ({v}) at step {step}: training stopped; {kept} "
                                 "(try a lower train.learning_rate or more train.warmup_steps)")
  return [float(loss) for loss, _ in values]


def _maybe_redraw(state, static, shardings, config, step: int):
  """Redraws random-feature projections before step k·redraw_every + 1 (key from (seed, step), so resuming
  reproduces them)."""
  every = int(config.model.redraw_every)
  if not every or step == 1 or (step - 1) % every:
    return state
  lm = steps.merge(static, state)
  random_projection.redraw_projections(lm, jax.random.fold_in(jax.random.key(config.seed), step))
  _, _, rest = nnx.split(lm, nnx.Param, ...)
  return {**state, "rest": jax.device_put(rest, shardings["rest"])}


def _last_logged(workdir: str) -> dict[str, Any]:
  out: dict[str, Any] = {}
  for record in metrics_lib.read_metrics(workdir):
    out.update({k: v for k, v in record.items() if not isinstance(v, dict)})  # (not notes: num_steps_changed)
  return out
