"""metrics.jsonl (truncation on resume), TensorBoard events, plain log lines."""
import json
import os
import time

import pytest

from linear_seq import metrics


def lines(path):
  return [json.loads(l) for l in open(path)]


def test_writer_jsonl_tensorboard_and_truncation_on_resume(tmp_path):
  workdir = str(tmp_path)
  w = metrics.MetricsWriter(workdir, total_steps=4, progress=False)
  for step in (1, 2, 3, 4):
    w.write(step, {"train_loss": 1.0 / step, "learning_rate": 0.1, "tokens_per_sec": 10.0})
  w.write(4, {"eval_loss": float("nan")})
  w.close()
  path = os.path.join(workdir, metrics.METRICS_FILE)
  assert [r["step"] for r in lines(path)] == [1, 2, 3, 4, 4]
  assert lines(path)[-1]["eval_loss"] == "nan"  # strict JSON
  run_dir = os.path.join(workdir, "tensorboard", os.path.basename(workdir))  # the run named after its workdir
  assert metrics.tensorboard_dir(workdir) == run_dir
  assert any(f.startswith("events.out.tfevents") for f in os.listdir(run_dir))
  with open(path, "a") as f:
    f.write('{"step": 5, "train_lo')  # a line cut short by a crash
  w = metrics.MetricsWriter(workdir, start_step=2, total_steps=4, progress=False)  # resumed at step 2
  w.write(3, {"train_loss": 0.5})
  w.close()
  assert [(r["step"], r.get("train_loss")) for r in lines(path)] == [(1, 1.0), (2, 0.5), (3, 0.5)]
  assert metrics.read_metrics(workdir) == lines(path)


def test_plain_log_lines_when_not_a_tty(tmp_path, caplog):
  w = metrics.MetricsWriter(str(tmp_path), total_steps=3, progress=False)
  with caplog.at_level("INFO"):
    w.write(3, {"train_loss": 2.5, "tokens_per_sec": 1234.5})
  w.close()
  assert "step 3/3 (100%): train_loss=2.5 tokens_per_sec=1234" in caplog.text


def test_progress_percent_and_eta_from_the_first_step(tmp_path, caplog):
  w = metrics.MetricsWriter(str(tmp_path), total_steps=100, progress=False)
  assert w.progress(1) == "step 1/100 (1%, ETA ?)"
  w.advance(1)                        # the first step (compilation) ends here
  t0 = w._ref[1]
  assert w.progress(11, now=t0 + 2.5) == "step 11/100 (11%, ETA 22s)"      # 0.25 s/step, 89 steps left
  assert w.progress(51, now=t0 + 200.0) == "step 51/100 (51%, ETA 3m16s)"  # 4 s/step, 49 steps left
  assert metrics.MetricsWriter(str(tmp_path / "b"), enabled=False).progress(7) == "step 7"
  w.close()


def test_tensorboard_tags_are_grouped():
  assert metrics.tensorboard_tag("train_loss", False) == "train/loss"
  assert metrics.tensorboard_tag("learning_rate", False) == "train/learning_rate"
  assert metrics.tensorboard_tag("eval_loss", True) == "eval/loss"
  assert metrics.tensorboard_tag("bits_per_byte", True) == "eval/bits_per_byte"
  assert metrics.tensorboard_tag("eval_accuracy", True) == "eval/accuracy"


def test_progress_bar(tmp_path, capsys):
  w = metrics.MetricsWriter(str(tmp_path), total_steps=3, progress=True)
  w.write(1, {"train_loss": 2.5})
  w.advance(1)
  w.close()
  err = capsys.readouterr().err
  assert "train_loss=2.5" in err and "1/3" in err
  assert "step 1/3 (33%, ETA ?): train_loss=2.5" in err   # train lines stay in the log above the bar


def test_disabled_writer_writes_nothing(tmp_path):
  w = metrics.MetricsWriter(str(tmp_path / "w"), enabled=False)
  w.write(1, {"train_loss": 1.0})
  w.close()
  assert not os.path.exists(tmp_path / "w")


def test_library_info_logs_are_filtered():
  import logging as pylogging
  metrics.quiet_library_logs()
  metrics.quiet_library_logs()  # idempotent
  filters = [f for f in metrics.logging.get_absl_handler().filters if isinstance(f, metrics._LibraryInfoFilter)]
  assert len(filters) == 1
  record = lambda level, path: pylogging.LogRecord("absl", level, path, 1, "msg", None, None)
  assert not filters[0].filter(record(pylogging.INFO, "/site-packages/orbax/checkpoint/x.py"))
  assert filters[0].filter(record(pylogging.WARNING, "/site-packages/orbax/checkpoint/x.py"))
  assert filters[0].filter(record(pylogging.INFO, "/work/linear_seq/train.py"))


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # (the killed worker's)
@pytest.mark.parametrize("delay", [0.0, 0.3])
def test_a_dead_tensorboard_writer_never_blocks(tmp_path, monkeypatch, caplog, delay):
  """tensorboardX's worker thread dies (e.g. a wall-clock step back): metrics keep flowing to metrics.jsonl,
  every write returns at once (its queue of 10 would block the 11th put forever), one warning says so. With a
  delay the worker is alive when the first events arrive and dies after its queue filled (as on a loaded
  machine, where the thread runs late)."""
  import threading  # pylint: disable=g-import-not-at-top
  import tensorboardX.event_file_writer  # pylint: disable=g-import-not-at-top
  def dies(self):  # as threading.Condition.wait's OverflowError after the clock stepped back
    time.sleep(delay)
    raise OverflowError("timeout value is too large")
  monkeypatch.setattr(tensorboardX.event_file_writer._EventLoggerThread, "run", dies)  # pylint: disable=protected-access
  writer = metrics.MetricsWriter(str(tmp_path), total_steps=100, progress=False)
  def write_all():
    for step in range(1, 101):
      writer.write(step, {"train_loss": 1.0 / step, "learning_rate": 0.1})
    writer.close()
  with caplog.at_level("WARNING"):
    thread = threading.Thread(target=write_all, daemon=True)
    thread.start()
    thread.join(timeout=60)
  assert not thread.is_alive(), "a metrics write blocked"
  assert [r["step"] for r in metrics.read_metrics(str(tmp_path))] == list(range(1, 101))
  assert caplog.text.count("TensorBoard writer stopped at") == 1  # (at step N, or at the end: a race)
  assert "(tensorboardX's worker thread died)" in caplog.text
