"""Evaluates a workdir's checkpoint with its saved config; writes and prints DIR/eval.json (process 0 only).

  python -m linear_seq.evaluate --workdir=runs/default [--step=S] [--generate=200 --prompt='ROMEO:' \
      --temperature=0.8 --top_k=0 --top_p=1.0] \
      [--config.eval.seq_len=1024  (writes eval_validation_T1024.json)] [--output=PATH] [--position_loss]

Outputs are never replaced silently: the default evaluation (the validation split at the saved config's
length, latest step, no overrides) writes WORKDIR/eval.json, which a later evaluation of that kind replaces
(saying so); any other writes WORKDIR/eval_<split>_T<len>.json (`_step<S>` added with --step), or --output,
and refuses to replace an existing file unless --overwrite. --position_loss writes position_loss<same
suffix>.json beside it.

--config.x=v overrides apply to the saved config; one that changes the trained model (model.* but chunk_size,
data.tokenizer, data.vocab_size, seed) is refused with one line; eval.*, mesh.*, the other data.* fields and
model.chunk_size are legal (MODEL_FIELDS below). A workdir with checkpoints but no config.json is refused.

eval.json: step, split, eval_loss (nats/token over weighted positions), perplexity, bits_per_byte (text) or
accuracy (synthetic: argmax on the weighted positions), num_params, state_size (floats per sequence at
eval_seq_len), eval_seq_len, eval_tokens, eval_batches, and from training: tokens_per_sec (median over the
logged intervals after the first), wall_time (seconds).
"""
import json
import os
import statistics
import sys
from typing import Any, Callable, Mapping, NamedTuple, Optional

from absl import app
from absl import flags
from absl import logging
import jax
import ml_collections
import numpy as np

from linear_seq import checkpoint
from linear_seq import cli
from linear_seq import config_lib
from linear_seq import data
from linear_seq import eval_lib
from linear_seq import metrics as metrics_lib
from linear_seq import model as model_lib
from linear_seq import platform
from linear_seq import plugins
from linear_seq import sharding
from linear_seq import steps
from linear_seq import validation
from linear_seq import workdir as workdir_lib
from linear_seq.data import hf_tokenizer

EVAL_FILE = "eval.json"
POSITION_LOSS_FILE = "position_loss.json"

FLAGS = flags.FLAGS


def define_flags() -> None:
  """The CLI flags (defined only when run as a program, so importing this module defines no absl flags)."""
  flags.DEFINE_string("workdir", None, "Training workdir (holds config.json and checkpoints/).")
  flags.DEFINE_integer("step", None, "Checkpoint step to evaluate; default: the latest.")
  flags.DEFINE_string("split", "validation", "Dataset split to evaluate.")
  flags.DEFINE_string("output", "", f"Where to write the JSON; default: WORKDIR/{EVAL_FILE} for the default "
                      "evaluation, else WORKDIR/eval_<split>_T<len>.json.")
  flags.DEFINE_bool("overwrite", False, "Replace an existing --output / eval_<split>_T<len>.json file.")
  flags.DEFINE_bool("position_loss", False, f"Also write the loss per position to WORKDIR/{POSITION_LOSS_FILE} "
                    "(position_loss_<split>_T<len>.json for other evaluations).")
  flags.DEFINE_integer("generate", 0, "Print this many sampled tokens after --prompt.")
  flags.DEFINE_string("prompt", "ROMEO:", "Prompt for --generate (text datasets; synthetic: a validation prefix).")
  flags.DEFINE_float("temperature", 0.8, "Sampling temperature for --generate (0 = greedy).")
  flags.DEFINE_integer("top_k", 0, "--generate samples among the top_k most likely tokens (0 = all).")
  flags.DEFINE_float("top_p", 1.0, "--generate samples from the nucleus of this probability (1 = all; after "
                     "--top_k).")
  flags.DEFINE_integer("seed", 0, "Sampling seed for --generate.")
  cli.define_verbose_flag()
  cli.define_dry_run_flag()
  flags.mark_flags_as_required(["workdir"])


class Restored(NamedTuple):
  config: ml_collections.ConfigDict
  info: Any  # data.DatasetInfo
  static: steps.Static
  step: int
  state: steps.State


def restore(workdir: str, step: Optional[int] = None,
            config_overrides: Optional[Mapping[str, Any]] = None, *, need_data: bool = True) -> Restored:
  """The workdir's config (+ overrides, e.g. {'eval.seq_len': 512}) and its checkpoint (latest or `step`),
  restored onto the current devices. need_data=False reads nothing but the workdir (the tokenizer saved
  there; linear_seq.load), so the data may have moved."""
  ckpt = checkpoint.Checkpointer(workdir, read_only=True) if os.path.isdir(
      checkpoint.checkpoint_dir(workdir)) else None
  if ckpt is None or not ckpt.all_steps():
    if ckpt is not None:
      ckpt.close()
    found = workdir_lib.progress(workdir)
    if found:
      raise checkpoint.CheckpointError(f"no readable checkpoint in {workdir!r}: it shows progress "
                                       f"({'; '.join(found)}) but {checkpoint.checkpoint_dir(workdir)} holds none")
    raise checkpoint.CheckpointError(f"no checkpoints in {workdir!r}: nothing has been trained there yet "
                                     "(python -m linear_seq.main --config=... --workdir=...)")
  try:
    try:
      config = config_lib.load_saved(workdir)
    except FileNotFoundError as e:
      raise validation.ConfigError(f"{workdir} holds checkpoints but no config.json (the config they were trained "
                                   "with): restore it; not evaluated") from e
    except ValueError as e:
      raise validation.ConfigError(str(e)) from e
    if config_overrides:
      saved = config
      try:
        config = config_lib.apply_overrides(config, config_overrides)
      except ValueError as e:
        raise validation.ConfigError(str(e)) from e
      _check_overrides(saved, config)
    # data.tokenizer=hf tokenizes a corpus with the workdir's own hf_tokenizer.json (also for load().evaluate)
    config = hf_tokenizer.with_resolved_dir(config, [workdir])
    info = validation.check_config(config) if need_data else _saved_info(config, workdir)
    try:
      platform.apply(config.train)   # the run's matmul precision and tuning overrides (absent in old configs: '')
    except ValueError as e:
      raise validation.ConfigError(str(e)) from e
    mesh = sharding.make_mesh()
    static, abstract, shardings = steps.setup(config, info.vocab_size, mesh)
    latest = ckpt.latest_step()
    try:  # the latest step unless told which: a damaged latest is refused, not replaced by an older one (one
      # rotated away by a trainer running there meanwhile is replaced by the newest)
      step, state, _ = ckpt.restore(checkpoint.abstract_like(abstract, shardings), step=step, fallback=False)
    except checkpoint.CheckpointError as e:
      older = [s for s in ckpt.all_steps() if s != (latest if step is None else step)]
      hint = (f"; not evaluated: pick another with --step (available: {', '.join(map(str, older))})" if older
              else "; not evaluated (no other checkpoint)")
      raise checkpoint.CheckpointError(f"{e}{hint}") from e
  finally:
    ckpt.close()
  return Restored(config, info, static, step, state)


# Overrides that would evaluate another model than the one trained (refused when they differ from config.json).
# Legal at evaluation: eval.* (seq_len, batch_size, max_batches), data.* but these (e.g. data.path on another
# corpus, data.data_dir), mesh.*, and model.chunk_size (the chunkwise form's block size: the same model).
MODEL_FIELDS = ("model.", "data.tokenizer", "data.vocab_size", "seed")
EVAL_LEGAL_MODEL_FIELDS = ("model.chunk_size",)


def _check_overrides(saved: ml_collections.ConfigDict, config: ml_collections.ConfigDict) -> None:
  bad = [k for k in config_lib.diff(saved, config)
         if k.startswith(MODEL_FIELDS) and k not in EVAL_LEGAL_MODEL_FIELDS]
  if bad:
    flat_saved, flat_new = (config_lib.flatten(config_lib.to_dict(c)) for c in (saved, config))
    also = f" (also {', '.join(bad[1:])})" if bad[1:] else ""
    raise validation.ConfigError(
        f"--config.{bad[0]}={flat_new.get(bad[0])!r} differs from the trained model's {flat_saved.get(bad[0])!r} "
        f"(config.json){also}: that would evaluate another model; overrides allowed at evaluation: eval.*, "
        "mesh.*, data.* (not data.tokenizer, data.vocab_size), model.chunk_size")


def _saved_info(config: ml_collections.ConfigDict, workdir: str):
  try:
    plugins.import_modules(config)
    return data.restored_info(config.data, workdir)
  except (KeyError, ValueError) as e:
    raise validation.ConfigError(str(e).strip("'\"")) from e


def evaluate(workdir: str, step: Optional[int] = None, config_overrides: Optional[Mapping[str, Any]] = None, *,
             split: str = "validation", position_loss: bool = False) -> dict[str, Any]:
  """Restores the checkpoint (latest or `step`) and evaluates `split`; returns the eval.json content (not
  written here). With position_loss the dict also has 'position_loss' (a list over positions)."""
  return evaluate_restored(workdir, restore(workdir, step, config_overrides), split=split,
                           position_loss=position_loss)


def evaluate_restored(workdir: str, r: Restored, *, split: str = "validation", position_loss: bool = False,
                      progress: Callable[[str], None] = logging.info) -> dict[str, Any]:
  """evaluate's dict for a restored run; `progress` gets the evaluation's progress lines (eval_lib.run_eval)."""
  result = eval_lib.run_eval(r.state, r.static, r.config, r.info, split=split, position_loss=position_loss,
                             progress=progress)
  seq_len = eval_lib.eval_seq_len(r.config)
  lm = steps.merge(r.static, r.state)
  out: dict[str, Any] = {"step": int(r.step), "split": split, **result,
                         "num_params": steps.num_params(r.state), "state_size": int(lm.state_size(seq_len)),
                         "eval_seq_len": seq_len, "dataset": r.config.data.dataset,
                         "mixer": ",".join(validation.layer_mixer_names(r.config.model))}
  out.update(_training_speed(workdir, r.step))
  return out


def _training_speed(workdir: str, step: int) -> dict[str, float]:
  train_lines = [m for m in metrics_lib.read_metrics(workdir) if "train_loss" in m and m["step"] <= step]
  speeds = [m["tokens_per_sec"] for m in train_lines[1:] or train_lines if m.get("tokens_per_sec")]
  out = {}
  if speeds:
    out["tokens_per_sec"] = float(statistics.median(speeds))
  if train_lines and "wall_time" in train_lines[-1]:
    out["wall_time"] = float(train_lines[-1]["wall_time"])
  return out


def sample(r: Restored, n: int, *, prompt: str = "", temperature: float = 0.8, seed: int = 0, top_k: int = 0,
           top_p: float = 1.0) -> str:
  """Decodes n tokens after `prompt` with the recurrent state (model_lib.generate: temperature, top_k, top_p
  composable); returns prompt + sample as
  text (text datasets) or as token ids (synthetic tasks: the prompt is the first validation example's first
  half)."""
  lm = steps.merge(r.static, r.state)
  tok = r.info.tokenizer
  if r.info.kind == "text":
    bos = getattr(tok, "bos_id", None)
    prompt_ids = ([bos] if bos is not None else []) + tok.encode(prompt)
  else:
    first = next(iter(eval_lib.make_eval_iterator(r.config)))
    prompt_ids = [int(t) for t in first["inputs"][0, : max(first["inputs"].shape[1] // 2, 1)]]
  prompt_BT = np.asarray([prompt_ids], np.int32)
  tokens = np.asarray(model_lib.generate(lm, prompt_BT, n, temperature=temperature, top_k=top_k, top_p=top_p,
                                         key=jax.random.key(seed)))
  new = tokens[0, len(prompt_ids):].tolist()
  if r.info.kind == "text":
    return prompt + tok.decode(new)
  return f"prompt: {prompt_ids}\nsample: {new}"


class OutputExists(Exception):
  """An evaluation output that would replace an existing file (without --overwrite)."""


def output_paths(workdir: str, *, split: str, seq_len: Optional[int], step: Optional[int], overrides: bool,
                 output: str = "") -> tuple[str, str]:
  """(the eval JSON, the position-loss JSON) of one evaluation: eval.json / position_loss.json for the default
  one (validation split, no --step, no overrides: seq_len is not needed), else eval_<split>_T<len>[_step<S>].json
  and position_loss_<...>.json; `output` replaces the first and puts the second beside it (<stem>_position_loss.json)."""
  if output:
    return output, os.path.splitext(output)[0] + "_position_loss.json"
  if split == "validation" and step is None and not overrides:
    return os.path.join(workdir, EVAL_FILE), os.path.join(workdir, POSITION_LOSS_FILE)
  suffix = f"_{split}_T{seq_len}" + (f"_step{step}" if step is not None else "") + ".json"
  return os.path.join(workdir, "eval" + suffix), os.path.join(workdir, "position_loss" + suffix)


def check_writable(path: str, *, overwrite: bool, default: bool) -> Optional[str]:
  """Refuses (OutputExists) to replace an existing file, unless `overwrite`, or `default` (eval.json of the
  default evaluation, which a newer evaluation updates); returns the replaced file's step note, or None."""
  if not os.path.exists(path):
    return None
  try:
    with open(path) as f:
      old = json.load(f)
    note = f"step {old.get('step')}, {old.get('split')}, T={old.get('eval_seq_len')}"
  except (OSError, ValueError, AttributeError):
    note = "unreadable"
  if not (overwrite or default):
    raise OutputExists(f"{path} exists ({note}); not replaced: pass --overwrite to replace it or --output=PATH "
                       "to write elsewhere")
  return note


def _parse_flags(argv: list[str]) -> list[str]:
  """absl parses the flags; the --config.a.b=value overrides (for the workdir's config.json) stay in argv for
  main, which parses them against the saved config."""
  overrides = [arg for arg in argv[1:] if arg.startswith("--config.")]
  try:
    return FLAGS([arg for arg in argv if arg not in overrides]) + overrides
  except flags.Error as e:  # e.g. --step=abc: one line, not a traceback
    sys.exit(f"error: {e}")


def main(argv):
  try:
    overrides, unexpected = config_lib.override_args(argv[1:])
  except ValueError as e:
    sys.exit(f"error: {e}")
  if unexpected:
    raise app.UsageError(f"unexpected arguments: {' '.join(unexpected)}")
  if getattr(FLAGS, "dry_run", False):  # the saved config with the overrides, when the workdir exists (the overrides' syntax else)
    if os.path.exists(os.path.join(FLAGS.workdir, config_lib.CONFIG_FILE)):
      with cli.one_line_errors(ValueError):
        config_lib.apply_overrides(config_lib.load_config(FLAGS.workdir), overrides)
    cli.exit_if_dry_run(f"would evaluate {FLAGS.workdir} (step {FLAGS.step or 'latest'}, split {FLAGS.split}"
                        + (f", overrides {overrides}" if overrides else "") + ")")
  if getattr(FLAGS, "generate", 0) > 0:
    try:  # before restoring: a bad value is one line at once
      model_lib.check_sampling(FLAGS.temperature, FLAGS.top_k, FLAGS.top_p)
    except ValueError as e:
      sys.exit(f"error: {e}")
  sharding.maybe_initialize_distributed()  # before any other JAX call
  metrics_lib.quiet_library_logs(getattr(FLAGS, "verbose", False))
  workdir = FLAGS.workdir
  with cli.one_line_errors(checkpoint.CheckpointError, validation.ConfigError, FileNotFoundError):
    restored = restore(workdir, FLAGS.step, overrides)
  # Every process computes (the arrays are global); only process 0 writes and prints.
  is_primary = jax.process_index() == 0
  overwrite = getattr(FLAGS, "overwrite", False)
  default = not (FLAGS.output or overrides or FLAGS.split != "validation" or FLAGS.step is not None)
  output, positions_path = output_paths(
      workdir, split=FLAGS.split, step=FLAGS.step, overrides=bool(overrides), output=FLAGS.output,
      seq_len=None if default else eval_lib.eval_seq_len(restored.config))
  with cli.one_line_errors(OutputExists):  # before the evaluation, not after it
    replaced = check_writable(output, overwrite=overwrite, default=default) if is_primary else None
    if FLAGS.position_loss and is_primary:
      check_writable(positions_path, overwrite=overwrite, default=default)
  result = evaluate_restored(workdir, restored, split=FLAGS.split, position_loss=FLAGS.position_loss)
  positions = result.pop("position_loss", None)
  if is_primary:
    if positions is not None:
      with open(positions_path, "w") as f:
        json.dump({"step": result["step"], "position": list(range(1, len(positions) + 1)),
                   "position_loss": positions}, f)
    with open(output, "w") as f:
      json.dump(result, f, indent=2)
      f.write("\n")
    print(json.dumps(result, indent=2))
    if replaced is not None:
      print(f"replaced {output} (was: {replaced})", file=sys.stderr)
  if FLAGS.generate > 0:
    text = sample(restored, FLAGS.generate, prompt=FLAGS.prompt, temperature=FLAGS.temperature, seed=FLAGS.seed,
                  top_k=FLAGS.top_k, top_p=FLAGS.top_p)
    if is_primary:
      extra = ((f", top_k {FLAGS.top_k}" if FLAGS.top_k else "") +
               (f", top_p {FLAGS.top_p}" if FLAGS.top_p < 1 else ""))
      print(f"--- sample ({FLAGS.generate} tokens, temperature {FLAGS.temperature}{extra}) ---\n{text}")


if __name__ == "__main__":
  define_flags()
  app.run(main, flags_parser=_parse_flags)
