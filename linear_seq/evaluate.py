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
model.chunk_size are legal (restored.MODEL_FIELDS). A workdir with checkpoints but no config.json is refused.

eval.json: step, split, eval_loss (nats/token over weighted positions), perplexity, bits_per_byte (text) or
accuracy (synthetic: argmax on the weighted positions), num_params, state_size (floats per sequence at
eval_seq_len), eval_seq_len, eval_tokens, eval_batches, and from training: tokens_per_sec (median over the
logged intervals after the first), wall_time (seconds).
"""
# The command line: its flags, output files and their checks. Restoring, evaluating and sampling are
# restored.py's (which linear_seq.load also uses), as main.py is the command line over train.py.
import json
import os
import sys
from typing import Optional

from absl import app
from absl import flags
import jax

from linear_seq import checkpoint
from linear_seq import cli
from linear_seq import config_lib
from linear_seq import eval_lib
from linear_seq import metrics as metrics_lib
from linear_seq import model as model_lib
from linear_seq import restored as restored_lib
from linear_seq import sharding
from linear_seq import validation

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
    restored = restored_lib.restore(workdir, FLAGS.step, overrides)
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
  result = restored_lib.evaluate_restored(workdir, restored, split=FLAGS.split, position_loss=FLAGS.position_loss)
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
    text = restored_lib.sample(restored, FLAGS.generate, prompt=FLAGS.prompt, temperature=FLAGS.temperature,
                               seed=FLAGS.seed, top_k=FLAGS.top_k, top_p=FLAGS.top_p)
    if is_primary:
      extra = ((f", top_k {FLAGS.top_k}" if FLAGS.top_k else "") +
               (f", top_p {FLAGS.top_p}" if FLAGS.top_p < 1 else ""))
      print(f"--- sample ({FLAGS.generate} tokens, temperature {FLAGS.temperature}{extra}) ---\n{text}")


if __name__ == "__main__":
  define_flags()
  app.run(main, flags_parser=_parse_flags)
