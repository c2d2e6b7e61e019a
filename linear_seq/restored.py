"""A trained workdir restored for evaluation (the library behind `python -m linear_seq.evaluate` and
`linear_seq.load`): restore(workdir) reads config.json (+ overrides that keep the trained model) and its
checkpoint onto the current devices -> Restored; evaluate / evaluate_restored give the eval.json dict (eval_lib's
evaluation over a split, plus the model's size and the training speed from metrics.jsonl); sample decodes from
it. Nothing here writes a file (evaluate.py's CLI writes eval.json)."""
import os
import statistics
from typing import Any, Callable, Mapping, NamedTuple, Optional

from absl import logging
import jax
import ml_collections
import numpy as np

from linear_seq import checkpoint
from linear_seq import config_lib
from linear_seq import data
from linear_seq import eval_lib
from linear_seq import metrics as metrics_lib
from linear_seq import model as model_lib
from linear_seq import platform
from linear_seq import plugins
from linear_seq import sharding
from linear_seq import steps
from linear_seq import validation
from linear_seq import workdir as workdir_lib
from linear_seq.data import hf_tokenizer


class Restored(NamedTuple):
  config: ml_collections.ConfigDict
  info: Any  # data.DatasetInfo
  static: steps.Static
  step: int
  state: steps.State


def restore(workdir: str, step: Optional[int] = None,
            config_overrides: Optional[Mapping[str, Any]] = None, *, need_data: bool = True) -> Restored:
  """The workdir's config (+ overrides, e.g. {'eval.seq_len': 512}) and its checkpoint (latest or `step`),
  restored onto the current devices. need_data=False reads nothing but the workdir (the tokenizer saved
  there; linear_seq.load), so the data may have moved."""
  ckpt = checkpoint.Checkpointer(workdir, read_only=True) if os.path.isdir(
      checkpoint.checkpoint_dir(workdir)) else None
  if ckpt is None or not ckpt.all_steps():
    if ckpt is not None:
      ckpt.close()
    found = workdir_lib.progress(workdir)
    if found:
      raise checkpoint.CheckpointError(f"no readable checkpoint in {workdir!r}: it shows progress "
                                       f"({'; '.join(found)}) but {checkpoint.checkpoint_dir(workdir)} holds none")
    raise checkpoint.CheckpointError(f"no checkpoints in {workdir!r}: nothing has been trained there yet "
                                     "(python -m linear_seq.main --config=... --workdir=...)")
  try:
    try:
      config = config_lib.load_saved(workdir)
    except FileNotFoundError as e:
      raise validation.ConfigError(f"{workdir} holds checkpoints but no config.json (the config they were trained "
                                   "with): restore it; not evaluated") from e
    except ValueError as e:
      raise validation.ConfigError(str(e)) from e
    if config_overrides:
      saved = config
      try:
        config = config_lib.apply_overrides(config, config_overrides)
      except ValueError as e:
        raise validation.ConfigError(str(e)) from e
      _check_overrides(saved, config)
    # data.tokenizer=hf tokenizes a corpus with the workdir's own hf_tokenizer.json (also for load().evaluate)
    config = hf_tokenizer.with_resolved_dir(config, [workdir])
    info = validation.check_config(config) if need_data else _saved_info(config, workdir)
    try:
      platform.apply(config.train)   # the run's matmul precision and tuning overrides (absent in old configs: '')
    except ValueError as e:
      raise validation.ConfigError(str(e)) from e
    mesh = sharding.make_mesh()
    static, abstract, shardings = steps.setup(config, info.vocab_size, mesh)
    latest = ckpt.latest_step()
    try:  # the latest step unless told which: a damaged latest is refused, not replaced by an older one (one
      # rotated away by a trainer running there meanwhile is replaced by the newest)
      step, state, _ = ckpt.restore(checkpoint.abstract_like(abstract, shardings), step=step, fallback=False)
    except checkpoint.CheckpointError as e:
      older = [s for s in ckpt.all_steps() if s != (latest if step is None else step)]
      hint = (f"; not evaluated: pick another with --step (available: {', '.join(map(str, older))})" if older
              else "; not evaluated (no other checkpoint)")
      raise checkpoint.CheckpointError(f"{e}{hint}") from e
  finally:
    ckpt.close()
  return Restored(config, info, static, step, state)


# Overrides that would evaluate another model than the one trained (refused when they differ from config.json).
# Legal at evaluation: eval.* (seq_len, batch_size, max_batches), data.* but these (e.g. data.path on another
# corpus, data.data_dir), mesh.*, and model.chunk_size (the chunkwise form's block size: the same model).
MODEL_FIELDS = ("model.", "data.tokenizer", "data.vocab_size", "seed")
EVAL_LEGAL_MODEL_FIELDS = ("model.chunk_size",)


def _check_overrides(saved: ml_collections.ConfigDict, config: ml_collections.ConfigDict) -> None:
  bad = [k for k in config_lib.diff(saved, config)
         if k.startswith(MODEL_FIELDS) and k not in EVAL_LEGAL_MODEL_FIELDS]
  if bad:
    flat_saved, flat_new = (config_lib.flatten(config_lib.to_dict(c)) for c in (saved, config))
    also = f" (also {', '.join(bad[1:])})" if bad[1:] else ""
    raise validation.ConfigError(
        f"--config.{bad[0]}={flat_new.get(bad[0])!r} differs from the trained model's {flat_saved.get(bad[0])!r} "
        f"(config.json){also}: that would evaluate another model; overrides allowed at evaluation: eval.*, "
        "mesh.*, data.* (not data.tokenizer, data.vocab_size), model.chunk_size")


def _saved_info(config: ml_collections.ConfigDict, workdir: str):
  try:
    plugins.import_modules(config)
    return data.restored_info(config.data, workdir)
  except (KeyError, ValueError) as e:
    raise validation.ConfigError(str(e).strip("'\"")) from e


def evaluate(workdir: str, step: Optional[int] = None, config_overrides: Optional[Mapping[str, Any]] = None, *,
             split: str = "validation", position_loss: bool = False) -> dict[str, Any]:
  """Restores the checkpoint (latest or `step`) and evaluates `split`; returns the eval.json content (not
  written here). With position_loss the dict also has 'position_loss' (a list over positions)."""
  return evaluate_restored(workdir, restore(workdir, step, config_overrides), split=split,
                           position_loss=position_loss)


def evaluate_restored(workdir: str, r: Restored, *, split: str = "validation", position_loss: bool = False,
                      progress: Callable[[str], None] = logging.info) -> dict[str, Any]:
  """evaluate's dict for a restored run; `progress` gets the evaluation's progress lines (eval_lib.run_eval)."""
  result = eval_lib.run_eval(r.state, r.static, r.config, r.info, split=split, position_loss=position_loss,
                             progress=progress)
  seq_len = eval_lib.eval_seq_len(r.config)
  lm = steps.merge(r.static, r.state)
  out: dict[str, Any] = {"step": int(r.step), "split": split, **result,
                         "num_params": steps.num_params(r.state), "state_size": int(lm.state_size(seq_len)),
                         "eval_seq_len": seq_len, "dataset": r.config.data.dataset,
                         "mixer": ",".join(validation.layer_mixer_names(r.config.model))}
  out.update(_training_speed(workdir, r.step))
  return out


def _training_speed(workdir: str, step: int) -> dict[str, float]:
  train_lines = [m for m in metrics_lib.read_metrics(workdir) if "train_loss" in m and m["step"] <= step]
  speeds = [m["tokens_per_sec"] for m in train_lines[1:] or train_lines if m.get("tokens_per_sec")]
  out = {}
  if speeds:
    out["tokens_per_sec"] = float(statistics.median(speeds))
  if train_lines and "wall_time" in train_lines[-1]:
    out["wall_time"] = float(train_lines[-1]["wall_time"])
  return out


def sample(r: Restored, n: int, *, prompt: str = "", temperature: float = 0.8, seed: int = 0, top_k: int = 0,
           top_p: float = 1.0) -> str:
  """Decodes n tokens after `prompt` with the recurrent state (model_lib.generate: temperature, top_k, top_p
  composable); returns prompt + sample as
  text (text datasets) or as token ids (synthetic tasks: the prompt is the first validation example's first
  half)."""
  lm = steps.merge(r.static, r.state)
  tok = r.info.tokenizer
  if r.info.kind == "text":
    bos = getattr(tok, "bos_id", None)
    prompt_ids = ([bos] if bos is not None else []) + tok.encode(prompt)
  else:
    first = next(iter(eval_lib.make_eval_iterator(r.config)))
    prompt_ids = [int(t) for t in first["inputs"][0, : max(first["inputs"].shape[1] // 2, 1)]]
  prompt_BT = np.asarray([prompt_ids], np.int32)
  tokens = np.asarray(model_lib.generate(lm, prompt_BT, n, temperature=temperature, top_k=top_k, top_p=top_p,
                                         key=jax.random.key(seed)))
  new = tokens[0, len(prompt_ids):].tolist()
  if r.info.kind == "text":
    return prompt + tok.decode(new)
  return f"prompt: {prompt_ids}\nsample: {new}"
