"""The Python API: `linear_seq.load(workdir)` restores a trained run from its workdir alone.

  import linear_seq
  run = linear_seq.load("runs/default")                 # latest checkpoint (step=S for another)
  print("ROMEO:" + run.generate("ROMEO:", 200, temperature=0.8, top_p=0.9))   # also top_k=40
  logits = run.logits("To be, or not")                  # [T, V] float32 (a str is encoded after BOS)
  print(run.evaluate()["bits_per_byte"])                # the eval.json dict; the only call that reads data

Restoring reads config.json, the tokenizer saved beside it (WORKDIR/tokenizer.json for bpe) and the
checkpoint; the training data is needed only by `evaluate`. `run.model` is the NNX LM (model.py),
`run.config` the resolved config, `run.tokenizer` the tokenizer (None for synthetic tasks).
"""
import contextlib
import dataclasses
import functools
import logging
import sys
from typing import Any, Optional, Sequence, Union

from flax import nnx
import jax
import ml_collections
import numpy as np

from linear_seq import config_lib
from linear_seq import model as model_lib
from linear_seq import restored as restored_lib
from linear_seq import steps

Ids = Union[Sequence[int], np.ndarray]


@functools.partial(jax.jit, static_argnums=0)
def _logits(graphdef, params, rest, tokens_BT):
  logits, _ = nnx.merge(graphdef, params, rest)(tokens_BT)
  return logits


@dataclasses.dataclass
class Run:
  """A restored run: model, config, tokenizer, and generate / logits / evaluate."""
  workdir: str
  step: int
  config: ml_collections.ConfigDict
  model: model_lib.LM
  tokenizer: Any
  restored: restored_lib.Restored

  def _ids(self, prompt: Union[str, Ids]) -> tuple[np.ndarray, bool]:
    """-> (int32 [B, T0], whether the input was one sequence). A str is BOS + its encoding."""
    if isinstance(prompt, str):
      if self.tokenizer is None:
        raise ValueError(f"{self.config.data.dataset!r} is a synthetic task: pass token ids, not text")
      return np.asarray([[self.tokenizer.bos_id, *self.tokenizer.encode(prompt)]], np.int32), True
    ids = np.asarray(prompt, np.int32)
    if ids.ndim not in (1, 2) or ids.shape[-1] < 1:
      raise ValueError(f"token ids must have shape [T] or [B, T] with T >= 1, got {list(ids.shape)}")
    return (ids[None] if ids.ndim == 1 else ids), ids.ndim == 1

  def generate(self, prompt: Union[str, Ids], num_tokens: int, temperature: float = 1.0,
               seed: int = 0, *, top_k: int = 0, top_p: float = 1.0) -> Union[str, np.ndarray]:
    """The continuation of `prompt` (num_tokens sampled tokens; temperature 0 = greedy; top_k > 0 samples among
    the k most likely tokens, top_p < 1 among the nucleus of that probability, both composable:
    model.filter_logits), decoded with the recurrent state. A str prompt (BOS is prepended) gives a str; ids
    [T] or [B, T] (used as given) give the new ids, int32 [num_tokens] or [B, num_tokens]."""
    ids, single = self._ids(prompt)
    out = np.asarray(model_lib.generate(self.model, ids, int(num_tokens), temperature=float(temperature),
                                        top_k=top_k, top_p=float(top_p),
                                        key=jax.random.key(seed)))[:, ids.shape[1]:]
    if isinstance(prompt, str):
      return self.tokenizer.decode(out[0])
    return out[0] if single else out

  def logits(self, ids: Union[str, Ids]) -> np.ndarray:
    """Next-token logits, float32 [T, V] for ids [T] (or a str: BOS + its encoding), [B, T, V] for [B, T]."""
    tokens, single = self._ids(ids)
    s = self.restored.state
    out = np.asarray(_logits(self.restored.static.graphdef, s["params"], s["rest"], tokens))
    return out[0] if single else out

  def evaluate(self, split: str = "validation", seq_len: Optional[int] = None) -> dict[str, Any]:
    """Evaluates the restored checkpoint on `split` (the whole split in windows of seq_len tokens; default
    the config's eval.seq_len) -> the eval.json dict (not written). Reads the data; prints its progress (batches
    done / total) to stderr."""
    r = self.restored
    if seq_len is not None:
      r = r._replace(config=config_lib.apply_overrides(r.config, {"eval.seq_len": int(seq_len)}))
    return restored_lib.evaluate_restored(self.workdir, r, split=split, progress=_print_progress)


def _print_progress(message: str) -> None:
  print(message, file=sys.stderr, flush=True)


class _ReadOnlyNotice(logging.Filter):
  """Drops orbax's 'Given directory is read only' warning: restoring read-only is what we ask for."""

  def filter(self, record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith("Given directory is read only")


@contextlib.contextmanager
def _quiet_read_only_notice():
  logger, notice = logging.getLogger("absl"), _ReadOnlyNotice()
  logger.addFilter(notice)
  try:
    yield
  finally:
    logger.removeFilter(notice)


def load(workdir: str, step: Optional[int] = None) -> Run:
  """Restores the workdir's latest checkpoint (or `step`) with its config and tokenizer, from the workdir alone."""
  with _quiet_read_only_notice():
    r = restored_lib.restore(workdir, step, need_data=False)
  return Run(workdir=workdir, step=int(r.step), config=r.config, model=steps.merge(r.static, r.state),
             tokenizer=r.info.tokenizer, restored=r)
