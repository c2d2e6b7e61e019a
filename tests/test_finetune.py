"""Fine-tuning a converted model into a new workdir (train.init_from) and evaluating it on text with its own
tokenizer.json (data.tokenizer=hf): the converted tiny Llama fixture (tests/convert_fixtures/llama_gqa, whose
character-level tokenizer.json has no entry for 'y', 'z', 'é' or a newline: each is one <unk>) on a two-file
local_text corpus (the last file is the validation split)."""
import hashlib
import math
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import linear_seq
from linear_seq import checkpoint
from linear_seq import config_lib
from linear_seq import convert
from linear_seq import data
from linear_seq import restored
from linear_seq import metrics
from linear_seq import train
from linear_seq import validation
from linear_seq.data import hf_tokenizer
from tests.helpers import REPO
from tests.helpers import TEXT
from tests.helpers import cli_env

FIXTURE = os.path.join(REPO, "tests", "convert_fixtures", "llama_gqa")
VALID = "Hi there, a café by the bay\nzz yes."   # 35 characters, 36 UTF-8 bytes; 7 of the tokens are <unk>
# The converted workdir's data: training rows of 32 tokens, the evaluation in one row of 64 (the whole
# validation document in one context, so the test can recompute its loss from run.logits).
DATA = {"data.dataset": "local_text", "data.seq_len": 32, "data.batch_size": 4, "eval.batch_size": 4,
        "eval.seq_len": 64, "train.num_steps": 4, "train.warmup_steps": 1, "train.learning_rate": 3e-3,
        "train.log_every": 1, "train.eval_every": 2, "train.checkpoint_every": 2, "eval.interim_max_batches": 1}


def _snapshot(folder):
  """{relative path: (size, mtime_ns, sha256)} of every file under folder."""
  out = {}
  for root, _, names in os.walk(folder):
    for name in names:
      path = os.path.join(root, name)
      with open(path, "rb") as f:
        out[os.path.relpath(path, folder)] = (os.path.getsize(path), os.stat(path).st_mtime_ns,
                                              hashlib.sha256(f.read()).hexdigest())
  return out


def _train_lines(workdir):
  return [(r["step"], r["train_loss"]) for r in metrics.read_metrics(workdir) if "train_loss" in r]


@pytest.fixture(scope="module")
def source(tmp_path_factory):
  """The converted fixture, its config naming the corpus (a.txt: train, b.txt: validation)."""
  root = tmp_path_factory.mktemp("finetune")
  corpus = root / "corpus"
  corpus.mkdir()
  (corpus / "a.txt").write_text(TEXT * 4)
  (corpus / "b.txt").write_text(VALID)
  overrides = {**DATA, "data.path": str(corpus), "data.data_dir": str(root / "tfds")}
  return convert.convert(FIXTURE, str(root / "converted"), overrides)


def _config(source, **overrides):
  """The converted workdir's config (configs/workdir.py:SOURCE), fine-tuning from it."""
  config = config_lib.load_config(os.path.join(REPO, f"configs/workdir.py:{source}"))
  return config_lib.apply_overrides(config, {"train.init_from": source, **overrides})


@pytest.fixture(scope="module")
def finetuned(source, tmp_path_factory):
  """4 steps from the converted model into a new workdir (checkpoints 2 and 4): (workdir, final metrics,
  the source's files before, the source's files after)."""
  before = _snapshot(source)
  workdir = str(tmp_path_factory.mktemp("ft") / "w")
  final = train.train_and_evaluate(_config(source), workdir)
  return workdir, final, before, _snapshot(source)


def test_encode_with_bytes_counts_the_bytes_of_the_text(source):
  tok = linear_seq.load(source).tokenizer
  ids, counts = tok.encode_with_bytes(VALID.encode())
  assert ids.tolist() == tok.encode(VALID) and len(ids) == len(VALID)   # one token a character
  assert counts.sum() == len(VALID.encode()) == 36
  np.testing.assert_array_equal(counts, [len(ch.encode()) for ch in VALID])   # 'é': one <unk>, 2 bytes
  # A per-id table gives the specials (here <unk>) no bytes: it would not count the text's bytes.
  assert tok.token_bytes()[ids].sum() < counts.sum()


def test_a_vocabulary_past_uint16_keeps_its_ids():
  """Llama 3's 128k ids do not fit the uint16 streams of the byte and bpe tokenizers: hf's are uint32 then."""
  import tokenizers  # pylint: disable=g-import-not-at-top
  words = {f"w{i}": i for i in range(70_000)}
  tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(words, unk_token="w0"))
  tok.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
  ids, counts = hf_tokenizer.HFTokenizer(tok, bos_id=69_999, pad_id=0).encode_with_bytes(b"w69998 w7  w65536")
  assert ids.dtype == np.uint32 and ids.tolist() == [69_998, 7, 65_536]
  assert counts.tolist() == [6, 3, 8] and counts.sum() == len("w69998 w7  w65536")   # (spaces: the next token's)


def test_text_evaluation_with_the_workdirs_tokenizer(source):
  """evaluate and load().evaluate tokenize the corpus with the workdir's tokenizer.json: the loss is the model's
  on BOS + the validation document's ids, bits per byte its total over the document's UTF-8 bytes."""
  run = linear_seq.load(source)
  result = restored.evaluate(source)
  ids = np.asarray([run.tokenizer.bos_id, *run.tokenizer.encode(VALID)])
  logits = np.asarray(run.logits(ids), np.float64)[:-1]
  logz = np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1)) + logits.max(-1)
  nll = logz - logits[np.arange(len(ids) - 1), ids[1:]]
  assert result["eval_tokens"] == len(VALID) == 35 and result["eval_batches"] == 1
  assert result["eval_loss"] == pytest.approx(nll.mean(), rel=1e-5)
  assert result["perplexity"] == pytest.approx(math.exp(nll.mean()), rel=1e-5)
  assert result["bits_per_byte"] == pytest.approx(nll.sum() / math.log(2) / len(VALID.encode()), rel=1e-5)
  again = run.evaluate()
  assert {k: again[k] for k in ("eval_loss", "bits_per_byte", "eval_tokens")} == {
      k: result[k] for k in ("eval_loss", "bits_per_byte", "eval_tokens")}
  assert config_lib.load_saved(source).data.tokenizer_dir == ""   # resolved in memory only


def test_finetuning_starts_from_the_source_and_lowers_the_loss(source, finetuned):
  workdir, final, before, after = finetuned
  assert after == before   # the source: every file byte-identical, none touched, none added
  records = metrics.read_metrics(workdir)
  assert records[0] == {"step": 0, "init_from": {"workdir": os.path.abspath(source), "step": 0}}
  lines = _train_lines(workdir)
  assert [s for s, _ in lines] == [1, 2, 3, 4] and lines[-1][1] < lines[0][1]
  assert final["eval_loss"] < restored.evaluate(source)["eval_loss"]
  # Step 1's loss is the source model's on the first batch of this config's data order: its parameters.
  config = train.resolve_tokenizer_dir(_config(source), workdir)
  batch = next(data.make_iterator(config.data, "train", batch_size=4, seq_len=32, seed=0))
  logits = np.asarray(linear_seq.load(source).logits(batch["inputs"]), np.float64)
  logz = np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1)) + logits.max(-1)
  picked = np.take_along_axis(logits, batch["targets"][..., None], -1)[..., 0]
  expected = float(((logz - picked) * batch["weights"]).sum() / batch["weights"].sum())
  assert lines[0][1] == pytest.approx(expected, rel=1e-5)
  # The new workdir is a run of its own: its step 0 is the fine-tuning's, its optimizer state fresh.
  assert sorted(os.listdir(os.path.join(workdir, "checkpoints"))) == ["2", "4"]
  assert os.path.isfile(os.path.join(workdir, "hf_tokenizer.json"))   # so it evaluates without the source
  saved = config_lib.load_saved(workdir)
  assert saved.train.init_from == source and saved.data.tokenizer_dir == ""
  assert linear_seq.load(workdir).step == 4


def test_resume_takes_precedence_over_init_from(source, finetuned, tmp_path, caplog):
  """A fine-tuning killed after step 2 resumes from its own checkpoint (exactly: the straight run's losses),
  without reading train.init_from (the source is moved away meanwhile)."""
  workdir, _, _, _ = finetuned
  resumed = str(tmp_path / "resumed")
  shutil.copytree(workdir, resumed)
  shutil.rmtree(os.path.join(resumed, "checkpoints", "4"))   # as if killed after step 2
  config, away = _config(source), str(tmp_path / "away")
  shutil.move(source, away)
  try:
    with caplog.at_level("INFO"):
      final = train.train_and_evaluate(config, resumed)
  finally:
    shutil.move(away, source)
  assert f"train.init_from={source} is not read: this workdir's own checkpoint takes precedence" in caplog.text
  assert "resumed from" in caplog.text and final["step"] == 4
  assert _train_lines(resumed) == _train_lines(workdir)
  strip = lambda rs: [{k: v for k, v in r.items() if k not in ("tokens_per_sec", "wall_time")} for r in rs]
  assert strip(metrics.read_metrics(resumed)) == strip(metrics.read_metrics(workdir))


def test_a_finished_finetuning_reruns_without_init_from(finetuned, tmp_path, caplog):
  """Resuming needs neither train.init_from nor its folder; dropping the field is no config change to warn of."""
  workdir, final, _, _ = finetuned
  workdir = str(shutil.copytree(workdir, tmp_path / "w"))
  config = config_lib.apply_overrides(config_lib.load_saved(workdir), {"train.init_from": ""})
  with caplog.at_level("INFO"):
    again = train.train_and_evaluate(config, workdir)
  assert again["step"] == 4 and again["eval_loss"] == final["eval_loss"]
  assert "changed config fields" not in caplog.text and "is already trained to step 4" in caplog.text


def _damage(folder):
  """Flips a byte of the largest file of the step-0 checkpoint (its manifest then names it)."""
  step = os.path.join(folder, "checkpoints", "0")
  files = [os.path.join(r, n) for r, _, ns in os.walk(step) for n in ns if n != "manifest.json"]
  path = max(files, key=os.path.getsize)
  raw = bytearray(open(path, "rb").read())
  raw[len(raw) // 2] ^= 0xFF
  open(path, "wb").write(bytes(raw))


BAD = {
    "missing": (lambda src, tmp: (str(tmp / "nowhere"), {}), validation.ConfigError,
                "is not a folder (a workdir to fine-tune from)"),
    "not a workdir": (lambda src, tmp: (str(tmp), {}), validation.ConfigError, "has no config.json: not a workdir"),
    "corrupt": (lambda src, tmp: (_damaged_copy(src, tmp), {}), checkpoint.CheckpointError,
                "checkpoint of step 0 is damaged"),
    "architecture": (lambda src, tmp: (src, {"model.num_layers": 1}), validation.ConfigError,
                     "holds another architecture: model.num_layers is 2 there, 1 here"),
    "vocabulary": (lambda src, tmp: (src, {"model.vocab_size": 128}), validation.ConfigError,
                   "model.vocab_size is 96 there, 128 here"),
}


def _damaged_copy(source, tmp):
  copy = str(tmp / "damaged")
  shutil.copytree(source, copy)
  _damage(copy)
  return copy


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_init_from_is_one_line_and_writes_nothing(source, tmp_path, case):
  make, error, message = BAD[case]
  init_from, overrides = make(source, tmp_path)
  before = _snapshot(init_from) if os.path.isdir(init_from) else None
  workdir = tmp_path / "ft"
  with pytest.raises(error) as raised:
    train.train_and_evaluate(_config(source, **{"train.init_from": init_from, **overrides}), str(workdir))
  text = str(raised.value)
  assert text.startswith(f"train.init_from={init_from!r}") and message in text and "\n" not in text, text
  assert not workdir.exists()
  if before is not None:
    assert _snapshot(init_from) == before   # (a damaged source is not quarantined either)


def test_command_line_error(source, tmp_path):
  proc = subprocess.run([sys.executable, "-m", "linear_seq.main", f"--config=configs/workdir.py:{source}",
                         f"--workdir={tmp_path / 'ft'}", f"--config.train.init_from={tmp_path / 'nowhere'}"],
                        capture_output=True, text=True, cwd=REPO, env=cli_env(), timeout=300)
  assert proc.returncode == 1, proc.stderr
  assert proc.stderr == f"error: train.init_from='{tmp_path / 'nowhere'}' is not a folder (a workdir to fine-tune " \
                        "from)\n", proc.stderr
  assert not (tmp_path / "ft").exists()


def test_workdir_config_of_an_older_workdir_takes_the_new_fields_defaults(tmp_path):
  """configs/workdir.py on a config.json written before train.init_from / data.tokenizer_dir existed: those
  fields come from configs/default.py (so `--config.train.init_from=` works), the saved values stay."""
  saved = config_lib.to_dict(config_lib.load_config(os.path.join(REPO, "configs/default.py")))
  del saved["train"]["init_from"], saved["data"]["tokenizer_dir"]
  saved["model"]["num_layers"] = 3
  with open(tmp_path / "config.json", "w") as f:
    json.dump(saved, f)
  config = config_lib.load_config(os.path.join(REPO, f"configs/workdir.py:{tmp_path}"))
  assert config.model.num_layers == 3 and config.train.init_from == "" and config.data.tokenizer_dir == ""
  assert config_lib.apply_overrides(config, {"train.init_from": "/src"}).train.init_from == "/src"
