"""linear_seq.convert: Hugging Face Llama / Mamba-2 save_pretrained folders -> workdirs, checked without torch
against the logits, loss and greedy continuation the reference computed (tests/convert_fixtures/*/reference.npz,
written by `scripts/make_parity_fixtures.py --models`), and every bad input's one `error:` line."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import linear_seq
from linear_seq import config_lib
from linear_seq import convert

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "convert_fixtures")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GAP = 1e-4   # greedy tokens are compared where the reference's top-2 logit gap exceeds this
# Data for further training of the converted mamba2_tied (vocabulary 80): a tiny MQAR task.
TRAIN = {"data.dataset": "mqar", "data.vocab_size": 64, "data.seq_len": 32, "data.batch_size": 4,
         "train.num_steps": 2, "train.eval_every": 2, "eval.max_batches": 1}


def _reference(name):
  with np.load(os.path.join(FIXTURES, name, "reference.npz")) as f:
    return {k: f[k] for k in f.files}


def _loss(logits_BTV, ids_BT):
  logits = np.asarray(logits_BTV, np.float64)[:, :-1]
  logz = np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1)) + logits.max(-1)
  picked = np.take_along_axis(logits, ids_BT[:, 1:, None], axis=-1)[..., 0]
  return float(np.mean(logz - picked))


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
  """name -> the restored Run of the converted fixture (each converted once for the module)."""
  root, runs = tmp_path_factory.mktemp("converted"), {}

  def get(name):
    if name not in runs:
      runs[name] = linear_seq.load(convert.convert(os.path.join(FIXTURES, name), str(root / name),
                                                   TRAIN if name == "mamba2_tied" else None))
    return runs[name]
  return get


@pytest.mark.parametrize("name", ["llama_gqa", "llama_tied_sharded", "mamba2_groups2", "mamba2_tied"])
def test_logits_and_loss_match_the_reference(converted, name):
  ref, run = _reference(name), converted(name)
  logits = run.logits(ref["ids"])
  assert logits.shape == ref["logits"].shape
  rel = np.abs(logits - ref["logits"]).max() / np.abs(ref["logits"]).max()
  assert rel <= 1e-5, rel
  assert _loss(logits, ref["ids"]) == pytest.approx(float(ref["loss"]), rel=1e-5)
  cfg = run.config.model
  assert cfg.vocab_size == ref["logits"].shape[-1]
  assert (cfg.mixer, cfg.mlp) == (("softmax", "swiglu") if name.startswith("llama") else ("mamba2", "gelu"))


@pytest.mark.parametrize("name", ["llama_gqa", "mamba2_groups2"])
def test_greedy_continuation_matches_the_reference(converted, name):
  ref, run = _reference(name), converted(name)
  assert ref["greedy_gap"].min() > GAP, "the reference's argmax is ambiguous somewhere: regenerate the fixture"
  prompt = ref["ids"][:, :json.loads(str(ref["meta"]))["prompt"]]
  out = run.generate(prompt, ref["greedy"].shape[1], temperature=0)
  np.testing.assert_array_equal(out, ref["greedy"])


def test_tokenizer_json_travels_with_the_model(converted):
  run = converted("llama_gqa")   # its folder has a character-level tokenizer.json (bos 1, 92 of 96 rows)
  assert run.config.data.tokenizer == "hf" and run.tokenizer.bos_id == 1 and run.tokenizer.vocab_size == 92
  ids = [1] + [ord(ch) - 32 + 3 for ch in "Hi there"]
  assert run.tokenizer.encode("Hi there") == ids[1:]
  np.testing.assert_array_equal(run.logits("Hi there"), run.logits(ids))
  text = run.generate("Hi there", 6, temperature=0)
  assert text == run.tokenizer.decode(run.generate(ids, 6, temperature=0))


def test_workdir_has_a_verified_checkpoint(converted, tmp_path):
  run = converted("llama_gqa")
  step_dir = os.path.join(run.workdir, "checkpoints", "0")
  assert os.path.isfile(os.path.join(step_dir, "manifest.json"))
  assert run.step == 0
  assert not os.path.exists(run.workdir + ".converting")


def test_evaluate_and_further_training(converted, tmp_path):
  from linear_seq import restored  # pylint: disable=g-import-not-at-top
  from linear_seq import train  # pylint: disable=g-import-not-at-top
  workdir = str(tmp_path / "w")
  shutil.copytree(converted("mamba2_tied").workdir, workdir)
  result = restored.evaluate(workdir)
  assert result["step"] == 0 and np.isfinite(result["eval_loss"])
  config = config_lib.load_config(f"{ROOT}/configs/workdir.py:{workdir}")
  out = train.train_and_evaluate(config, workdir)   # resumes from the converted step 0
  assert out["step"] == 2 and np.isfinite(out["train_loss"])
  assert sorted(os.listdir(os.path.join(workdir, "checkpoints"))) == ["0", "2"]


@pytest.mark.parity
def test_live_references(tmp_path):
  """With the `parity` extra: rebuild every model now, check it reproduces its reference (1e-6 relative) and
  convert the live folder. With the extra in a separate venv: PYTHONPATH=$PWD:<that venv>/lib/python3.11/
  site-packages HF_HUB_OFFLINE=1."""
  pytest.importorskip("torch", reason="needs the parity extra (pip install -e '.[parity]')")
  pytest.importorskip("transformers", reason="needs the parity extra (pip install -e '.[parity]')")
  import importlib.util  # pylint: disable=g-import-not-at-top
  spec = importlib.util.spec_from_file_location("fixtures", os.path.join(ROOT, "scripts", "make_parity_fixtures.py"))
  fixtures = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(fixtures)
  for name in fixtures.MODELS:
    live = fixtures.make_model(name, folder=str(tmp_path / name))
    saved = _reference(name)
    assert fixtures.rel_rms(live["logits"], saved["logits"]) <= 1e-6, name
    np.testing.assert_array_equal(live["greedy"], saved["greedy"])
    run = linear_seq.load(convert.convert(str(tmp_path / name), str(tmp_path / f"{name}_w")))
    logits = run.logits(live["ids"])
    assert np.abs(logits - live["logits"]).max() / np.abs(live["logits"]).max() <= 1e-5, name


# ------------------------------------------------------------------------------------------------
# Bad input: one `error:` line, nothing written.

def _write_safetensors(path, arrays):
  header, offset, blobs = {}, 0, []
  for k, a in arrays.items():
    b = np.ascontiguousarray(a, "<f4").tobytes()
    header[k] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
    offset += len(b)
    blobs.append(b)
  h = json.dumps(header).encode()
  with open(path, "wb") as f:
    f.write(len(h).to_bytes(8, "little") + h + b"".join(blobs))


def _copy(tmp_path, name="llama_gqa"):
  folder = tmp_path / "hf"
  shutil.copytree(os.path.join(FIXTURES, name), folder)
  return folder


def _edit_config(folder, **changes):
  c = json.loads((folder / "config.json").read_text())
  c.update(changes)
  (folder / "config.json").write_text(json.dumps(c))


def _edit_weights(folder, fn):
  path = str(folder / "model.safetensors")
  w = convert.read_safetensors(path)
  fn(w)
  _write_safetensors(path, w)


def _pickle(folder):
  os.remove(folder / "model.safetensors")
  (folder / "pytorch_model.bin").write_bytes(b"\x80\x04not read")


BAD = {
    "architecture": (lambda f: _edit_config(f, architectures=["GPT2LMHeadModel"]),
                     "unsupported architecture GPT2LMHeadModel; supported: LlamaForCausalLM, Mamba2ForCausalLM"),
    "pickle": (_pickle, "pickle checkpoint (pytorch_model.bin), which is refused (we never unpickle)"),
    "missing": (lambda f: _edit_weights(f, lambda w: w.pop("model.layers.1.mlp.up_proj.weight")),
                "missing weight: model.layers.1.mlp.up_proj.weight"),
    "extra": (lambda f: _edit_weights(f, lambda w: w.update({"model.layers.0.self_attn.q_norm.weight": w[
        "model.norm.weight"]})), "unexpected extra weight: model.layers.0.self_attn.q_norm.weight"),
    "shape": (lambda f: _edit_weights(f, lambda w: w.update({"model.layers.0.mlp.down_proj.weight": w[
        "model.layers.0.mlp.down_proj.weight"][:, :50]})),
              "weight model.layers.0.mlp.down_proj.weight has shape [32, 50], the config implies [32, 56]"),
    "hidden_act": (lambda f: _edit_config(f, hidden_act="gelu"),
                   "config field hidden_act='gelu' cannot be reproduced"),
    "rope": (lambda f: _edit_config(f, rope_parameters={"rope_type": "llama3", "rope_theta": 1e4, "factor": 8.0}),
             "config field rope_parameters.rope_type='llama3' cannot be reproduced"),
    "attention_bias": (lambda f: _edit_config(f, attention_bias=True), "attention_bias=True"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_error_line_and_writes_nothing(tmp_path, capsys, case):
  make_bad, message = BAD[case]
  folder = _copy(tmp_path)
  make_bad(folder)
  out = tmp_path / "out"
  assert convert.main([f"--hf_dir={folder}", f"--workdir={out}"]) == 1
  err = capsys.readouterr().err
  assert err.startswith("error: ") and err.count("\n") == 1 and message in err, err
  assert sorted(os.listdir(tmp_path)) == ["hf"]


def test_missing_shard(tmp_path, capsys):
  folder = _copy(tmp_path, "llama_tied_sharded")
  os.remove(folder / "model-00002-of-00004.safetensors")
  assert convert.main([f"--hf_dir={folder}", f"--workdir={tmp_path / 'out'}"]) == 1
  err = capsys.readouterr().err
  assert err.startswith("error: model.safetensors.index.json lists model-00002-of-00004.safetensors, which is "
                        "not in") and err.count("\n") == 1, err
  assert sorted(os.listdir(tmp_path)) == ["hf"]


def test_mamba2_config_field_we_cannot_reproduce(tmp_path, capsys):
  folder = _copy(tmp_path, "mamba2_tied")
  _edit_config(folder, conv_kernel=3)
  assert convert.main([f"--hf_dir={folder}", f"--workdir={tmp_path / 'out'}"]) == 1
  err = capsys.readouterr().err
  assert err.startswith("error: config: a short conv of width 3") and err.count("\n") == 1, err
  assert sorted(os.listdir(tmp_path)) == ["hf"]


def test_non_empty_workdir_is_refused(tmp_path, capsys):
  (tmp_path / "out").mkdir()
  (tmp_path / "out" / "keep.txt").write_text("x")
  assert convert.main([f"--hf_dir={os.path.join(FIXTURES, 'llama_gqa')}", f"--workdir={tmp_path / 'out'}"]) == 1
  assert "exists and is not empty" in capsys.readouterr().err
  assert os.listdir(tmp_path / "out") == ["keep.txt"]


def test_command_line_error(tmp_path):
  folder = _copy(tmp_path)
  _pickle(folder)
  proc = subprocess.run([sys.executable, "-m", "linear_seq.convert", f"--hf_dir={folder}",
                         f"--workdir={tmp_path / 'out'}"], capture_output=True, text=True, cwd=ROOT,
                        env={**os.environ, "PYTHONPATH": ROOT}, timeout=120)
  assert proc.returncode == 1 and proc.stdout == ""
  assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1 and "never unpickle" in proc.stderr
  assert not (tmp_path / "out").exists()


def test_bfloat16_safetensors_are_widened_exactly(tmp_path):
  a = np.array([[1.0, -2.5], [3.140625, 1e-3]], np.float32)
  bf16 = (a.view(np.uint32) >> 16).astype("<u2")
  h = json.dumps({"x": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]}}).encode()
  path = tmp_path / "w.safetensors"
  path.write_bytes(len(h).to_bytes(8, "little") + h + bf16.tobytes())
  np.testing.assert_array_equal(convert.read_safetensors(str(path))["x"], (bf16.astype(np.uint32) << 16).view(
      np.float32))
