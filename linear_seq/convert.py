"""Converts a local Hugging Face checkpoint folder into a linear_seq workdir (no torch, no network).

  python -m linear_seq.convert --hf_dir=DIR --workdir=OUT
  convert.convert(hf_dir, workdir)          # the same from Python; returns workdir

DIR is a folder as `save_pretrained` writes it: config.json and model.safetensors, or sharded safetensors with
model.safetensors.index.json. Supported architectures (config.json's `architectures`):
  LlamaForCausalLM   -> softmax mixer (GQA, head_dim, rope_theta), SwiGLU MLP (model.mlp=swiglu), RMSNorm eps
  Mamba2ForCausalLM  -> mamba2 mixer (n_groups, time_step_limit), mixer-only blocks (model.mlp_ratio=0)
tied or untied head; model.vocab_size is the checkpoint's embedding rows (a vocabulary padded past the
tokenizer's is kept padded). The mixers' options and weight maps are parity.py's (tests/mixers/test_parity.py).

OUT gets what a training run leaves: config.json (configs/default.py with these model fields), a step-0
checkpoint of the whole train state (fresh optimizer state) with its integrity manifest (checkpoint.py), and the
folder's tokenizer.json when there is one (data.tokenizer=hf: data/hf_tokenizer.py); `linear_seq.load(OUT)`
restores it all (`.logits`, `.generate`, also on text through the tokenizer). The data fields stay
configs/default.py's unless given (--config.data.dataset=...: the data that evaluation and further training
use, `python -m linear_seq.main --config=configs/workdir.py:OUT --workdir=OUT` resumes from the conversion).
Safetensors are read here directly (8-byte little-endian header length, a JSON header, raw little-endian
buffers). Pickled checkpoints (.bin, .pt) are refused: we never unpickle. Any problem (an unsupported
architecture or config field, a missing or extra weight, a shape mismatch) raises ConvertError before
anything is written; OUT is written under a temporary name and renamed when complete.
"""
import argparse
import json
import math
import os
import shutil
import sys
from typing import Any, Mapping, Optional

from absl import logging
from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np

from linear_seq import checkpoint
from linear_seq import config_lib
from linear_seq import model as model_lib
from linear_seq import parity
from linear_seq import sharding
from linear_seq import steps
from linear_seq.data import hf_tokenizer
from linear_seq.data import registry
from linear_seq.data import tokenizer

SUPPORTED = {"LlamaForCausalLM": "llama", "Mamba2ForCausalLM": "mamba2"}
INDEX_FILE = "model.safetensors.index.json"
_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": np.uint16, "I64": np.int64,
           "I32": np.int32}


class ConvertError(ValueError):
  """The folder cannot be converted (the message names why)."""


# ------------------------------------------------------------------------------------------------
# Reading the folder.

def read_safetensors(path: str) -> dict[str, np.ndarray]:
  """name -> float32 array of one .safetensors file (bf16 and f16 widened exactly)."""
  name = os.path.basename(path)
  with open(path, "rb") as f:
    raw = f.read()
  if len(raw) < 8:
    raise ConvertError(f"{name} is not a safetensors file (shorter than its 8-byte header length)")
  n = int.from_bytes(raw[:8], "little")
  try:
    header = json.loads(raw[8:8 + n])
  except (ValueError, UnicodeDecodeError) as e:
    raise ConvertError(f"{name} is not a safetensors file (its header is not JSON: {e})") from None
  base, out = 8 + n, {}
  for key, spec in header.items():
    if key == "__metadata__":
      continue
    if spec["dtype"] not in _DTYPES:
      raise ConvertError(f"{name}: weight {key} has dtype {spec['dtype']}; readable: {', '.join(_DTYPES)}")
    start, end = spec["data_offsets"]
    dtype = np.dtype(_DTYPES[spec["dtype"]]).newbyteorder("<")
    if base + end > len(raw) or (end - start) != dtype.itemsize * math.prod(spec["shape"]):
      raise ConvertError(f"{name}: weight {key} lies outside the file or has the wrong byte count (truncated?)")
    a = np.frombuffer(raw, dtype, count=math.prod(spec["shape"]), offset=base + start).reshape(spec["shape"])
    if spec["dtype"] == "BF16":
      a = (a.astype(np.uint32) << 16).view(np.float32)
    out[key] = a.astype(np.float32)
  return out


def read_weights(hf_dir: str) -> dict[str, np.ndarray]:
  """All weights of the folder: model.safetensors, or the shards its index lists."""
  files = set(os.listdir(hf_dir))
  if INDEX_FILE in files:
    with open(os.path.join(hf_dir, INDEX_FILE)) as f:
      shards = sorted(set(json.load(f)["weight_map"].values()))
  elif "model.safetensors" in files:
    shards = ["model.safetensors"]
  else:
    pickled = sorted(f for f in files if f.endswith((".bin", ".pt", ".pth", ".ckpt")))
    if pickled:
      raise ConvertError(f"{hf_dir} holds a pickle checkpoint ({', '.join(pickled)}), which is refused (we never "
                         f"unpickle): save it as safetensors (save_pretrained(..., safe_serialization=True))")
    raise ConvertError(f"{hf_dir} has neither model.safetensors nor {INDEX_FILE}")
  weights = {}
  for shard in shards:
    if shard not in files:
      raise ConvertError(f"{INDEX_FILE} lists {shard}, which is not in {hf_dir}")
    weights.update(read_safetensors(os.path.join(hf_dir, shard)))
  return weights


def _decode_floats(value):
  """transformers 5 writes inf in config.json as {"__float__": "Infinity"}."""
  if isinstance(value, dict) and set(value) == {"__float__"}:
    return float(value["__float__"])
  if isinstance(value, list):
    return [_decode_floats(v) for v in value]
  return value


def read_config(hf_dir: str) -> tuple[str, dict]:
  """(reference name, config dict) of the folder's config.json; an unsupported architecture raises."""
  path = os.path.join(hf_dir, "config.json")
  if not os.path.isdir(hf_dir):
    raise ConvertError(f"--hf_dir={hf_dir!r} is not a folder")
  if not os.path.isfile(path):
    raise ConvertError(f"no config.json in {hf_dir!r}: is it a save_pretrained folder?")
  with open(path) as f:
    try:
      c = {k: _decode_floats(v) for k, v in json.load(f).items()}
    except ValueError as e:
      raise ConvertError(f"{path} is not valid JSON: {e}") from None
  archs = c.get("architectures") or []
  if len(archs) != 1 or archs[0] not in SUPPORTED:
    raise ConvertError(f"unsupported architecture {', '.join(archs) or '(none in config.json)'}; supported: "
                       f"{', '.join(SUPPORTED)}")
  return SUPPORTED[archs[0]], c


def read_tokenizer(hf_dir: str, c: Mapping[str, Any], vocab_size: int):
  """The folder's tokenizer.json as data/hf_tokenizer.HFTokenizer (bos: bos_token_id; pad: pad_token_id, else
  eos, else bos), or None when there is none."""
  path = os.path.join(hf_dir, "tokenizer.json")
  if not os.path.isfile(path):
    return None
  import tokenizers  # pylint: disable=g-import-not-at-top
  try:
    tok = tokenizers.Tokenizer.from_file(path)
  except Exception as e:  # pylint: disable=broad-except  (tokenizers raises its own Exception type)
    raise ConvertError(f"cannot read {path}: {e}") from None
  bos = c.get("bos_token_id")
  pad = next((v for v in (c.get("pad_token_id"), c.get("eos_token_id"), bos) if isinstance(v, int)), None)
  if not isinstance(bos, int) or pad is None:
    raise ConvertError(f"config field bos_token_id={bos!r}: the tokenizer needs an integer bos id")
  if tok.get_vocab_size() > vocab_size:
    raise ConvertError(f"tokenizer.json has {tok.get_vocab_size()} tokens, the embedding only {vocab_size}")
  return hf_tokenizer.HFTokenizer(tok, bos, pad)


# ------------------------------------------------------------------------------------------------
# The model fields and the weight names.

def _require(ok: bool, field: str, value: Any, why: str) -> None:
  if not ok:
    raise ConvertError(f"config field {field}={value!r} cannot be reproduced: {why}")


def model_fields(reference: str, c: Mapping[str, Any], vocab_size: int) -> dict:
  """The `config.model` fields that reproduce the model (vocab_size: the checkpoint's embedding rows)."""
  tie = bool(c.get("tie_word_embeddings", False))
  try:
    options = parity.options(reference, parity.fields(reference, c))
  except ValueError as e:
    raise ConvertError(str(e).replace("parity: ", "config: ")) from None
  if reference == "llama":
    rope = c.get("rope_parameters") or c.get("rope_scaling") or {}
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    _require(rope_type == "default", "rope_parameters.rope_type", rope_type, "only the default rope is built")
    _require(c.get("hidden_act", "silu") == "silu", "hidden_act", c.get("hidden_act"), "the SwiGLU MLP uses silu")
    _require(not c.get("mlp_bias", False), "mlp_bias", c.get("mlp_bias"), "the SwiGLU MLP has no biases")
    fields = dict(options, mlp="swiglu", mlp_hidden=int(c["intermediate_size"]), norm="rms",
                  norm_eps=float(c["rms_norm_eps"]))
  else:
    fields = dict(options, mlp_ratio=0, norm="rms", norm_eps=float(c["layer_norm_epsilon"]))
    H = c["num_heads"]
    fields["num_heads"] = H if c["hidden_size"] % H == 0 else 1   # (unused by mamba2: only d_model % it)
  fields.update(num_layers=int(c["num_hidden_layers"]), vocab_size=int(vocab_size), tie_embeddings=tie,
                conv_width=0, input_pos="none", dtype="float32", init="default")
  return fields


def expected_shapes(reference: str, c: Mapping[str, Any], V: int, tie: bool) -> dict[str, tuple]:
  """HF weight name -> shape of every weight the model needs."""
  D, L = c["hidden_size"], c["num_hidden_layers"]
  out = {}
  if reference == "llama":
    H, Hkv = c["num_attention_heads"], c["num_key_value_heads"]
    hd, inter = c.get("head_dim") or D // H, c["intermediate_size"]
    out["model.embed_tokens.weight"] = (V, D)
    for i in range(L):
      p = f"model.layers.{i}."
      out.update({p + "input_layernorm.weight": (D,), p + "post_attention_layernorm.weight": (D,),
                  p + "self_attn.q_proj.weight": (H * hd, D), p + "self_attn.k_proj.weight": (Hkv * hd, D),
                  p + "self_attn.v_proj.weight": (Hkv * hd, D), p + "self_attn.o_proj.weight": (D, H * hd),
                  p + "mlp.gate_proj.weight": (inter, D), p + "mlp.up_proj.weight": (inter, D),
                  p + "mlp.down_proj.weight": (D, inter)})
    out["model.norm.weight"] = (D,)
  else:
    E, H, G, N, W = c["expand"] * D, c["num_heads"], c["n_groups"], c["state_size"], c["conv_kernel"]
    out["backbone.embeddings.weight"] = (V, D)
    for i in range(L):
      p = f"backbone.layers.{i}."
      out.update({p + "norm.weight": (D,), p + "mixer.in_proj.weight": (2 * E + 2 * G * N + H, D),
                  p + "mixer.conv1d.weight": (E + 2 * G * N, 1, W), p + "mixer.conv1d.bias": (E + 2 * G * N,),
                  p + "mixer.A_log": (H,), p + "mixer.dt_bias": (H,), p + "mixer.D": (H,),
                  p + "mixer.norm.weight": (E,), p + "mixer.out_proj.weight": (D, E)})
    out["backbone.norm_f.weight"] = (D,)
  if not tie:
    out["lm_head.weight"] = (V, D)
  return out


def check_weights(weights: Mapping[str, np.ndarray], expected: Mapping[str, tuple]) -> None:
  """Missing, extra and wrongly shaped weights raise ConvertError naming the first few."""
  missing = [k for k in expected if k not in weights]
  extra = sorted(k for k in weights if k not in expected)
  for what, names in (("missing", missing), ("unexpected extra", extra)):
    if names:
      more = f" and {len(names) - 3} more" if len(names) > 3 else ""
      raise ConvertError(f"{what} weight{'s' if len(names) > 1 else ''}: {', '.join(names[:3])}{more}")
  for k, shape in expected.items():
    if tuple(weights[k].shape) != tuple(shape):
      raise ConvertError(f"weight {k} has shape {list(weights[k].shape)}, the config implies {list(shape)}")


def _set(param, value) -> None:
  param[...] = jnp.asarray(np.asarray(value, np.float32), param[...].dtype)


def load_weights(lm, reference: str, c: Mapping[str, Any], w: Mapping[str, np.ndarray]) -> None:
  """Writes the checked HF weights `w` into the LM `lm` (model.LM built with model_fields), in place."""
  pc = parity.fields(reference, c)
  emb, final, layer, mixer_name, mixer_norm = (
      ("model.embed_tokens.weight", "model.norm.weight", "model.layers.{}.", "self_attn.", "input_layernorm")
      if reference == "llama" else
      ("backbone.embeddings.weight", "backbone.norm_f.weight", "backbone.layers.{}.", "mixer.", "norm"))
  _set(lm.embed.embedding, w[emb])
  _set(lm.final_norm.scale, w[final])
  if lm.head is not None:
    _set(lm.head.kernel, w["lm_head.weight"].T)
  for i, block in enumerate(lm.blocks):
    p = layer.format(i)
    _set(block.mixer_norm.scale, w[p + mixer_norm + ".weight"])
    parity.load(reference, block.mixer, parity.weights_under(w, p + mixer_name), pc)
    if reference == "llama":
      _set(block.mlp_norm.scale, w[p + "post_attention_layernorm.weight"])
      for ours, theirs in (("gate", "gate_proj"), ("up", "up_proj"), ("down", "down_proj")):
        _set(getattr(block.mlp, ours).kernel, w[f"{p}mlp.{theirs}.weight"].T)


# ------------------------------------------------------------------------------------------------
# The workdir.

def _config(fields: Mapping[str, Any], overrides: Mapping[str, Any]):
  """configs/default.py with the model fields, then the user's overrides (which may not touch those fields)."""
  fixed = sorted(k for k in overrides if k.startswith("model.") and k[len("model."):] in fields)
  if fixed:
    raise ConvertError(f"{', '.join(fixed)} come from the checkpoint and cannot be overridden")
  default = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs", "default.py")
  config = config_lib.load_config(default)
  config = config_lib.apply_overrides(config, {f"model.{k}": v for k, v in fields.items()})
  return config_lib.apply_overrides(config, overrides)


def _warn_data_vocab(config, V: int) -> None:
  """Warns when the workdir's data would produce token ids past the embedding (evaluation and training would
  read ids the model has no row for): the converted model itself is fine for ids < V."""
  d = config.data
  kind = registry.DATASETS.get(d.dataset)
  n = (int(d.vocab_size) if kind == "synthetic" or d.get("tokenizer", "byte") == "bpe" else
       tokenizer.ByteTokenizer.vocab_size if d.get("tokenizer", "byte") == "byte" else 0)
  if n > V:
    logging.warning("data.dataset=%s has %d token ids, the converted embedding %d rows: set --config.data.* "
                    "before evaluating or training this workdir", d.dataset, n, V)


def convert(hf_dir: str, workdir: str, overrides: Optional[Mapping[str, Any]] = None) -> str:
  """Converts the save_pretrained folder `hf_dir` into the new workdir `workdir` (see the module docstring);
  returns workdir. overrides: dotted config fields for the workdir's config (e.g. {'data.dataset': 'mqar'}:
  the data further training uses), as `--config.data.dataset=mqar` on the command line. Raises ConvertError
  (nothing written) when the folder cannot be converted."""
  if os.path.exists(workdir) and (not os.path.isdir(workdir) or os.listdir(workdir)):
    raise ConvertError(f"--workdir={workdir!r} exists and is not empty: convert into a new folder")
  reference, c = read_config(hf_dir)
  weights = read_weights(hf_dir)
  emb = "model.embed_tokens.weight" if reference == "llama" else "backbone.embeddings.weight"
  if emb not in weights:
    raise ConvertError(f"missing weight: {emb}")
  V = int(weights[emb].shape[0])
  if V < int(c.get("vocab_size") or 0):
    raise ConvertError(f"weight {emb} has {V} rows, fewer than config vocab_size={c['vocab_size']}")
  fields = model_fields(reference, c, V)
  check_weights(weights, expected_shapes(reference, c, V, fields["tie_embeddings"]))
  tokenizer = read_tokenizer(hf_dir, c, V)
  if tokenizer is not None:
    overrides = {"data.tokenizer": "hf", **(overrides or {})}
  try:
    config = _config(fields, overrides or {})
    cfg = model_lib.ModelConfig.from_config(config.model)
  except ConvertError:
    raise
  except ValueError as e:
    raise ConvertError(f"config: {e}") from None
  _warn_data_vocab(config, V)
  lm = model_lib.LM(cfg, rngs=nnx.Rngs(config.seed))
  load_weights(lm, reference, c, weights)
  _, params, rest = nnx.split(lm, nnx.Param, ...)
  static, abstract, shardings = steps.setup(config, V, sharding.make_mesh())
  state = {"step": jnp.zeros((), jnp.int32), "params": params, "rest": rest,
           "opt_state": static.tx.init(params)}   # a fresh optimizer state for further training
  if jax.tree.structure(state) != jax.tree.structure(abstract):
    raise AssertionError("convert: the converted state does not have the train state's structure")
  state = jax.device_put(state, shardings)

  workdir = os.path.abspath(workdir)
  tmp = workdir.rstrip("/") + ".converting"
  if os.path.exists(tmp):
    shutil.rmtree(tmp)
  try:
    config_lib.save_config(config, tmp)
    ckpt = checkpoint.Checkpointer(tmp, use_async=False)
    ckpt.save(0, state, {})
    ckpt.close()
    if tokenizer is not None:
      tokenizer.save(tmp)
    if os.path.isdir(workdir):
      os.rmdir(workdir)
    os.replace(tmp, workdir)
  finally:
    if os.path.exists(tmp):
      shutil.rmtree(tmp)
  return workdir


def main(argv: Optional[list[str]] = None) -> int:
  parser = argparse.ArgumentParser(prog="python -m linear_seq.convert", description=__doc__.split("\n")[0],
                                   epilog="--config.FIELD=VALUE sets a field of the workdir's config")
  parser.add_argument("--hf_dir", required=True, help="a local save_pretrained folder")
  parser.add_argument("--workdir", required=True, help="the new linear_seq workdir")
  parser.add_argument("--dry_run", action="store_true", help="parse the flags, print what would run, exit 0")
  try:
    overrides, rest = config_lib.override_args(sys.argv[1:] if argv is None else argv)
  except ValueError as e:
    sys.stderr.write(f"error: {e}\n")
    return 1
  args = parser.parse_args(rest)
  if args.dry_run:
    print(f"dry run: convert {args.hf_dir} into {args.workdir}" + "".join(
        f" --config.{k}={v}" for k, v in overrides.items()))
    return 0
  try:
    out = convert(args.hf_dir, args.workdir, overrides)
  except ConvertError as e:
    sys.stderr.write(f"error: {e}\n")
    return 1
  print(f"converted {args.hf_dir} into {out}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
