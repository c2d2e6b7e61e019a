"""Does the learning-rate schedule's float32 rounding alone move a feature-map point? (2026-12-02)

  python experiments/feature_maps/schedule_check.py --workdir=/tmp/fm_sched [--map=identity] [--schedule=closed_form]

Trains one point of `config.py:task=mqar` (seed 0) with optim.make_schedule replaced by the closed form it had
before 2026-12-01 (d911f83 rebuilt it from optax's schedules, equal to float32 rounding, ~1e-10), and prints the
final validation accuracy and eval loss. With --schedule=optax the library's own schedule is used (the control).
"""
import json
import os

from absl import app
from absl import flags
import jax.numpy as jnp

from linear_seq import config_lib
from linear_seq import optim
from linear_seq import train

# the study config beside this file, by path (every study's is named config.py)
study = config_lib.load_module(os.path.join(os.path.dirname(os.path.abspath(__file__)), "config.py"))

flags.DEFINE_string("workdir", None, "A fresh training workdir.")
flags.DEFINE_string("map", "identity", "Feature map (config.MAPS).")
flags.DEFINE_enum("schedule", "closed_form", ("closed_form", "optax"), "Which schedule to train with.")
FLAGS = flags.FLAGS


def closed_form_schedule(cfg):
  """optim.make_schedule as it was before d911f83: warmup peak·min(1, (count+1)/warmup), then cosine."""
  peak = float(cfg.learning_rate)
  end = peak * float(cfg.end_lr_fraction)
  warmup = max(int(cfg.warmup_steps), 0)
  decay_steps = max(int(cfg.num_steps) - warmup, 1)

  def schedule(count):
    count = jnp.asarray(count, jnp.float32)
    warm = peak * jnp.minimum(1.0, (count + 1.0) / max(warmup, 1))
    progress = jnp.clip((count - warmup) / decay_steps, 0.0, 1.0)
    cosine = end + (peak - end) * 0.5 * (1.0 + jnp.cos(jnp.pi * progress))
    return jnp.where(count < warmup, warm, cosine)

  return schedule


def main(argv):
  del argv
  if FLAGS.map not in study.MAPS:
    raise ValueError(f"unknown map {FLAGS.map!r}; valid: {', '.join(study.MAPS)}")
  if FLAGS.schedule == "closed_form":
    optim.make_schedule = closed_form_schedule
  config = config_lib.apply_overrides(study.get_config("task=mqar"), study.point(FLAGS.map, 0))
  final = train.train_and_evaluate(config, FLAGS.workdir)
  print(json.dumps({"map": FLAGS.map, "schedule": FLAGS.schedule, "step": final.get("step"),
                    "eval_accuracy": final.get("eval_accuracy"), "eval_loss": final.get("eval_loss")}))


if __name__ == "__main__":
  flags.mark_flag_as_required("workdir")
  app.run(main)
