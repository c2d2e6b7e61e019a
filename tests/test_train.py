"""The trainer end to end on shrunk configs: exact resume, NaN stop, round trip to evaluate, failures."""
import json
import os
import shutil
import sys
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from linear_seq import checkpoint
from linear_seq import config_lib
from linear_seq import eval_lib
from linear_seq import evaluate
from linear_seq import metrics
from linear_seq import optim
from linear_seq import restored as restored_lib
from linear_seq import sharding
from linear_seq import steps
from linear_seq import train
from linear_seq import validation
from tests.helpers import TEXT
from tests.helpers import mqar
from tests.helpers import tiny


def train_lines(workdir):
  return [(r["step"], r["train_loss"]) for r in metrics.read_metrics(workdir) if "train_loss" in r]


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
  """4 steps straight (checkpoints at 2 and 4, eval at 2 (1 batch) and 4 (the whole split), a train line every
  step)."""
  workdir = str(tmp_path_factory.mktemp("straight"))
  final = train.train_and_evaluate(mqar(), workdir)
  return workdir, final


def test_outputs(straight):
  workdir, final = straight
  assert final["step"] == 4 and np.isfinite(final["train_loss"]) and 0 <= final["eval_accuracy"] <= 1
  assert sorted(os.listdir(os.path.join(workdir, "checkpoints"))) == ["2", "4"]
  records = metrics.read_metrics(workdir)
  assert {"step", "train_loss", "learning_rate", "tokens_per_sec", "wall_time"} <= set(records[0])
  assert [r["step"] for r in records if "eval_loss" in r] == [2, 4]
  # The evaluation before the last step reads eval.interim_max_batches = 1 batch of 8 examples, the last the split (16).
  assert [r["eval_tokens"] for r in records if "eval_loss" in r] == [8 * 2, 16 * 2]  # num_kv_pairs = 2 answers
  assert all("eval_accuracy" in r for r in records if "eval_loss" in r)
  assert config_lib.load_config(workdir).to_dict() == mqar().to_dict()


def test_exact_resume(straight, tmp_path, caplog):
  """2 steps + restart + 2 steps == 4 steps straight, bitwise (state, optimizer, data iterator restored);
  metrics.jsonl lines past the restored step are dropped, so the file matches the straight run's."""
  workdir, _ = straight
  resumed = str(tmp_path / "resumed")
  shutil.copytree(workdir, resumed)
  shutil.rmtree(os.path.join(resumed, "checkpoints", "4"))  # as if the run had stopped after step 2
  with caplog.at_level("INFO"):
    final = train.train_and_evaluate(mqar(), resumed)
  assert "compiling the training step (step 3 waits for it)…" in caplog.text
  assert "evaluating the validation split: 2 batches of 8 × 16 tokens (the first compiles)…" in caplog.text
  assert train_lines(resumed) == train_lines(workdir)
  strip = lambda rs: [{k: v for k, v in r.items() if k not in ("tokens_per_sec", "wall_time")} for r in rs]
  assert strip(metrics.read_metrics(resumed)) == strip(metrics.read_metrics(workdir))
  assert final["eval_loss"] == metrics.read_metrics(workdir)[-1]["eval_loss"]
  # Already at num_steps: nothing to do, the final metrics come from metrics.jsonl.
  again = train.train_and_evaluate(mqar(), resumed)
  assert again["step"] == 4 and again["eval_loss"] == final["eval_loss"]


@pytest.mark.parametrize("field, value, message", [
    ("model.d_model", 32, "model.d_model changed.*saved 16, now 32"),
    ("data.path", "/other/corpus", "data.path changed.*saved '', now '/other/corpus'"),  # another data stream
    # The data position is a batch index: these would skip or repeat examples.
    ("data.batch_size", 4, "data.batch_size changed.*saved 8, now 4"),
    ("data.seq_len", 32, "data.seq_len changed.*saved 16, now 32"),
    ("data.shuffle_seed", 1, "data.shuffle_seed changed.*saved 0, now 1"),
    ("data.num_train", 500, "data.num_train changed"),
])
def test_resume_with_another_model_or_data_is_refused(straight, tmp_path, field, value, message):
  workdir, _ = straight
  other = str(tmp_path / "other")
  shutil.copytree(workdir, other)
  with pytest.raises(validation.ConfigError, match=f"different model or data: {message}"):
    train.train_and_evaluate(mqar(**{field: value}), other)
  assert sorted(os.listdir(os.path.join(other, "checkpoints"))) == ["2", "4"]


def _drop_saved_fields(workdir, *dotted):
  """config.json as a run saved before these fields existed."""
  path = os.path.join(workdir, config_lib.CONFIG_FILE)
  saved = json.load(open(path))
  for key in dotted:
    section, leaf = key.split(".")
    del saved[section][leaf]
  json.dump(saved, open(path, "w"))


def test_resume_predating_new_fields(straight, tmp_path):
  """A config.json written before fields were added resumes when their values are the defaults (what the run
  had); a model field set to another value than its default is a changed model."""
  workdir, _ = straight
  old = str(tmp_path / "old")
  shutil.copytree(workdir, old)
  shutil.rmtree(os.path.join(old, "checkpoints", "4"))
  _drop_saved_fields(old, "model.householder_steps", "model.negative_eigenvalues", "model.attention_impl")
  with pytest.raises(validation.ConfigError, match="different model or data: model.attention_impl changed"):
    train.train_and_evaluate(mqar(**{"model.attention_impl": "chunked"}), old)
  final = train.train_and_evaluate(mqar(), old)
  assert final["step"] == 4 and final["eval_loss"] == metrics.read_metrics(workdir)[-1]["eval_loss"]


def test_resume_with_another_num_steps_warns_and_is_recorded(straight, tmp_path, caplog):
  """A changed train.num_steps recomputes the schedule: one warning line, and a note in metrics.jsonl at the
  resumed step (not a metric: train and eval lines are unchanged)."""
  workdir, _ = straight
  other = str(tmp_path / "other")
  shutil.copytree(workdir, other)
  with caplog.at_level("WARNING"):
    train.train_and_evaluate(mqar(**{"train.num_steps": 3}), other)  # (already past step 3: nothing to train)
  warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and r.pathname.endswith("train.py")]
  assert warnings == ["train.num_steps changed from 4 to 3: the learning-rate schedule (warmup, then cosine to "
                      "step train.num_steps) is recomputed from the resumed step on (recorded in metrics.jsonl)"]
  records = metrics.read_metrics(other)
  assert records[:-1] == metrics.read_metrics(workdir)
  assert records[-1] == {"step": 4, "num_steps_changed": {"from": 4, "to": 3}}


def test_nan_loss_stops_and_keeps_last_good_checkpoint(tmp_path, monkeypatch):
  """A NaN learning rate from step 3 on (injected through the schedule) makes step 4's loss NaN."""
  real = optim.make_schedule
  monkeypatch.setattr(optim, "make_schedule",
                      lambda c: (lambda count: jnp.where(count < 2, real(c)(count), jnp.nan)))
  config = mqar(**{"train.learning_rate": 1.234e-3,  # (steps are built per run: the optimizer has the patch)
                   "train.num_steps": 6, "train.log_every": 4, "train.eval_every": 100})
  with pytest.raises(FloatingPointError, match=r"non-finite training loss \(nan\) at step 4: training stopped; "
                     r"the last good checkpoint is step 2"):
    train.train_and_evaluate(config, str(tmp_path))
  assert os.listdir(tmp_path / "checkpoints") == ["2"]


def test_nan_gradient_with_finite_loss_stops_before_saving(tmp_path, monkeypatch):
  """A term worth 0 whose gradient is NaN (0 * sqrt'(0)), injected through the loss: the loss stays finite, the
  gradient norm is NaN from step 1 on, so the run stops there and no checkpoint holds the poisoned params."""
  real = steps.loss_terms
  def poisoned(logits, batch, positions=None):
    terms = real(logits, batch, positions)
    nll = terms["nll"]
    return {**terms, "nll": nll + 0.0 * jnp.sqrt(nll - jax.lax.stop_gradient(nll))}
  monkeypatch.setattr(steps, "loss_terms", poisoned)
  config = mqar(**{"train.learning_rate": 2.345e-3,  # (steps are jitted per run: traced with the patch)
                   "train.checkpoint_every": 1})
  with pytest.raises(FloatingPointError, match=r"non-finite gradient norm \(nan\) at step 1: training stopped; "
                     r"no checkpoint was saved"):
    train.train_and_evaluate(config, str(tmp_path))
  assert not os.listdir(tmp_path / "checkpoints")


def test_no_evaluation_data_fails_before_the_workdir_is_created(tmp_path):
  """An evaluation that cannot run (here: no validation examples) is a ConfigError before step 1, which main
  reports as one line; no workdir is created."""
  with pytest.raises(validation.ConfigError, match="validation split needs a positive number of examples"):
    train.train_and_evaluate(mqar(**{"data.num_eval": 0}), str(tmp_path / "run"))
  assert not os.path.exists(tmp_path / "run")


def test_no_evaluation_tokens(monkeypatch):
  config = mqar()
  monkeypatch.setattr(eval_lib, "make_eval_iterator", lambda config, split, examples=None: iter(()))
  static = types.SimpleNamespace(mesh=sharding.make_mesh())
  with pytest.raises(ValueError, match=r"the validation split of 'mqar' gave no evaluation tokens "
                     r"\(eval.seq_len=16, eval.batch_size=8\)"):
    eval_lib.run_eval({}, static, config, None)


@pytest.mark.parametrize("process", [0, 1])
def test_evaluate_main_initializes_distributed_and_writes_only_on_process_0(tmp_path, monkeypatch, capsys, process):
  calls = []
  monkeypatch.setattr(evaluate.sharding, "maybe_initialize_distributed", lambda: calls.append("initialize"))
  monkeypatch.setattr(restored_lib, "restore", lambda *args: calls.append("restore"))
  monkeypatch.setattr(restored_lib, "evaluate_restored",
                      lambda *args, **kwargs: {"step": 2, "eval_loss": 1.5, "position_loss": [1.0, 2.0]})
  monkeypatch.setattr(evaluate.jax, "process_index", lambda: process)
  monkeypatch.setattr(evaluate, "FLAGS", types.SimpleNamespace(
      workdir=str(tmp_path), step=None, split="validation", output="", position_loss=True, generate=0))
  evaluate.main(["evaluate"])
  assert calls == ["initialize", "restore"]
  written = sorted(os.listdir(tmp_path))
  assert written == (["eval.json", "position_loss.json"] if process == 0 else [])
  assert ("eval_loss" in capsys.readouterr().out) == (process == 0)


def test_evaluate_config_overrides_reach_restore(monkeypatch):
  """main gets the --config.x=v arguments from the flag parser and passes them to restore (no module state)."""
  calls = []
  monkeypatch.setattr(restored_lib, "restore", lambda *args: calls.append(args) or sys.exit("stop"))
  monkeypatch.setattr(evaluate, "FLAGS", types.SimpleNamespace(workdir="w", step=3))
  with pytest.raises(SystemExit, match="stop"):
    evaluate.main(["evaluate", "--config.eval.seq_len=64", "--config.model.decay=0.5,0.9"])
  assert calls == [("w", 3, {"eval.seq_len": "64", "model.decay": "0.5,0.9"})]
  with pytest.raises(SystemExit, match="error: write config overrides as --config.eval.seq_len=VALUE"):
    evaluate.main(["evaluate", "--config.eval.seq_len"])


def test_failing_evaluation_keeps_the_checkpoint_of_its_step(tmp_path, monkeypatch):
  def fail(*args, **kwargs):
    raise MemoryError("eval does not fit")
  monkeypatch.setattr(train.eval_lib, "run_eval", fail)
  with pytest.raises(MemoryError):
    train.train_and_evaluate(mqar(), str(tmp_path))
  assert os.listdir(tmp_path / "checkpoints") == ["2"]


@pytest.mark.parametrize("field, value, message", [
    ("model.mixer", "mamba", "unknown mixer 'mamba'; valid: softmax, linear, retention, gla, s4"),
    ("model.layer_mixers", "gla,attn", "unknown mixer 'attn'; valid: softmax"),
    ("data.dataset", "wikitext", "unknown dataset 'wikitext'; valid: shakespeare, local_text"),
])
def test_unknown_names_fail_before_training(tmp_path, field, value, message):
  with pytest.raises(validation.ConfigError, match=message):
    train.train_and_evaluate(mqar(**{field: value}), str(tmp_path))
  assert not os.path.exists(tmp_path / "checkpoints")


@pytest.mark.parametrize("field, value, message", [
    ("model.d_model", 15, "model.d_model=15 must divide by model.num_heads"),
    ("train.learning_rate", 0.0, "train.learning_rate must be > 0"),
    ("train.log_every", 0, "train.num_steps must be >= 0 and train.log_every"),
])
def test_bad_values_are_config_errors(tmp_path, field, value, message):
  """ConfigError (which main reports as one line), not a traceback from deep inside setup."""
  with pytest.raises(validation.ConfigError, match=message):
    train.train_and_evaluate(mqar(**{field: value}), str(tmp_path))


def test_unknown_feature_map_fails_before_training(tmp_path):
  with pytest.raises(validation.ConfigError, match="unknown feature map 'gauss'; valid: identity"):
    train.train_and_evaluate(mqar(**{"model.mixer": "linear", "model.feature_map": "gauss"}), str(tmp_path))


def test_text_round_trip_train_checkpoint_evaluate(tmp_path):
  """2 steps on a local text folder -> checkpoint -> evaluate() restores it: same eval loss as the trainer's
  last eval, bits per byte, length extrapolation via config overrides, a sample after a prompt."""
  corpus = tmp_path / "corpus"
  corpus.mkdir()
  (corpus / "a.txt").write_text(TEXT * 60)
  workdir = str(tmp_path / "run")
  config = tiny("default", **{"data.dataset": "local_text", "data.path": str(corpus),
                              "data.data_dir": str(tmp_path / "tfds"), "train.num_steps": 2})
  final = train.train_and_evaluate(config, workdir)
  result = restored_lib.evaluate(workdir)
  assert result["step"] == 2 and result["split"] == "validation"
  assert result["eval_loss"] == pytest.approx(final["eval_loss"], rel=1e-6)
  assert result["bits_per_byte"] == pytest.approx(result["eval_loss"] / np.log(2), rel=1e-6)  # bytes only
  assert result["perplexity"] == pytest.approx(np.exp(result["eval_loss"]), rel=1e-6)
  assert result["num_params"] == final["num_params"] > 0 and result["state_size"] > 0
  assert "accuracy" not in result and result["eval_batches"] == 2  # the cap eval.max_batches of tiny=True
  longer = restored_lib.evaluate(workdir, config_overrides={"eval.seq_len": "64"}, position_loss=True)
  assert longer["eval_seq_len"] == 64 and len(longer["position_loss"]) == 64
  restored = restored_lib.restore(workdir, step=2)
  text = restored_lib.sample(restored, 5, prompt="Now", temperature=0.0)
  assert text.startswith("Now") and len(text.encode("utf-8", "replace")) >= 4
  with pytest.raises(checkpoint.CheckpointError, match=r"no checkpoint for step 7 .*available steps: 2"):
    restored_lib.evaluate(workdir, step=7)
  with pytest.raises(validation.ConfigError, match="unknown config field 'eval.seqlen'"):
    restored_lib.evaluate(workdir, config_overrides={"eval.seqlen": "64"})


def test_evaluate_empty_workdir_and_corrupt_checkpoint(straight, tmp_path):
  with pytest.raises(checkpoint.CheckpointError, match="no checkpoints in .*nothing has been trained there"):
    restored_lib.evaluate(str(tmp_path))
  workdir = str(tmp_path / "corrupt")
  shutil.copytree(straight[0], workdir)
  shutil.rmtree(os.path.join(workdir, "checkpoints", "4", "state"))
  with pytest.raises(checkpoint.CheckpointError, match="step 4 is damaged: .*checkpoints/4/state/.* is missing"):
    restored_lib.evaluate(workdir, step=4)
  with pytest.raises(checkpoint.CheckpointError, match=r"step 4 is damaged: .*missing; not evaluated: pick another "
                     r"with --step \(available: 2\)"):
    restored_lib.evaluate(workdir)  # a damaged latest is refused, not silently replaced by an older step
  assert restored_lib.evaluate(workdir, step=2)["step"] == 2
  assert json.load(open(os.path.join(workdir, "config.json")))["data"]["dataset"] == "mqar"


def test_random_features_are_checkpointed_and_redrawn_in_bfloat16(tmp_path):
  """favor's projection (non-trainable state) is saved with the params and redrawn before step 3
  (redraw_every=2); bfloat16 compute keeps float32 params."""
  config = mqar(**{"model.mixer": "linear", "model.feature_map": "favor", "model.num_features": 8,
                   "model.redraw_every": 2, "model.dtype": "bfloat16"})
  final = train.train_and_evaluate(config, str(tmp_path))
  assert np.isfinite(final["train_loss"]) and np.isfinite(final["eval_loss"])
  at2, at4 = (restored_lib.restore(str(tmp_path), step=s).state for s in (2, 4))
  projections = lambda state: [np.asarray(x) for x in jax.tree.leaves(state["rest"])]
  assert projections(at2) and all(p.dtype == np.float32 for p in jax.tree.leaves(at4["params"]))
  assert all(not np.array_equal(a, b) for a, b in zip(projections(at2), projections(at4)))
