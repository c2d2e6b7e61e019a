"""Which `ops.softmax_attention` implementation the softmax mixer runs (`model.attention_impl`).

  auto     — cuDNN flash attention on a GPU for unpacked causal self-attention with 16-bit inputs, head dim
             ≤ 256 and K = V; otherwise the chunked form for packed documents (off the CPU) or T ≥
             CHUNKED_FROM; otherwise the explicit form.
  explicit — the [Tq, Tk] scores materialized in float32 (the op's default: `jax.nn.dot_product_attention`'s
             XLA form); memory O(T²) in training.
  chunked  — `ops.chunked_attention`: online softmax over key blocks, flash-style VJP; memory O(T).
  cudnn    — `jax.nn.dot_product_attention(implementation='cudnn')`; GPU only, 16-bit inputs.
The KV-cache path (a call with a state) always uses the explicit masked form.
"""
import jax
import jax.numpy as jnp

ATTENTION_IMPLS = ("auto", "explicit", "chunked", "cudnn")
# auto on a CPU: the chunked form from this many tokens on. Below it the explicit form is as fast and its
# [T, T] scores are small (measured: experiments/speed/README.md, "Softmax at long context").
CHUNKED_FROM = 2048
_OP_IMPL = {"explicit": None, "chunked": "chunked", "cudnn": "cudnn"}


def resolve(name: str, *, seq_len: int, head_dim: int, dtype, packed: bool, platform: str | None = None):
  """The op's `implementation` argument for causal self-attention of seq_len tokens (None = explicit)."""
  platform = platform or jax.default_backend()
  if name == "cudnn" and platform != "gpu":
    raise ValueError(f"model.attention_impl=cudnn needs a GPU; this run is on {platform} (use auto)")
  if name != "auto":
    return _OP_IMPL[name]
  if (platform == "gpu" and not packed and head_dim <= 256
      and jnp.dtype(dtype) in (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16))):
    return "cudnn"
  if seq_len >= CHUNKED_FROM or (packed and platform != "cpu"):
    return "chunked"
  return None
