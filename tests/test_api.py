"""linear_seq.load: restore from the workdir alone (the data moved away), generate, logits, evaluate; profiling.

The run trains the tiny config with the bpe tokenizer, so the restore also covers the tokenizer saved in the
workdir (the byte tokenizer needs no state; tests/test_plugins.py restores a run with a plug-in tokenizer)."""
import glob
import logging
import os
import shutil
import warnings

import numpy as np
import pytest

import linear_seq
from linear_seq import config_lib
from linear_seq import restored
from linear_seq import profiling
from linear_seq import train

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "configs")
TEXT = ("Now is the winter of our discontent made glorious summer by this sun of York; and all the clouds "
        "that lour'd upon our house in the deep bosom of the ocean buried.\n")


def tiny_text(tmp, **overrides):
  """configs/default.py:tiny=True on a small local_text folder, logging every step."""
  corpus = tmp / "corpus"
  corpus.mkdir()
  for i in range(12):
    (corpus / f"doc{i:02d}.txt").write_text(f"{i} " + TEXT * (1 + i % 3))
  config = config_lib.load_sibling(os.path.join(CONFIGS, "default.py"), "default").get_config("tiny=True")
  return config_lib.apply_overrides(config, {"data.dataset": "local_text", "data.path": str(corpus),
                                             "data.data_dir": str(tmp / "tfds"), "train.log_every": 1,
                                             **overrides})


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  """(workdir, config): 3 steps with the bpe tokenizer. Not profiled: the profiler's start took 25-50 s of this
  fixture in a busy test process, and only test_profile_trace_files_appear (slow tier) needs a trace."""
  tmp = tmp_path_factory.mktemp("api")
  workdir = str(tmp / "run")
  config = tiny_text(tmp, **{"train.num_steps": 3, "data.tokenizer": "bpe", "data.vocab_size": 300})
  train.train_and_evaluate(config, workdir)
  return workdir, config


def test_profile_trace_files_appear(tmp_path):
  workdir = str(tmp_path / "run")
  train.train_and_evaluate(tiny_text(tmp_path, **{"train.num_steps": 3, "train.profile_steps": "2,3"}), workdir)
  traces = glob.glob(os.path.join(workdir, profiling.PROFILE_DIR, "plugins", "profile", "*", "*.xplane.pb"))
  assert len(traces) == 1 and os.path.getsize(traces[0]) > 0
  assert glob.glob(os.path.join(workdir, profiling.PROFILE_DIR, "plugins", "profile", "*", "*.trace.json.gz"))


def test_profile_steps_errors():
  assert profiling.parse_steps("") is None and profiling.parse_steps("3,5") == (3, 5)
  for bad in ("3", "5,3", "0,2", "a,b"):
    with pytest.raises(ValueError, match="train.profile_steps"):
      profiling.parse_steps(bad)


def test_load_needs_only_the_workdir_and_uses_every_method(trained, caplog, capsys, tmp_path):
  workdir, config = trained
  moved = str(tmp_path / "moved")
  shutil.move(config.data.path, moved)  # the training text is gone: restoring must not need it
  try:
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING):
      warnings.simplefilter("always")
      run = linear_seq.load(workdir)
    assert not caught and not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    assert run.step == 3 and run.config.to_dict() == config.to_dict() and run.tokenizer.vocab_size == 300
    assert type(run.tokenizer).__name__ == "BPETokenizer" and os.path.exists(os.path.join(workdir, "tokenizer.json"))
    assert linear_seq.load(workdir, step=2).step == 2

    prompt = "Now is the"
    ids = [run.tokenizer.bos_id, *run.tokenizer.encode(prompt)]
    logits = run.logits(prompt)
    assert logits.shape == (len(ids), 300) and logits.dtype == np.float32
    np.testing.assert_array_equal(run.logits(ids), logits)
    np.testing.assert_allclose(run.logits([ids, ids])[1], logits, rtol=1e-6, atol=1e-6)
    # Greedy generation continues with the argmax of the last position's logits, and so on.
    greedy = run.generate(ids, 4, temperature=0)
    assert greedy.shape == (4,) and greedy[0] == int(np.argmax(logits[-1]))
    again = run.logits(ids + greedy[:3].tolist())
    np.testing.assert_array_equal(np.argmax(again[-3:], axis=-1), greedy[1:])
    text = run.generate(prompt, 4, temperature=0)
    assert isinstance(text, str) and text == run.tokenizer.decode(greedy)
    sampled = run.generate(prompt, 4, temperature=1.0, seed=1)   # (same shapes: no new compile)
    assert sampled == run.generate(prompt, 4, temperature=1.0, seed=1)
    assert run.generate(prompt, 4, temperature=1.0, seed=1, top_k=1) == text  # only the argmax left: greedy
    assert run.generate(prompt, 4, temperature=1.0, seed=1, top_k=3, top_p=1e-6) == text
    np.testing.assert_array_equal(run.generate([ids, ids], 4, temperature=0), [greedy, greedy])
    with pytest.raises(ValueError, match="not a folder"):
      run.evaluate()  # only evaluate reads the data
  finally:
    shutil.move(moved, config.data.path)
  capsys.readouterr()
  result = run.evaluate()
  assert capsys.readouterr().err.startswith(f"evaluating the validation split: {result['eval_batches']} batches")
  reference = restored.evaluate(workdir)
  assert result["step"] == 3 and result["eval_loss"] == pytest.approx(reference["eval_loss"], rel=1e-6)
  assert result["bits_per_byte"] == pytest.approx(reference["bits_per_byte"], rel=1e-6)
  longer = run.evaluate(seq_len=64)
  assert longer["eval_seq_len"] == 64 and np.isfinite(longer["eval_loss"])


def test_load_errors(tmp_path):
  with pytest.raises(Exception, match="no checkpoints"):
    linear_seq.load(str(tmp_path))
