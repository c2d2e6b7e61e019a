"""Builds the reference layers (transformers' torch code paths) at small random sizes and saves their inputs,
weights, outputs and states as the fixtures of tests/mixers/test_parity.py.

Needs the `parity` extra (torch, transformers; `pip install -e '.[parity]'`), not JAX. Run from the repo root:
  HF_HUB_OFFLINE=1 python scripts/make_parity_fixtures.py            # writes tests/mixers/parity_fixtures/*.npz
  HF_HUB_OFFLINE=1 python scripts/make_parity_fixtures.py --check    # regenerates and compares to the files
Without the `kernels` package transformers runs its torch fallbacks (the chunked and recurrent forms).

Each case (CASES) is one reference layer at a non-default convention; its .npz holds
  meta (JSON: case, reference, the reference config's fields, prefill length, library versions),
  x [B, T, D] and x1 [B, 1, D] (inputs), w/<name> (the layer's state dict), y_full [B, T, D] (one call on x),
  y1 (one call on x1), y_prefill [B, T0, D] (x[:, :T0] with a cache), y_steps [B, T − T0, D] (then one token a
  call), state_prefill/* and state_final/* (the cache after the prefill and after the last step: KV cache k, v
  [B, Hkv, L, K]; or conv [B, C, W] and recurrent S).
"""
import argparse
import json
import os
import sys

import numpy as np

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "mixers", "parity_fixtures")
B = 2

# name: (reference, reference config fields, T, T0). T is never a multiple of the chunk sizes used.
CASES = {
    # GQA (6 query heads on 2 key/value heads), head_dim 12 ≠ 48 / 6.
    "llama_gqa": ("llama", dict(hidden_size=48, num_attention_heads=6, num_key_value_heads=2, head_dim=12,
                                rope_theta=10_000.0, attention_bias=False), 13, 10),
    # Plain multi-head attention with a large rope_theta (Llama 3's 500000).
    "llama_mha_theta": ("llama", dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=4, head_dim=8,
                                      rope_theta=500_000.0, attention_bias=False), 13, 10),
    # n_groups = 2 (B, C and the gated norm's groups), reference chunk 8.
    "mamba2_groups2": ("mamba2", dict(hidden_size=32, expand=2, head_dim=8, num_heads=8, state_size=8, n_groups=2,
                                      conv_kernel=4, layer_norm_epsilon=1e-5, time_step_limit=[0.0, float("inf")],
                                      use_bias=False, use_conv_bias=True, hidden_act="silu", chunk_size=8), 13, 10),
    # One group, dt clamped to [0.01, 0.1] (time_step_limit; HF's one-token path ignores it: no decode steps).
    "mamba2_dt_limit": ("mamba2", dict(hidden_size=24, expand=2, head_dim=12, num_heads=4, state_size=6,
                                       n_groups=1, conv_kernel=4, layer_norm_epsilon=1e-5,
                                       time_step_limit=[0.01, 0.1], use_bias=False, use_conv_bias=True,
                                       hidden_act="silu", chunk_size=8), 13, 13),
    # num_v_heads = 2·num_k_heads, K = 12 ≠ V = 8.
    "qwen3_next_grouped": ("qwen3_next", dict(hidden_size=32, linear_num_key_heads=2, linear_num_value_heads=4,
                                              linear_key_head_dim=12, linear_value_head_dim=8,
                                              linear_conv_kernel_dim=4, rms_norm_eps=1e-6, hidden_act="silu"),
                           13, 10),
    # KDA: per-channel decay, low-rank sigmoid output gate.
    "kimi_kda": ("kimi", dict(hidden_size=32, linear_num_heads=4, linear_head_dim=8, linear_conv_kernel_dim=4,
                              rms_norm_eps=1e-6, hidden_act="silu"), 13, 10),
}


def versions() -> dict:
  import torch
  import transformers
  return {"torch": torch.__version__, "transformers": transformers.__version__, "numpy": np.__version__}


def _layer(reference: str, c: dict):
  """The reference layer (eval mode) and its HF config."""
  if reference == "llama":
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaAttention
    cfg = LlamaConfig(hidden_size=c["hidden_size"], num_attention_heads=c["num_attention_heads"],
                      num_key_value_heads=c["num_key_value_heads"], head_dim=c["head_dim"], num_hidden_layers=1,
                      rope_parameters={"rope_type": "default", "rope_theta": c["rope_theta"]},
                      attention_bias=c["attention_bias"], intermediate_size=4 * c["hidden_size"])
    cfg._attn_implementation = "eager"
    return LlamaAttention(cfg, layer_idx=0).eval(), cfg
  if reference == "mamba2":
    from transformers import Mamba2Config
    from transformers.models.mamba2.modeling_mamba2 import Mamba2Mixer
    cfg = Mamba2Config(num_hidden_layers=1, vocab_size=8, **{**c, "time_step_limit": tuple(c["time_step_limit"])})
    return Mamba2Mixer(cfg, layer_idx=0).eval(), cfg
  if reference == "qwen3_next":
    from transformers import Qwen3NextConfig
    from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextGatedDeltaNet
    cfg = Qwen3NextConfig(num_hidden_layers=1, layer_types=["linear_attention"], vocab_size=8,
                          num_attention_heads=4, num_key_value_heads=2, intermediate_size=64, **c)
    return Qwen3NextGatedDeltaNet(cfg, layer_idx=0).eval(), cfg
  if reference == "kimi":
    from transformers import KimiLinearConfig
    from transformers.models.kimi_linear.modeling_kimi_linear import KimiLinearDeltaAttention
    cfg = KimiLinearConfig(num_hidden_layers=1, layer_types=["linear_attention"], mlp_layer_types=["dense"],
                           vocab_size=8, **c)
    return KimiLinearDeltaAttention(cfg, layer_idx=0).eval(), cfg
  raise ValueError(reference)


def _randomize(reference: str, layer, gen) -> None:
  """Every parameter random and away from its init's special values (norm weights ≠ 1, conv bias ≠ 0, D ≠ 1):
  a convention that mattered only at those values would pass unnoticed."""
  import torch
  with torch.no_grad():
    for name, p in layer.named_parameters():
      shape = p.shape
      if name.endswith("A_log"):
        p.copy_(torch.log(torch.empty(shape).uniform_(1.0, 16.0, generator=gen)))
      elif name.endswith("dt_bias"):
        dt = torch.exp(torch.empty(shape).uniform_(np.log(1e-3), np.log(2e-1), generator=gen))
        p.copy_(dt + torch.log(-torch.expm1(-dt)))
      elif name.endswith("norm.weight") or name == "D" or name.endswith(".D"):
        p.copy_(1.0 + 0.3 * torch.randn(shape, generator=gen))
      elif name.endswith("bias"):
        p.copy_(0.3 * torch.randn(shape, generator=gen))
      else:   # linear and conv weights: fan-in scaled
        fan_in = int(np.prod(shape[1:]))
        p.copy_(torch.randn(shape, generator=gen) / np.sqrt(fan_in))


def _call(reference: str, layer, cfg, x, cache=None, start: int = 0):
  import torch
  if reference != "llama":
    return layer(x, cache_params=cache)
  from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
  T = x.shape[1]
  pos = torch.arange(start, start + T)[None].expand(x.shape[0], -1)
  cos, sin = LlamaRotaryEmbedding(cfg)(x, pos)
  allowed = torch.arange(start + T)[None, :] <= (start + torch.arange(T))[:, None]
  mask = torch.zeros(T, start + T).masked_fill(~allowed, torch.finfo(torch.float32).min)
  y, _ = layer(x, position_embeddings=(cos, sin), attention_mask=mask[None, None].expand(x.shape[0], 1, -1, -1),
               past_key_values=cache)
  return y


def _cache_arrays(reference: str, cache) -> dict:
  layer = cache.layers[0]
  if reference == "llama":
    return {"k": layer.keys.detach().numpy().copy(), "v": layer.values.detach().numpy().copy()}
  return {"conv": layer.conv_states[0].detach().numpy().copy(), "S": layer.recurrent_states[0].detach().numpy().copy()}


def make_case(name: str, seed: int = 0) -> dict:
  """The fixture arrays of one case (see the module docstring)."""
  import torch
  from transformers import DynamicCache
  torch.manual_seed(seed)
  torch.set_default_dtype(torch.float32)
  reference, c, T, T0 = CASES[name]
  layer, cfg = _layer(reference, c)
  gen = torch.Generator().manual_seed(seed)
  _randomize(reference, layer, gen)
  x = torch.randn(B, T, c["hidden_size"], generator=gen)
  x1 = torch.randn(B, 1, c["hidden_size"], generator=gen)
  out = {"x": x.numpy(), "x1": x1.numpy()}
  out.update({f"w/{k}": v.detach().numpy().copy() for k, v in layer.state_dict().items()})
  with torch.no_grad():
    out["y_full"] = _call(reference, layer, cfg, x).numpy()
    out["y1"] = _call(reference, layer, cfg, x1).numpy()
    cache = DynamicCache(config=cfg)
    out["y_prefill"] = _call(reference, layer, cfg, x[:, :T0], cache).numpy()
    out.update({f"state_prefill/{k}": v for k, v in _cache_arrays(reference, cache).items()})
    steps = [_call(reference, layer, cfg, x[:, t:t + 1], cache, start=t).numpy() for t in range(T0, T)]
    out["y_steps"] = np.concatenate(steps, axis=1) if steps else np.zeros((B, 0, c["hidden_size"]), np.float32)
    out.update({f"state_final/{k}": v for k, v in _cache_arrays(reference, cache).items()})
  meta = dict(case=name, reference=reference, config=c, T=T, T0=T0, seed=seed, versions=versions())
  out["meta"] = np.array(json.dumps(meta))
  return out


# Whole models for tests/test_convert.py (--models): name: (class, config fields, save_pretrained options).
MODELS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "convert_fixtures")
MODELS = {
    # GQA (4 query heads on 2 key/value heads), untied head, intermediate 56 = 1.75 d.
    "llama_gqa": ("LlamaForCausalLM", dict(vocab_size=96, hidden_size=32, intermediate_size=56, num_hidden_layers=2,
                                           num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                                           rms_norm_eps=1e-5, tie_word_embeddings=False,
                                           rope_parameters={"rope_type": "default", "rope_theta": 10_000.0}), {}),
    # Multi-head, tied head, Llama 3's rope_theta; saved in shards with an index.
    "llama_tied_sharded": ("LlamaForCausalLM", dict(vocab_size=80, hidden_size=24, intermediate_size=64,
                                                    num_hidden_layers=2, num_attention_heads=3,
                                                    num_key_value_heads=3, rms_norm_eps=1e-6,
                                                    tie_word_embeddings=True,
                                                    rope_parameters={"rope_type": "default",
                                                                     "rope_theta": 500_000.0}),
                           dict(max_shard_size="20KB")),
    # n_groups = 2, untied head.
    "mamba2_groups2": ("Mamba2ForCausalLM", dict(vocab_size=96, hidden_size=32, expand=2, head_dim=8, num_heads=8,
                                                 state_size=8, n_groups=2, num_hidden_layers=2, chunk_size=8,
                                                 layer_norm_epsilon=1e-5, tie_word_embeddings=False), {}),
    # One group, tied head.
    "mamba2_tied": ("Mamba2ForCausalLM", dict(vocab_size=80, hidden_size=24, expand=2, head_dim=12, num_heads=4,
                                              state_size=6, n_groups=1, num_hidden_layers=2, chunk_size=8,
                                              layer_norm_epsilon=1e-5, tie_word_embeddings=True), {}),
}
MODEL_B, MODEL_T, PROMPT_T, NUM_NEW = 2, 21, 8, 32


def make_model(name: str, seed: int = 0, folder: str = "") -> dict:
  """Saves the model `name` (random weights) with save_pretrained under `folder` (MODELS_DIR/name) and returns its
  reference arrays: ids [B, T] and their logits [B, T, V], the mean next-token loss on them, and the greedy
  continuation (NUM_NEW tokens of ids[:, :PROMPT_T], full recompute each step) with each step's top-2 gap."""
  import torch
  import transformers
  torch.manual_seed(seed)
  cls_name, c, save_opts = MODELS[name]
  cfg_cls = transformers.LlamaConfig if cls_name.startswith("Llama") else transformers.Mamba2Config
  cfg = cfg_cls(**c)
  if cls_name.startswith("Llama"):
    cfg._attn_implementation = "eager"
  model = getattr(transformers, cls_name)(cfg).eval()
  gen = torch.Generator().manual_seed(seed)
  _randomize("model", model, gen)
  folder = folder or os.path.join(MODELS_DIR, name)
  model.save_pretrained(folder, **save_opts)
  V = c["vocab_size"]
  ids = torch.randint(0, V, (MODEL_B, MODEL_T), generator=gen)
  out = {"ids": ids.numpy().astype(np.int32)}
  with torch.no_grad():
    logits = model(ids).logits
    out["logits"] = logits.numpy()
    out["loss"] = np.float32(torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, V),
                                                               ids[:, 1:].reshape(-1)).item())
    seq, gaps = ids[:, :PROMPT_T], []
    for _ in range(NUM_NEW):
      last = model(seq).logits[:, -1]
      top2 = torch.topk(last, 2, dim=-1).values
      gaps.append((top2[:, 0] - top2[:, 1]).numpy())
      seq = torch.cat([seq, last.argmax(-1, keepdim=True)], dim=1)
  out["greedy"] = seq[:, PROMPT_T:].numpy().astype(np.int32)
  out["greedy_gap"] = np.stack(gaps, axis=1)
  meta = dict(model=name, cls=cls_name, T=MODEL_T, prompt=PROMPT_T, seed=seed, versions=versions())
  out["meta"] = np.array(json.dumps(meta))
  if name == "llama_gqa":
    _tiny_tokenizer(folder, V)
  np.savez_compressed(os.path.join(folder, "reference.npz"), **out)
  return out


def _tiny_tokenizer(folder: str, vocab_size: int) -> None:
  """A character-level tokenizer.json (Hugging Face `tokenizers`, no merges): ids 0, 1, 2 = <unk>, <s>, </s>
  (the Llama config's bos 1 and eos 2), then printable ASCII characters up to vocab_size − 4 tokens, so the
  embedding has a few padding rows past the tokenizer's vocabulary."""
  import tokenizers
  chars = [chr(i) for i in range(32, 127)][:vocab_size - 7]
  vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{ch: i + 3 for i, ch in enumerate(chars)}}
  tok = tokenizers.Tokenizer(tokenizers.models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
  tok.add_special_tokens(["<unk>", "<s>", "</s>"])
  tok.pre_tokenizer = tokenizers.pre_tokenizers.Split("", "isolated")
  tok.decoder = tokenizers.decoders.Fuse()
  tok.save(os.path.join(folder, "tokenizer.json"))


def load_fixture(path: str) -> tuple[dict, dict]:
  """(meta, arrays) of a fixture file (numpy only)."""
  with np.load(path) as f:
    arrays = {k: f[k] for k in f.files}
  return json.loads(str(arrays.pop("meta"))), arrays


def rel_rms(a, b) -> float:
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  return float(np.sqrt(np.mean((a - b) ** 2)) / max(np.sqrt(np.mean(b ** 2)), 1e-30))


def main(argv) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--check", action="store_true", help="regenerate and compare to the saved fixtures")
  parser.add_argument("--tol", type=float, default=1e-6, help="--check: largest relative RMS difference")
  parser.add_argument("--models", action="store_true", help="write the whole-model fixtures (tests/convert_fixtures)")
  args = parser.parse_args(argv)
  if args.models:
    for name in MODELS:
      out = make_model(name)
      folder = os.path.join(MODELS_DIR, name)
      size = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
      print(f"wrote {os.path.relpath(folder)} ({size} bytes; smallest greedy top-2 gap {out['greedy_gap'].min():.2e})")
    return 0
  os.makedirs(OUT_DIR, exist_ok=True)
  worst, total = 0.0, 0
  for name in CASES:
    arrays = make_case(name)
    path = os.path.join(OUT_DIR, f"{name}.npz")
    if args.check:
      _, saved = load_fixture(path)
      arrays.pop("meta")
      diffs = {k: rel_rms(arrays[k], saved[k]) for k in arrays if arrays[k].size}
      worst = max(worst, max(diffs.values()))
      print(f"{name}: largest relative RMS difference {max(diffs.values()):.2e} ({max(diffs, key=diffs.get)})")
    else:
      np.savez_compressed(path, **arrays)
      total += os.path.getsize(path)
      print(f"wrote {os.path.relpath(path)} ({os.path.getsize(path)} bytes)")
  if args.check:
    print(f"worst {worst:.2e} (tolerance {args.tol:.0e})")
    return int(worst > args.tol)
  print(f"total {total} bytes")
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
