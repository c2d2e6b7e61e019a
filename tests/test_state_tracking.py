"""configs/state_tracking.py end to end: each task's tiny config trains and reports its accuracy at the training
lengths and at a longer length (eval.lengths); bad settings are one ConfigError line before anything compiles
(main prints it as `error: ...`)."""
import os

import numpy as np
import pytest

from linear_seq import config_lib
from linear_seq import metrics
from linear_seq import train
from linear_seq import validation
from linear_seq.data import state_tracking

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "configs")


def tiny(task: str, **overrides):
  module = config_lib.load_sibling(os.path.join(CONFIGS, "state_tracking.py"), "state_tracking")
  return config_lib.apply_overrides(module.get_config(f"task={task},tiny=True"), overrides)


@pytest.mark.parametrize("task", state_tracking.TASKS)
def test_tiny_config_trains_and_reports_each_length(task, tmp_path):
  final = train.train_and_evaluate(tiny(task), str(tmp_path))
  assert final["step"] == 2 and np.isfinite(final["train_loss"])
  evals = [r for r in metrics.read_metrics(str(tmp_path)) if "eval_loss" in r]
  assert [r["step"] for r in evals] == [2]
  for r in evals:   # the training lengths (8) and 2x (16), each its own metric
    assert 0 <= r["eval_accuracy"] <= 1 and 0 <= r["eval_accuracy_T16"] <= 1
    assert np.isfinite(r["eval_loss"]) and np.isfinite(r["eval_loss_T16"])


@pytest.mark.parametrize("task,overrides,message", [
    ("mod_count", {"data.modulus": 1}, "mod_count: data.modulus must be an integer >= 2, got 1"),
    ("permutation", {"data.group": "Z5"}, "permutation: unknown data.group 'Z5'; valid: S3, S5"),
    ("permutation", {"data.group": "S5"}, "data.vocab_size=8 is too small: the task's tokens need >= 120"),
    ("parity", {"data.min_len": 0}, "parity: lengths must be positive"),
    ("parity", {"model.mixer": "retention", "model.negative_eigenvalues": True},
     "model.negative_eigenvalues=True: retention cannot take it"),
])
def test_config_errors(task, overrides, message):
  with pytest.raises(validation.ConfigError, match=message) as e:
    validation.check_config(tiny(task, **overrides))
  assert "\n" not in str(e.value)


def test_bad_eval_lengths():
  with pytest.raises(validation.ConfigError, match="eval.lengths must be comma-separated positive integers"):
    train.make_mesh(tiny("parity", **{"eval.lengths": "16,0"}))
