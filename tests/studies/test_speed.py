"""linear_seq.studies.speed: crossover interpolation, one tiny measured case end to end, errors."""
import json
import os

from absl import flags
import pytest

from linear_seq import mixers
from linear_seq.studies import speed


def parse(argv: list[str]) -> flags.FlagValues:
  """The speed study's flags parsed from `argv` (into fresh FlagValues: no global flag state)."""
  flag_values = flags.FlagValues()
  speed.define_flags(flag_values)
  flag_values(["speed", *argv])
  return flag_values


def test_crossover():
  lengths = [512, 1024, 2048, 4096]
  softmax = [1.0, 3.0, 10.0, 40.0]
  assert speed.crossover(lengths, [0.5, 1, 2, 4], softmax) == "≤ 512"
  assert speed.crossover(lengths, [9, 9, 9, 9], softmax) == "≈ 1927"  # log ratio 1.10 at 1024, -0.105 at 2048: 1024·2^(1.10/1.20)
  assert speed.crossover(lengths, [99, 99, 99, 99], softmax) == "> 4096"
  assert speed.crossover(lengths, [None, None, 5.0, None], [1.0, None, None, 2.0]) == "n/a"


def test_tiny_run_writes_table_and_plots(tmp_path):
  argv = [f"--workdir={tmp_path}", "--tiny", "--mixers=linear"]
  assert speed.run_flags(parse(argv), argv) == 0
  records = json.load(open(tmp_path / "speed.json"))
  assert [(r["mixer"], r["seq_len"], r["status"]) for r in records] == [("linear", 64, "ok"), ("linear", 128, "ok")]
  for r in records:
    assert r["train_step_s"] > 0 and r["decode_ms_per_token"] > 0 and r["train_memory_bytes"] > 0
  assert records[0]["state_size"] == records[1]["state_size"]  # O(1) state for a linear mixer
  md = open(tmp_path / "results.md").read()
  assert "| linear |" in md and "T=128" in md and "python -m linear_seq.studies.speed --workdir=" in md
  for name in ("train_step_vs_length.png", "decode_vs_context.png", "memory_vs_length.png"):
    assert os.path.getsize(tmp_path / name) > 0


def test_errors(tmp_path):
  message = "unknown mixer 'lstm'; valid: softmax, linear, retention, gla, s4, deltanet, deltaproduct, mamba2"
  with pytest.raises(flags.IllegalFlagValueError, match=message):
    parse([f"--workdir={tmp_path}", "--mixers=lstm"])
  with pytest.raises(flags.IllegalFlagValueError, match=r"--workdir is required \(or --decode_workdir\)"):
    parse(["--tiny"])


def test_softmax_arms():
  assert speed.arms(["softmax", "gla"], ["auto", "chunked+packed"]) == [
      ("softmax", "softmax", {"model.attention_impl": "auto"}, False),
      ("softmax (chunked, packed)", "softmax", {"model.attention_impl": "chunked"}, True),
      ("gla", "gla", {}, False)]
  ids = speed.packed_segment_ids(2, 7, 3)
  assert ids.shape == (2, 7) and ids[1].tolist() == [1, 1, 1, 2, 2, 2, 3]
  with pytest.raises(flags.IllegalFlagValueError, match="unknown softmax arm 'flash'; valid: auto, explicit, "
                     "chunked, cudnn, each optionally \\+packed"):
    parse(["--workdir=/tmp/x", "--softmax_arms=explicit,flash"])


def test_every_built_in_mixer_is_measured_by_default(tmp_path):
  built_in = [n for n, cls in mixers.MIXERS.items() if cls.__module__.startswith("linear_seq.mixers.")]
  assert list(speed.MIXERS) == built_in and parse([f"--workdir={tmp_path}"]).mixers == built_in


def test_tiny_run_of_the_mixers_with_their_own_short_conv(tmp_path):
  argv = [f"--workdir={tmp_path}", "--tiny", "--mixers=deltanet,mamba2"]
  assert speed.run_flags(parse(argv), argv) == 0
  records = json.load(open(tmp_path / "speed.json"))
  assert [(r["mixer"], r["seq_len"], r["status"]) for r in records] == [
      ("deltanet", 64, "ok"), ("deltanet", 128, "ok"), ("mamba2", 64, "ok"), ("mamba2", 128, "ok")]
  assert all(r["train_step_s"] > 0 and r["decode_ms_per_token"] > 0 for r in records)


def test_each_plot_says_what_it_shows(tmp_path, monkeypatch):
  """The timing plots' subtitles say they are medians of timed calls; the memory plot's, that it is XLA's
  analysis of the compiled step (nothing is timed for it)."""
  records = [{"mixer": m, "seq_len": t, "num_params": 1e5, "train_step_s": 1e-3 * t, "decode_ms_per_token": 0.5,
              "train_memory_bytes": 2.0 ** 20 * t} for m in ("softmax", "gla") for t in (64, 128)]
  subtitles = {}
  real = speed.plots_lib.titles
  monkeypatch.setattr(speed.plots_lib, "titles",
                      lambda fig, ax, title, subtitle: (subtitles.setdefault(title, subtitle),
                                                        real(fig, ax, title, subtitle)))
  files = speed.draw(records, str(tmp_path))
  assert {os.path.basename(f) for f in files if f.endswith(".png")} == {
      "train_step_vs_length.png", "decode_vs_context.png", "memory_vs_length.png"}
  memory = subtitles.pop("XLA compiled memory of the training step")
  assert memory == f"LM of 0.10-0.10M parameters · {speed.MEMORY_SUBTITLE} · both axes log scale"
  assert "median" not in memory and "timed" not in memory
  assert len(subtitles) == 2 and all("median of the timed calls" in s for s in subtitles.values())
