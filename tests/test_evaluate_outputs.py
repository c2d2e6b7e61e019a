"""linear_seq.evaluate's output files: eval.json for the default evaluation, eval_<split>_T<len>.json for
others (a length-extrapolation run does not replace eval.json), and no file replaced silently."""
import json
import os
import types

import ml_collections
import pytest

from linear_seq import evaluate
from linear_seq import restored


def run_main(monkeypatch, workdir, *args, split="validation", step=None, output="", overwrite=False,
             position_loss=False, result_step=2):
  """evaluate.main with restore / evaluation replaced by stubs (no model): only the file logic runs."""
  config = ml_collections.ConfigDict({"eval": {"seq_len": 0}, "data": {"seq_len": 16}})
  evaluated = []

  def restore(workdir, step, overrides):
    c = ml_collections.ConfigDict(config.to_dict())
    c.eval.seq_len = int(overrides.get("eval.seq_len", 0))
    return types.SimpleNamespace(config=c)

  def evaluate_restored(*unused_args, position_loss=False, **unused_kwargs):
    evaluated.append(True)
    return {"step": result_step, "split": split, "eval_loss": 1.5} | (
        {"position_loss": [1.0, 2.0]} if position_loss else {})

  monkeypatch.setattr(evaluate.sharding, "maybe_initialize_distributed", lambda: None)
  monkeypatch.setattr(restored, "restore", restore)
  monkeypatch.setattr(restored, "evaluate_restored", evaluate_restored)
  monkeypatch.setattr(evaluate, "FLAGS", types.SimpleNamespace(
      workdir=str(workdir), step=step, split=split, output=output, overwrite=overwrite,
      position_loss=position_loss, generate=0))
  evaluate.main(["evaluate", *args])
  return bool(evaluated)


def test_extrapolation_writes_its_own_file(tmp_path, monkeypatch):
  run_main(monkeypatch, tmp_path, position_loss=True)
  run_main(monkeypatch, tmp_path, "--config.eval.seq_len=64", position_loss=True)
  run_main(monkeypatch, tmp_path, split="test")
  run_main(monkeypatch, tmp_path, step=1)
  assert sorted(os.listdir(tmp_path)) == ["eval.json", "eval_test_T16.json", "eval_validation_T16_step1.json",
                                          "eval_validation_T64.json", "position_loss.json",
                                          "position_loss_validation_T64.json"]


def test_existing_outputs_are_not_replaced_silently(tmp_path, monkeypatch, capsys):
  assert run_main(monkeypatch, tmp_path, "--config.eval.seq_len=64")
  with pytest.raises(SystemExit) as e:  # refused before evaluating
    evaluated = run_main(monkeypatch, tmp_path, "--config.eval.seq_len=64")
  assert e.value.code == 1
  err = capsys.readouterr().err
  assert err.startswith(f"error: {tmp_path}/eval_validation_T64.json exists (step 2, validation, T=None); not "
                        "replaced: pass --overwrite") and len(err.splitlines()) == 1, err
  assert run_main(monkeypatch, tmp_path, "--config.eval.seq_len=64", overwrite=True, result_step=3)
  assert json.load(open(tmp_path / "eval_validation_T64.json"))["step"] == 3
  out = str(tmp_path / "mine.json")
  run_main(monkeypatch, tmp_path, output=out)
  with pytest.raises(SystemExit):
    run_main(monkeypatch, tmp_path, output=out)
  # eval.json (the default evaluation) is updated by a newer one, which says so
  run_main(monkeypatch, tmp_path)
  capsys.readouterr()
  run_main(monkeypatch, tmp_path, result_step=5)
  assert json.load(open(tmp_path / "eval.json"))["step"] == 5
  assert f"replaced {tmp_path}/eval.json (was: step 2, validation, T=None)" in capsys.readouterr().err


def test_restart_removes_every_evaluation_output(tmp_path):
  from linear_seq import workdir  # pylint: disable=g-import-not-at-top
  for name in ("eval.json", "eval_validation_T64.json", "position_loss_test_T16.json", "log.txt", "notes.json"):
    (tmp_path / name).write_text("{}")
  assert workdir.restart(str(tmp_path)) == ["eval.json", "eval_validation_T64.json", "position_loss_test_T16.json"]
  assert sorted(os.listdir(tmp_path)) == ["log.txt", "notes.json"]
