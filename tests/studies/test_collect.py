"""linear_seq.studies.collect: the trainer's final evaluation at eval.lengths becomes columns named as an
evaluation at that length by an extra command would be (accuracy@T80), and by_length turns them into one row per
length."""
import json

from linear_seq.studies import collect


def _point(tmp_path, lines, eval_json, extra=None):
  point = tmp_path / "p"
  point.mkdir()
  (point / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in lines))
  (point / "eval.json").write_text(json.dumps(eval_json))
  for name, value in (extra or {}).items():
    (point / name).write_text(json.dumps(value))
  return str(point)


LINES = [{"step": 50, "train_loss": 1.0},
         {"step": 50, "eval_loss": 0.9, "eval_accuracy": 0.6, "eval_accuracy_T80": 0.55, "eval_loss_T80": 1.1},
         {"step": 100, "train_loss": 0.5},
         {"step": 100, "eval_loss": 0.4, "eval_accuracy": 0.9, "eval_accuracy_T80": 0.7, "eval_loss_T80": 0.8,
          "eval_tokens_T80": 800, "eval_accuracy_T160": 0.6}]


def test_the_final_evaluation_at_eval_lengths_gives_columns(tmp_path):
  point = _point(tmp_path, LINES, {"step": 100, "accuracy": 0.91, "eval_seq_len": 40})
  row = collect.collect_point(point, {"seed": 0}, "seed=0")
  assert row["accuracy"] == 0.91   # eval.json's, not the trainer's line
  assert (row["accuracy@T80"], row["eval_loss@T80"], row["eval_tokens@T80"], row["accuracy@T160"]) == (
      0.7, 0.8, 800, 0.6)           # the final step's line, not step 50's
  assert "eval_accuracy_T80" not in row and "accuracy@T320" not in row
  bpb = collect.at_lengths([{"step": 3, "bits_per_byte_T512": 2.5, "eval_loss_T512": 1.7}], 3)
  assert bpb == {"bits_per_byte@T512": 2.5, "eval_loss@T512": 1.7}
  assert collect.at_lengths(LINES, None) == {} and collect.at_lengths(LINES, 75) == {}


def test_an_extra_commands_evaluation_at_the_length_wins(tmp_path):
  point = _point(tmp_path, LINES, {"step": 100, "accuracy": 0.91},
                 {"eval_validation_T80.json": {"accuracy": 0.75, "step": 100}})
  row = collect.collect_point(point, {}, "base", extra_files=("eval_validation_T80.json",))
  assert row["accuracy@T80"] == 0.75 and row["accuracy@T160"] == 0.6


def test_unfinished_point_has_no_length_columns(tmp_path):
  point = tmp_path / "p"
  point.mkdir()
  (point / "metrics.jsonl").write_text(json.dumps(LINES[1]) + "\n")
  row = collect.collect_point(str(point), {}, "base")
  assert row["status"] == "no eval.json" and not any("@T" in k for k in row)


def test_by_length_one_row_per_length():
  rows = [{"name": "a", "eval_seq_len": 40, "accuracy": 0.9, "accuracy@T80": 0.7, "accuracy@T160": 0.6},
          {"name": "b", "eval_seq_len": 40, "accuracy": 0.5, "accuracy@T80": None}]
  out = collect.by_length(rows, "accuracy", (40, 80, 160))
  assert [(r["name"], r["length"], r["accuracy"]) for r in out] == [
      ("a", 40, 0.9), ("a", 80, 0.7), ("a", 160, 0.6), ("b", 40, 0.5)]
  assert rows[0]["accuracy"] == 0.9 and "length" not in rows[0]   # copies: the rows are unchanged
