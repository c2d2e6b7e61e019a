"""Trains a model from a config file; resumes from the workdir's latest checkpoint automatically.

Config errors (also an evaluation that cannot run), checkpoint errors, a workdir in use by another run or with
progress but no checkpoint, a non-finite loss, and a stop on SIGTERM / SIGHUP / SIGINT (after saving a
checkpoint; a second signal during that save abandons it) exit 1 with one line (--verbose adds the traceback).
--restart trains from step 0 on purpose (removes the workdir's checkpoints and metrics first).

  python -m linear_seq.main --config=configs/default.py[:mixer=gla,tiny=True] --workdir=runs/default \
      [--config.model.mixer=retention --config.train.num_steps=100 ...]
"""
import os
import sys

from absl import app
from absl import flags
from absl import logging
from ml_collections import config_flags

from linear_seq import checkpoint
from linear_seq import cli
from linear_seq import config_lib
from linear_seq import metrics as metrics_lib
from linear_seq import sharding
from linear_seq import train
from linear_seq import validation
from linear_seq import workdir as workdir_lib
from linear_seq import xla_env

FLAGS = flags.FLAGS
flags.DEFINE_string("workdir", None, "Directory for checkpoints, metrics.jsonl and config.json (resumed from).")
config_flags.DEFINE_config_file("config", None, "Config file[:options], e.g. configs/mqar.py:mixer=gla,tiny=True.",
                                lock_config=True)
flags.DEFINE_string("coordinator_address", "", "Multi-process: host:port of process 0 ('' = JAX's cluster "
                    "auto-detection or JAX_COORDINATOR_ADDRESS).")
flags.DEFINE_integer("num_processes", 0, "Multi-process: number of processes (0 = auto-detect).")
flags.DEFINE_integer("process_id", -1, "Multi-process: this process's index (-1 = auto-detect).")
flags.DEFINE_integer("distributed_timeout", 0, "Multi-process: seconds for initialization, heartbeat and "
                     "shutdown (0 = JAX's defaults, minutes); a dead peer ends the run within about this.")
flags.DEFINE_bool("restart", False, "Start over from step 0: removes the workdir's checkpoints and metrics first.")
cli.define_verbose_flag()
cli.define_dry_run_flag()
flags.mark_flags_as_required(["config", "workdir"])


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  metrics_lib.quiet_library_logs(FLAGS.verbose)
  if FLAGS.dry_run:
    cli.load_config_flag()
    with cli.one_line_errors(validation.ConfigError):
      config = _config()
      validation.check_config(train.resolve_tokenizer_dir(config, FLAGS.workdir))
    cli.exit_if_dry_run(f"would train {config.model.mixer} ({config.model.num_layers} layers, d_model "
                        f"{config.model.d_model}) on {config.data.dataset} for {config.train.num_steps} steps "
                        f"into {FLAGS.workdir}")
  xla_env.add_flags(xla_env.DETERMINISTIC_FLAGS)  # exact resume on GPU; before the backend starts
  sharding.maybe_initialize_distributed(FLAGS.coordinator_address, FLAGS.num_processes, FLAGS.process_id,
                                        FLAGS.distributed_timeout)
  cli.load_config_flag()  # a config file that does not load: one line
  with cli.one_line_errors(validation.ConfigError, FloatingPointError, checkpoint.CheckpointError,
                           workdir_lib.WorkdirError, train.Preempted):
    config = _config()
    try:
      final = train.train_and_evaluate(config, FLAGS.workdir, restart=FLAGS.restart)
    except train.SaveAborted as e:  # the lock is released; exit without waiting for the abandoned save
      sys.stderr.write(f"error: {e}; the previous checkpoint is kept\n")
      sys.stderr.flush()
      os._exit(1)  # pylint: disable=protected-access
  logging.info("done: %s", final)


def _config():
  """--config and its --config.x=v overrides through config_lib, as the sweep and evaluate load configs
  (config_flags has already checked the names and types; this gives the same config by the same code)."""
  try:
    return config_lib.apply_overrides(config_lib.load_config(config_flags.get_config_filename(FLAGS["config"])),
                                      config_flags.get_override_values(FLAGS["config"]))
  except ValueError as e:
    raise validation.ConfigError(str(e)) from e


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags)
