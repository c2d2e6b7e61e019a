"""Multi-head softmax attention with a KV cache (the quadratic baseline)."""
import jax
import jax.numpy as jnp
from flax import nnx

from linear_seq import ops
from linear_seq.mixers import attention_impl as attn_impl
from linear_seq.mixers import qkv_conv, segments
from linear_seq.mixers.rope import rope
from linear_seq.checks import check_choice, if_concrete

POS_ENCODINGS = ("none", "learned", "rope")


class SoftmaxAttention(nnx.Module):
  """Causal multi-head attention, `ops.softmax_attention`; K = V = head_dim (default d_model / H).

  num_kv_heads < H: grouped-query attention (Llama's num_key_value_heads), query head h reads key/value head
  h // (H / num_kv_heads); the cache holds num_kv_heads heads. The logit scale is K^−½.

  Positions: 'none', 'learned' (absolute, added to the input of the q and k projections; positions past
  `max_len` reuse the last embedding) or 'rope' (rotary on q and k, rotate-half pairing, base `rope_base`, as
  Llama). Positions count within a document.
  segment_ids: a query attends only to keys of its own document (segment mask).
  State (the KV cache): dict(k [B,L,Hkv,K], v [B,L,Hkv,K], segment [B,L] int32 document index of each cached
  key, index int32 (filled slots), pos [B] int32 (position of the next token in its document)).
  Without a state the call returns a cache of exactly T slots; decoding needs `init_state(B, max_len)`.
  qkv_conv_width > 0: short convs on q, k, v after their projections (`qkv_conv`); the state is then
  {'core': the cache above, 'conv': the conv's last inputs}.
  attention_impl: the op's implementation without a state (training, prefill): causal self-attention, see
  `mixers/attention_impl.py` (auto | explicit | chunked | cudnn); a call with a state uses the explicit masked form.
  """
  supports_qkv_conv = True

  def __init__(self, d_model: int, num_heads: int, *, pos_encoding: str = "rope", max_len: int = 2048,
               qkv_conv_width: int = 0, num_kv_heads: int = 0, head_dim: int = 0, rope_base: float = 10_000.0,
               attention_impl: str = "auto", dtype=jnp.float32, rngs: nnx.Rngs):
    check_choice("positional encoding", pos_encoding, POS_ENCODINGS)
    check_choice("attention implementation", attention_impl, attn_impl.ATTENTION_IMPLS)
    if not head_dim and d_model % num_heads:
      raise ValueError(f"d_model {d_model} must divide by num_heads {num_heads}")
    num_kv_heads = num_kv_heads or num_heads
    if num_heads % num_kv_heads:
      raise ValueError(f"softmax: num_heads {num_heads} must divide by num_kv_heads {num_kv_heads}")
    self.d_model, self.num_heads, self.head_dim = d_model, num_heads, head_dim or d_model // num_heads
    self.num_kv_heads, self.rope_base = num_kv_heads, rope_base
    self.pos_encoding, self.max_len, self.dtype = pos_encoding, max_len, dtype
    self.attention_impl = attention_impl
    q_width, kv_width = num_heads * self.head_dim, num_kv_heads * self.head_dim
    lin = lambda n_in, n_out: nnx.Linear(n_in, n_out, use_bias=False, dtype=dtype, rngs=rngs)
    self.q_proj, self.k_proj = lin(d_model, q_width), lin(d_model, kv_width)
    self.v_proj, self.o_proj = lin(d_model, kv_width), lin(q_width, d_model)
    self.qkv_conv = qkv_conv.maybe(d_model, qkv_conv_width, widths=(q_width, kv_width, kv_width), dtype=dtype,
                                   rngs=rngs)
    if pos_encoding == "learned":
      self.pos_embed = nnx.Embed(max_len, d_model, dtype=dtype,
                                 embedding_init=nnx.initializers.normal(0.02), rngs=rngs)

  @classmethod
  def from_config(cls, cfg, *, rngs: nnx.Rngs) -> "SoftmaxAttention":
    return cls(cfg.d_model, cfg.num_heads, pos_encoding=cfg.pos_encoding, max_len=cfg.max_len,
               qkv_conv_width=qkv_conv.width(cfg), num_kv_heads=cfg.num_kv_heads, head_dim=cfg.head_dim,
               rope_base=cfg.rope_base, attention_impl=cfg.attention_impl, dtype=cfg.compute_dtype,
               rngs=rngs)

  def init_state(self, batch_size: int, max_len: int) -> dict:
    return qkv_conv.init_state(self._init_cache(batch_size, max_len), self.qkv_conv, batch_size)

  def _init_cache(self, batch_size: int, max_len: int) -> dict:
    shape = (batch_size, max_len, self.num_kv_heads, self.head_dim)
    return dict(k=jnp.zeros(shape, self.dtype), v=jnp.zeros(shape, self.dtype),
                segment=jnp.zeros((batch_size, max_len), jnp.int32),
                index=jnp.zeros((), jnp.int32), pos=jnp.zeros((batch_size,), jnp.int32))

  def state_size(self, seq_len: int) -> int:
    """Floats per sequence: the k and v caches of seq_len tokens (+ the q/k/v conv's inputs)."""
    return 2 * seq_len * self.num_kv_heads * self.head_dim + qkv_conv.state_size(self.qkv_conv)

  def __call__(self, x_BTD, *, state=None, segment_ids=None):
    """x [B,T,D] -> (y [B,T,D], new state); writes the T new keys and values at slots index..index+T-1.

    The cache must have room: index + T <= L. When the index is concrete (outside jit) a call past the end
    raises ValueError; under jit it cannot be checked and would overwrite the last slots, so size the cache
    for the whole sequence with `init_state(B, max_len)` (as `model.generate` does).
    """
    B, T, _ = x_BTD.shape
    H, K = self.num_heads, self.head_dim
    state, conv_state = qkv_conv.split_state(state, self.qkv_conv)
    cached = state is not None
    if state is None:
      state = self._init_cache(B, T)
    L = state["k"].shape[1]
    if_concrete(state["index"], lambda i: int(i) + T <= L,
                lambda i: f"the KV cache holds {L} slots but index {int(i)} + {T} tokens are needed; start from "
                f"init_state(batch_size, max_len) with max_len >= {int(i) + T} (a call without a state returns "
                "a cache of exactly T slots)")
    pos_BT = segments.positions(segment_ids, state["pos"], T)
    doc_BT = (jnp.zeros((B, T), jnp.int32) if segment_ids is None
              else segments.document_index(segment_ids))
    qk_in = x_BTD
    if self.pos_encoding == "learned":
      qk_in = x_BTD + self.pos_embed(jnp.minimum(pos_BT, self.max_len - 1))
    qkv = (self.q_proj(qk_in), self.k_proj(qk_in), self.v_proj(x_BTD))
    if self.qkv_conv is not None:
      qkv, conv_state = self.qkv_conv(*qkv, state=conv_state, segment_ids=segment_ids)
    q_BTHK, k_BTHK, v_BTHK = (a.reshape(B, T, -1, K) for a in qkv)   # k, v: num_kv_heads heads
    if self.pos_encoding == "rope":
      q_BTHK, k_BTHK = rope(q_BTHK, pos_BT, base=self.rope_base), rope(k_BTHK, pos_BT, base=self.rope_base)

    # Cached keys carry a document index relative to the call: the continuing document is 0, earlier
    # ones negative, so a query only matches keys of its own document.
    index = state["index"]
    seg_BL = state["segment"] - state["segment"][jnp.arange(B), jnp.maximum(index - 1, 0)][:, None]
    seg_BL = jax.lax.dynamic_update_slice(seg_BL, doc_BT, (0, index))
    k_BLHK = jax.lax.dynamic_update_slice(state["k"], k_BTHK.astype(state["k"].dtype), (0, index, 0, 0))
    v_BLHK = jax.lax.dynamic_update_slice(state["v"], v_BTHK.astype(state["v"].dtype), (0, index, 0, 0))
    rep = lambda a: jnp.repeat(a.astype(q_BTHK.dtype), H // self.num_kv_heads, axis=2)  # kv head of each q head
    if cached:
      slot_L = jnp.arange(L)
      causal_TL = slot_L[None, :] <= index + jnp.arange(T)[:, None]      # also excludes empty slots
      mask_BTL = causal_TL[None] & (seg_BL[:, None, :] == doc_BT[:, :, None])
      o_BTHK = ops.softmax_attention(q_BTHK, rep(k_BLHK), rep(v_BLHK), causal=False, mask=mask_BTL[:, None])
    else:  # the cache holds exactly these T keys: plain causal self-attention (within documents)
      impl = attn_impl.resolve(self.attention_impl, seq_len=T, head_dim=K, dtype=q_BTHK.dtype,
                               packed=segment_ids is not None)
      o_BTHK = ops.softmax_attention(q_BTHK, rep(k_BTHK), rep(v_BTHK), causal=True, implementation=impl,
                                     segment_ids=None if segment_ids is None else doc_BT)
    y_BTD = self.o_proj(o_BTHK.reshape(B, T, H * K))
    new_state = dict(k=k_BLHK, v=v_BLHK, segment=seg_BL, index=index + T, pos=pos_BT[:, -1] + 1)
    return y_BTD, qkv_conv.join_state(new_state, conv_state, self.qkv_conv)
