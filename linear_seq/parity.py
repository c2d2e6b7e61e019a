"""Reference layers onto the registered mixers: the config options that reproduce a reference's conventions
and the mapping of its weights onto the mixer's parameters (no torch needed: weights are numpy arrays).

  mixer = parity.build("mamba2", hf_config, weights)   # mixers.get("mamba2").from_config(...) + its weights
  y [B,T,D], state = mixer(x)                          # = the reference layer's output on x

References (the classes of transformers 5.23, their torch code paths; tests/mixers/test_parity.py checks them):
  "llama"      LlamaAttention            -> softmax   (GQA, head_dim, rope_theta)
  "mamba2"     Mamba2Mixer               -> mamba2    (n_groups, grouped gated norm, time_step_limit)
  "qwen3_next" Qwen3NextGatedDeltaNet    -> deltanet, delta_gate=scalar (num_k_heads < num_v_heads, K ≠ V)
  "kimi"       KimiLinearDeltaAttention  -> deltanet, delta_gate=channel (KDA: low-rank sigmoid output gate)
hf_config: the reference config's fields as a dict (HF's names; `REFERENCE_FIELDS` lists the ones read;
`fields(reference, config.to_dict())` extracts them from a whole config or a checkpoint's config.json).
weights: the reference layer's state dict as numpy arrays under torch's names and layouts (`nn.Linear`
weights are [out, in], `nn.Conv1d` weights [C, 1, W] with tap W−1 on the current token).
`state_from_reference` converts a reference's cache (KV cache or conv + recurrent state) to the mixer's layout.
"""
from typing import Any, Mapping

import jax.numpy as jnp
import numpy as np
from flax import nnx

from linear_seq import mixers
from linear_seq.model import ModelConfig

REFERENCE_FIELDS = {
    "llama": ("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim", "rope_theta",
              "attention_bias"),
    "mamba2": ("hidden_size", "expand", "head_dim", "num_heads", "state_size", "n_groups", "conv_kernel",
               "layer_norm_epsilon", "time_step_limit", "use_bias", "use_conv_bias", "hidden_act"),
    "qwen3_next": ("hidden_size", "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                   "linear_value_head_dim", "linear_conv_kernel_dim", "rms_norm_eps", "hidden_act"),
    "kimi": ("hidden_size", "linear_num_heads", "linear_head_dim", "linear_conv_kernel_dim", "rms_norm_eps",
             "hidden_act"),
}


def fields(reference: str, config: Mapping[str, Any]) -> dict:
  """The `REFERENCE_FIELDS` of a reference's whole config dict (`config.to_dict()`, or a config.json):
  Llama's rope_theta from rope_parameters (transformers 5) and head_dim = hidden / heads when unset."""
  if reference not in REFERENCE_FIELDS:
    raise ValueError(f"unknown reference {reference!r}; valid: {', '.join(REFERENCE_FIELDS)}")
  c = dict(config)
  if reference == "llama":
    c.setdefault("rope_theta", (c.get("rope_parameters") or {}).get("rope_theta", 10_000.0))
    c["head_dim"] = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
  if reference == "mamba2":
    c["time_step_limit"] = [float(v) for v in c["time_step_limit"]]
  missing = [k for k in REFERENCE_FIELDS[reference] if k not in c]
  if missing:
    raise ValueError(f"parity: the {reference} config lacks {', '.join(missing)}")
  return {k: c[k] for k in REFERENCE_FIELDS[reference]}


def _require(cond: bool, what: str) -> None:
  if not cond:
    raise ValueError(f"parity: {what} has no equivalent option in linear_seq's mixer")


def options(reference: str, c: Mapping[str, Any]) -> dict:
  """The `config.model` options under which the registered mixer computes what `reference` computes."""
  width = c.get("conv_kernel", c.get("linear_conv_kernel_dim", 4))
  _require(width == 4, f"a short conv of width {width} (the mixers' own convs have width 4)")
  if reference == "llama":
    _require(not c["attention_bias"], "attention_bias=True")
    H = c["num_attention_heads"]
    return dict(mixer="softmax", d_model=c["hidden_size"], num_heads=H, num_kv_heads=c["num_key_value_heads"],
                head_dim=c["head_dim"] or c["hidden_size"] // H, pos_encoding="rope",
                rope_base=float(c["rope_theta"]))
  if reference == "mamba2":
    _require(not c["use_bias"] and c["use_conv_bias"] and c["hidden_act"] == "silu",
             "use_bias=True, use_conv_bias=False or an activation other than silu")
    _require(c["layer_norm_epsilon"] == 1e-5, f"layer_norm_epsilon={c['layer_norm_epsilon']}")
    _require(c["expand"] * c["hidden_size"] == c["num_heads"] * c["head_dim"], "num_heads·head_dim ≠ E")
    lo, hi = c["time_step_limit"]
    _require(lo == 0.0 or np.isfinite(hi), "a lower time_step_limit without an upper one")
    return dict(mixer="mamba2", d_model=c["hidden_size"], mamba_expand=c["expand"], mamba_head_dim=c["head_dim"],
                state_size=c["state_size"], mamba_groups=c["n_groups"], mamba_norm_groups=c["n_groups"],
                dt_limit_min=float(lo), dt_limit_max=float(hi) if np.isfinite(hi) else 0.0, A_init="arange")
  if reference == "qwen3_next":
    _require(c["hidden_act"] == "silu", f"hidden_act={c['hidden_act']}")
    return dict(mixer="deltanet", d_model=c["hidden_size"], num_heads=c["linear_num_value_heads"],
                delta_qk_heads=c["linear_num_key_heads"], head_dim=c["linear_key_head_dim"],
                value_head_dim=c["linear_value_head_dim"], delta_gate="scalar", delta_beta="sigmoid",
                delta_norm_eps=float(c["rms_norm_eps"]), output_gate=True, output_gate_act="swish")
  if reference == "kimi":
    _require(c["hidden_act"] == "silu", f"hidden_act={c['hidden_act']}")
    K = c["linear_head_dim"]
    return dict(mixer="deltanet", d_model=c["hidden_size"], num_heads=c["linear_num_heads"], head_dim=K,
                delta_gate="channel", gate_rank=K, delta_beta="sigmoid", delta_norm_eps=float(c["rms_norm_eps"]),
                output_gate=True, output_gate_act="sigmoid", output_gate_rank=K)
  raise ValueError(f"unknown reference {reference!r}; valid: {', '.join(REFERENCE_FIELDS)}")


def model_config(reference: str, c: Mapping[str, Any], **overrides) -> ModelConfig:
  """ModelConfig with `options(reference, c)` (+ overrides such as chunk_size, mode); vocab_size is unused."""
  return ModelConfig(vocab_size=1, **{**options(reference, c), **overrides})


def _set(param: nnx.Param, value) -> None:
  value = np.asarray(value, np.float32)
  if tuple(param[...].shape) != value.shape:
    raise ValueError(f"parity: shape {value.shape} for a parameter of shape {tuple(param[...].shape)}")
  param[...] = jnp.asarray(value, param[...].dtype)


def _linear(layer: nnx.Linear, w) -> None:
  _set(layer.kernel, np.asarray(w).T)   # torch [out, in] -> flax [in, out]


def _conv(conv, w, b=None) -> None:
  """torch depthwise Conv1d weight [C, 1, W] (tap W−1 = the current token) -> ShortConv kernel[lag] (lag 0 = it)."""
  w = np.asarray(w)[:, 0, ::-1]
  _set(conv.kernel, w.T)
  _set(conv.bias, np.zeros(w.shape[0]) if b is None else b)


def load(reference: str, mixer, w: Mapping[str, np.ndarray], c: Mapping[str, Any]) -> None:
  """Writes the reference layer's weights `w` into `mixer` (built with `options(reference, c)`), in place."""
  if reference == "llama":
    for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
      _linear(getattr(mixer, name), w[f"{name}.weight"])
  elif reference == "mamba2":
    _linear(mixer.in_proj, w["in_proj.weight"])
    _conv(mixer.conv, w["conv1d.weight"], w["conv1d.bias"])
    _set(mixer.A_log, w["A_log"])
    _set(mixer.dt_bias, w["dt_bias"])
    _set(mixer.D_skip, w["D"])
    _set(mixer.out_norm.scale, np.reshape(w["norm.weight"], mixer.out_norm.scale[...].shape))
    _linear(mixer.out_proj, w["out_proj.weight"])
  elif reference == "qwen3_next":
    Hk, H = c["linear_num_key_heads"], c["linear_num_value_heads"]
    K, V, r = c["linear_key_head_dim"], c["linear_value_head_dim"], H // Hk
    # in_proj_qkvz's rows are grouped by key head: [q_h (K), k_h (K), v (r·V), z (r·V)] for each key head h.
    qkvz = np.asarray(w["in_proj_qkvz.weight"]).reshape(Hk, 2 * K + 2 * r * V, -1)
    q, k, v, z = np.split(qkvz, [K, 2 * K, 2 * K + r * V], axis=1)
    for layer, rows in ((mixer.q_proj, q), (mixer.k_proj, k), (mixer.v_proj, v), (mixer.g_proj, z)):
      _linear(layer, rows.reshape(-1, rows.shape[-1]))
    ba = np.asarray(w["in_proj_ba.weight"]).reshape(Hk, 2 * r, -1)   # [b (r), a (r)] per key head
    _linear(mixer.b_proj, ba[:, :r].reshape(H, -1))
    _linear(mixer.a_proj, ba[:, r:].reshape(H, -1))
    _conv(mixer.conv, w["conv1d.weight"], w.get("conv1d.bias"))
    _set(mixer.A_log, w["A_log"])
    _set(mixer.dt_bias, w["dt_bias"])
    _set(mixer.out_norm.scale, np.broadcast_to(w["norm.weight"], (H, V)))
    _linear(mixer.o_proj, w["out_proj.weight"])
  elif reference == "kimi":
    H, K = c["linear_num_heads"], c["linear_head_dim"]
    for name in ("q_proj", "k_proj", "v_proj", "b_proj", "o_proj"):
      _linear(getattr(mixer, name), w[f"{name}.weight"])
    _conv(mixer.conv, w["conv1d.weight"], w.get("conv1d.bias"))
    _linear(mixer.gate_down, w["forget_gate.f_a_proj.weight"])
    _linear(mixer.gate_up, w["forget_gate.f_b_proj.weight"])
    _set(mixer.dt_bias, np.reshape(w["forget_gate.dt_bias"], (H, K)))
    _set(mixer.A_log, np.reshape(w["forget_gate.A_log"], (H,)))
    _linear(mixer.g_proj.layers[0], w["g_a_proj.weight"])
    _linear(mixer.g_proj.layers[1], w["g_b_proj.weight"])
    _set(mixer.out_norm.scale, np.broadcast_to(w["o_norm.weight"], (H, K)))
  else:
    raise ValueError(f"unknown reference {reference!r}; valid: {', '.join(REFERENCE_FIELDS)}")


def weights_under(state: Mapping[str, Any], prefix: str) -> dict:
  """The entries of a whole model's state dict under `prefix` (e.g. 'model.layers.0.linear_attn.'), prefix
  removed, as float32 numpy arrays: one layer's weights for `load`. A safetensors file gives such a dict with
  `safetensors.numpy.load_file(path)`; a torch state dict needs `.numpy()` on each tensor first."""
  out = {k[len(prefix):]: np.asarray(v, np.float32) for k, v in state.items() if k.startswith(prefix)}
  if not out:
    raise ValueError(f"parity: no weights under {prefix!r} (keys look like {sorted(state)[:3]})")
  return out


def build(reference: str, c: Mapping[str, Any], w: Mapping[str, np.ndarray], *, seed: int = 0, **overrides):
  """The registered mixer with the reference's options (+ overrides) and weights: `mixers.get(name)`."""
  cfg = model_config(reference, c, **overrides)
  mixer = mixers.get(cfg.mixer).from_config(cfg, rngs=nnx.Rngs(seed))
  load(reference, mixer, w, c)
  return mixer


def state_from_reference(reference: str, ref_state: Mapping[str, np.ndarray]) -> dict:
  """A reference's cache in the mixer's layout (numpy): softmax {'k', 'v': [B, L, Hkv, K]} from HF's
  key/value cache [B, Hkv, L, K]; the recurrent mixers {'S': ..., 'conv': [B, W−1, C]} from HF's recurrent
  state (Mamba-2 [B, H, P, N] -> [B, H, N, P]; the delta rules' [B, H, K, V] as is) and conv state [B, C, W]
  (the last W raw conv inputs; the mixers keep the last W−1)."""
  if reference == "llama":
    return {"k": np.swapaxes(ref_state["k"], 1, 2), "v": np.swapaxes(ref_state["v"], 1, 2)}
  S = np.asarray(ref_state["S"])
  S = np.swapaxes(S, 2, 3) if reference == "mamba2" else S
  return {"S": S, "conv": np.swapaxes(np.asarray(ref_state["conv"])[:, :, 1:], 1, 2)}
