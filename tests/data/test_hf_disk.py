"""hf_disk: a datasets save_to_disk folder or parquet files, through the TFDS/grain text path."""
import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from linear_seq import data
from linear_seq.data import hf_disk
from linear_seq.data import registry
from linear_seq.data import text

TRAIN = sorted(f"train row {i}: to be or not to be." for i in range(7))
VALID = sorted(["validation row: ÿ unicode ✓", "second validation row"])


def _docs(config, split):
  builder = registry._text_builder(config)
  text.prepare(builder)
  source = builder.as_data_source(split=split)
  return sorted(source[i]["text"].decode() for i in range(len(source)))  # (TFDS orders examples by key hash)


def _hf_config(data_config, path, **fields):
  data_config.dataset, data_config.path = "hf_disk", str(path)
  for k, v in fields.items():
    setattr(data_config, k, v)
  return data_config


def test_save_to_disk_dataset_dict(tmp_path, data_config):
  dd = datasets.DatasetDict({"train": datasets.Dataset.from_dict({"body": TRAIN + [""], "n": list(range(8))}),
                             "validation": datasets.Dataset.from_dict({"body": VALID, "n": [0, 1]})})
  dd.save_to_disk(str(tmp_path / "hf"))
  config = _hf_config(data_config, tmp_path / "hf", text_column="body")
  info = data.dataset_info(config)
  assert info.kind == "text" and info.vocab_size == 258
  assert _docs(config, "train") == TRAIN and _docs(config, "validation") == VALID   # empty row skipped
  it = data.make_iterator(config, "validation", batch_size=2, seq_len=8, seed=0, repeat=False)
  assert sum(float(b["weights"].sum()) for b in it) == sum(len(v.encode()) for v in VALID)
  config.text_column = "text"
  with pytest.raises(ValueError, match="has no column 'text'.*columns: body, n"):
    data.make_iterator(config, "train", batch_size=2, seq_len=8, seed=0)


def test_single_dataset_every_tenth_row_is_validation(tmp_path, data_config):
  rows = [f"row {i}" for i in range(20)]
  datasets.Dataset.from_dict({"text": rows}).save_to_disk(str(tmp_path / "single"))
  config = _hf_config(data_config, tmp_path / "single")
  assert _docs(config, "validation") == ["row 19", "row 9"]
  assert _docs(config, "train") == sorted(r for r in rows if r not in ("row 9", "row 19"))


def test_parquet_files_split_by_name(tmp_path, data_config):
  (tmp_path / "pq" / "data").mkdir(parents=True)
  pq.write_table(pa.table({"text": TRAIN[:4]}), tmp_path / "pq" / "data" / "train-00000-of-00002.parquet")
  pq.write_table(pa.table({"text": TRAIN[4:]}), tmp_path / "pq" / "data" / "train-00001-of-00002.parquet")
  pq.write_table(pa.table({"text": VALID}), tmp_path / "pq" / "data" / "test-00000-of-00001.parquet")
  config = _hf_config(data_config, tmp_path / "pq")
  assert _docs(config, "train") == TRAIN and _docs(config, "validation") == VALID  # 'test' plays validation
  assert hf_disk.split_of("data/validation-0.parquet") == "validation" and hf_disk.split_of("x.parquet") == ""


def test_errors(tmp_path, data_config):
  config = _hf_config(data_config, "")
  with pytest.raises(ValueError, match="dataset hf_disk needs"):
    data.dataset_info(config)
  (tmp_path / "empty").mkdir()
  config.path = str(tmp_path / "empty")
  with pytest.raises(ValueError, match="neither a datasets save_to_disk folder"):
    data.dataset_info(config)
