"""Data: tokenizers (byte, bpe), TFDS text builders (no TensorFlow), synthetic recall and state-tracking tasks,
one grain pipeline.

  info = data.dataset_info(config.data)
  it = data.make_iterator(config.data, 'train', batch_size=B, seq_len=T, seed=s)
  batch = next(it)   # 'inputs', 'targets' int32 [B, T], 'weights' float32 [B, T],
                     # and for text 'segment_ids' int32 [B, T], 'target_bytes' float32 [B, T]
Plug-ins: @data.register_dataset('name'[, kind='synthetic']), @data.register_tokenizer('name') (registry.py,
tokenizer.py).
"""
from linear_seq.data.registry import DATASETS
from linear_seq.data.registry import corpus_fingerprint
from linear_seq.data.registry import DatasetInfo
from linear_seq.data.registry import dataset_info
from linear_seq.data.registry import make_examples
from linear_seq.data.registry import make_iterator
from linear_seq.data.registry import register_dataset
from linear_seq.data.registry import restored_info
from linear_seq.data.registry import save_tokenizer
from linear_seq.data.tokenizer import ByteTokenizer
from linear_seq.data.tokenizer import TOKENIZERS
from linear_seq.data.tokenizer import register_tokenizer

__all__ = ["DATASETS", "corpus_fingerprint", "DatasetInfo", "dataset_info", "make_examples", "make_iterator",
           "register_dataset", "restored_info", "save_tokenizer", "ByteTokenizer", "TOKENIZERS", "register_tokenizer"]
