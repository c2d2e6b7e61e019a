"""Plug-ins from outside the package (examples/): a mixer, a dataset and a tokenizer via --config.imports."""
import json
import os
import subprocess
import sys

from flax import nnx
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

import linear_seq
from linear_seq import config_lib
from linear_seq import metrics
from linear_seq import plugins
from linear_seq import validation
from tests.helpers import REPO
from tests.helpers import cli_env

EXAMPLES = os.path.join(REPO, "examples")


@pytest.fixture
def examples_on_path(monkeypatch):
  monkeypatch.syspath_prepend(EXAMPLES)


def test_import_errors_and_file_form(tmp_path):
  config = ml_collections.ConfigDict({"imports": "no_such_plugin_module"})
  with pytest.raises(ValueError, match="config.imports: cannot import 'no_such_plugin_module'"):
    plugins.import_modules(config)
  (tmp_path / "plugin_by_file.py").write_text(
      "import linear_seq.mixers\n@linear_seq.mixers.register('by_file')\nclass M: pass\n")
  assert plugins.import_modules(ml_collections.ConfigDict({"imports": f" {tmp_path}/plugin_by_file.py ,"})) == [
      f"{tmp_path}/plugin_by_file.py"]
  assert linear_seq.mixers.get("by_file").__name__ == "M"
  assert plugins.import_modules(ml_collections.ConfigDict({})) == []   # old configs lack the field


def test_example_mixer_matches_a_loop_and_resets_at_documents(examples_on_path):
  import my_mixer  # pylint: disable=g-import-not-at-top
  mixer = my_mixer.EMAMixer(8, 2, rngs=nnx.Rngs(0))
  x = jax.random.normal(jax.random.key(1), (2, 21, 8))
  seg = jnp.asarray([[1] * 21, [1] * 9 + [2] * 12])
  # Jitted as the trainer calls it (one compile per shape instead of every op compiled eagerly: ~2x cheaper).
  call = nnx.jit(lambda m, x, state, seg: m(x, state=state, segment_ids=seg))
  y, state = call(mixer, x, None, seg)
  # Slow reference: the moving average by a Python loop, reset at the document boundary.
  v = np.asarray(mixer.value(x)).reshape(2, 21, 2, 4)
  a = 1 / (1 + np.exp(-np.asarray(mixer.decay_logit[...])))
  S, outs = np.zeros((2, 2, 4)), []
  for t in range(21):
    S = np.where((np.asarray(seg)[:, t] != np.asarray(seg)[:, max(t - 1, 0)])[:, None, None], 0.0, S)
    S = a[None, :, None] * S + (1 - a)[None, :, None] * v[:, t]
    outs.append(S.reshape(2, 8))
  ref = np.asarray(mixer.out(jnp.asarray(np.stack(outs, 1), jnp.float32) * jax.nn.sigmoid(mixer.gate(x))))
  np.testing.assert_allclose(np.asarray(y), ref, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(np.asarray(state)[:, :, 0], S, rtol=1e-5, atol=1e-6)
  y1, s1 = call(mixer, x[:, :13], None, seg[:, :13])          # prefill + continue == one pass
  y2, _ = call(mixer, x[:, 13:], s1, seg[:, 13:])
  np.testing.assert_allclose(np.concatenate([y1, y2], 1), np.asarray(y), rtol=1e-5, atol=1e-5)


def test_example_mixer_holds_the_mixer_contract(examples_on_path):
  import my_mixer  # pylint: disable=g-import-not-at-top
  report = linear_seq.mixers.check_mixer(my_mixer.EMAMixer)   # raises MixerContractError naming a failed check
  assert report.mixer == "ema" and report.passed
  assert report["prefill_decode"].error < 1e-5 and report["packed_documents"].error < 1e-5
  assert report["chunk_vs_recurrent"].passed is None  # one form: skipped, said so


def test_example_tokenizer_round_trip(examples_on_path):
  import my_tokenizer  # pylint: disable=g-import-not-at-top
  tok = my_tokenizer.NibbleTokenizer()
  for s in ["", "ab", "naïve ✓"]:
    ids = tok.encode(s)
    assert tok.decode(ids) == s and max(ids, default=0) < 16
    assert tok.token_bytes()[ids].sum() == len(s.encode())


def test_cli_trains_with_a_plugin_mixer_dataset_and_tokenizer(tmp_path, examples_on_path):
  workdir = str(tmp_path / "run")
  env = cli_env()
  env["PYTHONPATH"] = os.pathsep.join([EXAMPLES, env["PYTHONPATH"]])
  args = ["--config=configs/default.py:tiny=True", f"--workdir={workdir}", "--config.train.num_steps=2",
          "--config.imports=my_mixer,my_dataset,my_tokenizer", "--config.model.mixer=ema",
          "--config.data.dataset=counting", "--config.data.tokenizer=nibble",
          f"--config.data.data_dir={tmp_path / 'tfds'}"]
  proc = subprocess.run([sys.executable, "-m", "linear_seq.main", *args], cwd=REPO, env=env,
                        capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  last = [r for r in metrics.read_metrics(workdir) if "eval_loss" in r][-1]
  # nibble tokens stand for half a byte each: bits/byte = 2 · nats/token / ln 2.
  assert last["step"] == 2 and last["bits_per_byte"] == pytest.approx(2 * last["eval_loss"] / np.log(2), rel=1e-5)
  assert json.load(open(os.path.join(workdir, "config.json")))["imports"] == "my_mixer,my_dataset,my_tokenizer"
  run = linear_seq.load(workdir)                  # imports the plug-ins named in the saved config
  assert type(run.model.blocks[0].mixer).__name__ == "EMAMixer" and run.tokenizer.vocab_size == 18
  assert isinstance(run.generate("one two", 4, temperature=0), str)
  with pytest.raises(validation.ConfigError, match="unknown mixer 'emma'; valid: .*ema"):
    validation.check_config(config_lib.apply_overrides(run.config, {"model.mixer": "emma"}))
