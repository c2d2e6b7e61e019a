"""Data: byte tokenizer, TFDS text builders (no TensorFlow), synthetic recall tasks, one grain pipeline.

  info = data.dataset_info(config.data)
  it = data.make_iterator(config.data, 'train', batch_size=B, seq_len=T, seed=s)
  batch = next(it)   # 'inputs', 'targets' int32 [B, T], 'weights' float32 [B, T],
                     # and for text 'segment_ids' int32 [B, T]
"""
from linear_seq.data.registry import DATASETS
from linear_seq.data.registry import corpus_fingerprint
from linear_seq.data.registry import DatasetInfo
from linear_seq.data.registry import dataset_info
from linear_seq.data.registry import make_examples
from linear_seq.data.registry import make_iterator
from linear_seq.data.tokenizer import ByteTokenizer

__all__ = ["DATASETS", "corpus_fingerprint", "DatasetInfo", "dataset_info", "make_examples", "make_iterator", "ByteTokenizer"]
