"""Decoder-only language model over any mixer: config dataclass, LM, generation, optimizer labels.

  cfg = ModelConfig.from_config(config.model, vocab_size=V)
  lm = LM(cfg, rngs=nnx.Rngs(seed))
  logits [B,T,V] f32, state = lm(tokens [B,T], *, segment_ids=None, state=None)
  tokens [B,T0+n] = generate(lm, prompt [B,T0], n, temperature=1.0, top_k=0, top_p=1.0, key=key)

Blocks are pre-norm: x += mixer(conv(norm(x))); x += MLP(norm(x)), norm RMSNorm or LayerNorm (model.norm,
epsilon model.norm_eps), the MLP GELU or SwiGLU (model.mlp).
The short conv (conv_width > 0) sits on the block input (conv_on='input') or, with conv_on='qkv', inside
mixers that have q/k/v projections (softmax, linear, retention, gla: `mixers.qkv_conv`); mixers without them
(s4, a plug-in without `supports_qkv_conv`) keep it on their input, and deltanet/deltaproduct/mamba2 always use
their own.
input_pos='learned' adds a learned absolute position embedding (positions within the document, the last one
reused past max_len) to the token embedding. The LM state is a list with one dict per layer: {'mixer': the
mixer's state, 'conv': last conv_width−1 inputs [B,W−1,D]} ('conv' only with a block conv); with learned
input positions the first layer's dict also holds 'pos' [B] int32, the position of the next token.
"""
import dataclasses
import functools

import jax
import jax.numpy as jnp
from flax import nnx

from linear_seq import mixers, ops, param_init
from linear_seq.mixers import attention_impl, deltanet, dt_gate, segments
from linear_seq.ops import tuning
from linear_seq.mixers.short_conv import ShortConv
from linear_seq.checks import check_choice

DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}
NORMS = ("rms", "layer")
MLPS = ("gelu", "swiglu")
CONV_PLACES = ("input", "qkv")
INPUT_POSITIONS = ("none", "learned")
# Mixers whose gate α ∈ [0, 1] model.negative_eigenvalues will map to 2α − 1 once the ops take signed decays.
# Mixers that refuse model.negative_eigenvalues, and why.
NO_NEGATIVE_EIGENVALUES = {
    "retention": "its decays are fixed per head (γ_h), not computed from the input, so α ↦ 2α − 1 cannot give "
                 "a sign that depends on the input (use gla or mamba2)",
}


def _floats(value) -> tuple[float, ...]:
  if isinstance(value, str):
    return tuple(float(v) for v in value.split(",") if v.strip())
  return tuple(float(v) for v in value)


def _names(value) -> tuple[str, ...]:
  if isinstance(value, str):
    return tuple(v.strip() for v in value.split(",") if v.strip())
  return tuple(value)


@dataclasses.dataclass(frozen=True)
class ModelConfig:
  """Model hyper-parameters; one field per `config.model` field (see configs/default.py for each), with
  configs/default.py's values as defaults (tests/test_model.py checks that they agree).

  String list fields of the config (`layer_mixers`, `decay`, `gamma`: comma-separated) become tuples.
  """
  vocab_size: int
  mixer: str = "gla"
  layer_mixers: tuple[str, ...] = ()
  d_model: int = 128
  num_layers: int = 2
  num_heads: int = 4
  mlp_ratio: float = 4
  mlp: str = "gelu"
  mlp_hidden: int = 0
  conv_width: int = 0
  conv_on: str = "input"
  norm: str = "rms"
  norm_eps: float = 1e-6
  init: str = "default"
  input_pos: str = "none"
  output_gate: bool = True
  tie_embeddings: bool = True
  dtype: str = "float32"
  mode: str = ""
  chunk_size: int = 16
  pos_encoding: str = "rope"
  max_len: int = 2048
  attention_impl: str = "auto"
  feature_map: str = "elu1"
  num_features: int = 64
  redraw_every: int = 0
  normalize: str = ""
  decay: tuple[float, ...] = ()
  gamma: tuple[float, ...] = ()
  retention_pos_encoding: str = "none"
  gate_temperature: float = 16.0
  gate_rank: int = 16
  vector_gate: bool = True
  state_size: int = 64
  s4_init: str = "lin"
  discretization: str = "zoh"
  dt_min: float = 1e-3
  dt_max: float = 1e-1
  delta_gate: str = "none"
  delta_beta: str = "sigmoid"
  householder_steps: int = 2
  negative_eigenvalues: bool = False
  mamba_expand: int = 2
  mamba_head_dim: int = 64
  num_kv_heads: int = 0
  head_dim: int = 0
  rope_base: float = 10_000.0
  mamba_groups: int = 1
  mamba_norm_groups: int = 1
  dt_limit_min: float = 0.0
  dt_limit_max: float = 0.0
  A_init: str = "uniform"
  delta_qk_heads: int = 0
  value_head_dim: int = 0
  delta_norm_eps: float = 1e-5
  output_gate_act: str = "swish"
  output_gate_rank: int = 0

  def __post_init__(self):
    set_ = lambda k, v: object.__setattr__(self, k, v)
    set_("layer_mixers", _names(self.layer_mixers))
    set_("decay", _floats(self.decay))
    set_("gamma", _floats(self.gamma))
    if self.chunk_size == 0 and not isinstance(self.chunk_size, bool):   # 0: the backend's (ops/tuning.py)
      set_("chunk_size", tuning.current().chunk_size)
    for name, value in (("vocab_size", self.vocab_size), ("d_model", self.d_model),
                        ("num_layers", self.num_layers), ("num_heads", self.num_heads),
                        ("chunk_size", self.chunk_size)):
      if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"model.{name} must be a positive integer, got {value!r}")
    if self.d_model % self.num_heads:
      raise ValueError(f"model.d_model={self.d_model} must divide by model.num_heads={self.num_heads}")
    if self.layer_mixers and len(self.layer_mixers) != self.num_layers:
      raise ValueError(f"model.layer_mixers lists {len(self.layer_mixers)} mixers "
                       f"({','.join(self.layer_mixers)}) for num_layers={self.num_layers}")
    for name in self.mixers:
      mixers.get(name)  # ValueError listing the valid names
    check_choice("model.dtype", self.dtype, tuple(DTYPES))
    check_choice("model.norm", self.norm, NORMS)
    check_choice("model.mlp", self.mlp, MLPS)
    if not isinstance(self.mlp_hidden, int) or self.mlp_hidden < 0:
      raise ValueError(f"model.mlp_hidden must be an integer >= 0, got {self.mlp_hidden!r}")
    if not self.norm_eps > 0:
      raise ValueError(f"model.norm_eps must be > 0, got {self.norm_eps}")
    check_choice("model.conv_on", self.conv_on, CONV_PLACES)
    check_choice("model.init", self.init, param_init.SCHEMES)
    check_choice("model.input_pos", self.input_pos, INPUT_POSITIONS)
    check_choice("model.A_init", self.A_init, dt_gate.A_INITS)
    check_choice("model.output_gate_act", self.output_gate_act, tuple(deltanet.GATE_ACTS))
    for name in ("num_kv_heads", "head_dim", "delta_qk_heads", "value_head_dim", "output_gate_rank",
                 "mamba_groups", "mamba_norm_groups"):
      least = 1 if name.startswith("mamba") else 0
      if getattr(self, name) < least:
        raise ValueError(f"model.{name} must be >= {least}, got {getattr(self, name)}")
    check_choice("model.attention_impl", self.attention_impl, attention_impl.ATTENTION_IMPLS)
    if self.mode:
      check_choice("model.mode", self.mode, tuple(ops.MODES) + tuple(ops.SSM_MODES))
    if self.mlp_ratio < 0 or self.conv_width < 0 or self.conv_width == 1:
      raise ValueError(f"need mlp_ratio >= 0 and conv_width 0 or >= 2, got {self.mlp_ratio}, "
                       f"{self.conv_width}")
    self._check_negative_eigenvalues()
    own_conv = sorted({n for n in self.mixers if getattr(mixers.get(n), "owns_short_conv", False)})
    if self.conv_width and own_conv and self.conv_on == "input":
      raise ValueError(f"model.conv_width={self.conv_width}: {', '.join(own_conv)} apply their own short "
                       f"convs and the block's would come on top; set model.conv_width=0 or "
                       f"model.conv_on=qkv")

  def _check_negative_eigenvalues(self) -> None:
    """model.negative_eigenvalues acts on the layers whose mixer has `supports_negative_eigenvalues` (deltanet,
    deltaproduct: β ∈ (0, 2); gla, mamba2: α ↦ 2α − 1 ∈ (−1, 1)) and needs at least one; retention refuses it
    (NO_NEGATIVE_EIGENVALUES); other layers of a hybrid (softmax, linear, s4) are left as they are."""
    if not isinstance(self.householder_steps, int) or isinstance(self.householder_steps, bool) \
        or self.householder_steps < 1:
      raise ValueError(f"model.householder_steps must be an integer >= 1, got {self.householder_steps!r}")
    if not self.negative_eigenvalues:
      return
    supported = lambda n: getattr(mixers.get(n), "supports_negative_eigenvalues", False)  # noqa: E731
    valid = ", ".join(n for n in mixers.MIXERS if supported(n))
    names = list(dict.fromkeys(self.mixers))
    refused = [n for n in names if n in NO_NEGATIVE_EIGENVALUES]
    if refused:
      raise ValueError(f"model.negative_eigenvalues=True: {refused[0]} cannot take it: "
                       f"{NO_NEGATIVE_EIGENVALUES[refused[0]]}; valid mixers: {valid}")
    if not any(supported(n) for n in names):
      raise ValueError(f"model.negative_eigenvalues=True: {', '.join(names)} have no state transition to give "
                       f"negative eigenvalues; valid mixers: {valid}")

  @property
  def mixers(self) -> tuple[str, ...]:
    """The mixer name of every layer."""
    return self.layer_mixers or (self.mixer,) * self.num_layers

  def block_conv(self, mixer_name: str) -> bool:
    """Whether the block with this mixer applies the short conv to its input."""
    if not self.conv_width:
      return False
    cls = mixers.get(mixer_name)
    if self.conv_on == "qkv":
      return not (getattr(cls, "supports_qkv_conv", False) or getattr(cls, "owns_short_conv", False))
    return True

  @property
  def compute_dtype(self):
    return DTYPES[self.dtype]

  @classmethod
  def from_config(cls, config, *, vocab_size: int = 0) -> "ModelConfig":
    """From a `config.model` ConfigDict (or dict); vocab_size is used when the config's is 0."""
    values = {f.name: config[f.name] for f in dataclasses.fields(cls) if f.name in config}
    values["vocab_size"] = int(values.get("vocab_size") or vocab_size)
    if not values["vocab_size"]:
      raise ValueError("vocab_size is 0 in the config and not given: pass the dataset's vocab_size")
    return cls(**values)


def make_norm(cfg: ModelConfig, *, rngs: nnx.Rngs) -> nnx.Module:
  """RMSNorm or LayerNorm (model.norm) over d_model, epsilon model.norm_eps."""
  cls = nnx.RMSNorm if cfg.norm == "rms" else nnx.LayerNorm
  return cls(cfg.d_model, epsilon=cfg.norm_eps, dtype=cfg.compute_dtype, rngs=rngs)


class MLP(nnx.Module):
  """GELU MLP D -> hidden -> D."""

  def __init__(self, d_model: int, hidden: int, *, dtype, rngs: nnx.Rngs):
    self.up = nnx.Linear(d_model, hidden, dtype=dtype, rngs=rngs)
    self.down = nnx.Linear(hidden, d_model, dtype=dtype, rngs=rngs)

  def __call__(self, x):
    return self.down(jax.nn.gelu(self.up(x)))


class SwiGLU(nnx.Module):
  """Llama's gated MLP without biases: down(silu(gate(x)) * up(x)), D -> hidden -> D."""

  def __init__(self, d_model: int, hidden: int, *, dtype, rngs: nnx.Rngs):
    self.gate = nnx.Linear(d_model, hidden, use_bias=False, dtype=dtype, rngs=rngs)
    self.up = nnx.Linear(d_model, hidden, use_bias=False, dtype=dtype, rngs=rngs)
    self.down = nnx.Linear(hidden, d_model, use_bias=False, dtype=dtype, rngs=rngs)

  def __call__(self, x):
    return self.down(jax.nn.silu(self.gate(x)) * self.up(x))


class Block(nnx.Module):
  """x += mixer(conv(norm(x))); x += MLP(norm(x))."""

  def __init__(self, cfg: ModelConfig, mixer_name: str, *, rngs: nnx.Rngs):
    dt = cfg.compute_dtype
    self.mixer_norm = make_norm(cfg, rngs=rngs)
    self.conv = (ShortConv(cfg.d_model, cfg.conv_width, dtype=dt, rngs=rngs) if cfg.block_conv(mixer_name)
                 else None)
    self.mixer = mixers.get(mixer_name).from_config(cfg, rngs=rngs)
    hidden = cfg.mlp_hidden or int(round(cfg.mlp_ratio * cfg.d_model))
    self.mlp_norm = make_norm(cfg, rngs=rngs) if hidden else None
    mlp_cls = SwiGLU if cfg.mlp == "swiglu" else MLP
    self.mlp = mlp_cls(cfg.d_model, hidden, dtype=dt, rngs=rngs) if hidden else None

  def init_state(self, batch_size: int, max_len: int) -> dict:
    state = {"mixer": self.mixer.init_state(batch_size, max_len)}
    if self.conv is not None:
      state["conv"] = self.conv.init_state(batch_size)
    return state

  def state_size(self, seq_len: int) -> int:
    return self.mixer.state_size(seq_len) + (self.conv.state_size() if self.conv is not None else 0)

  def __call__(self, x, *, state=None, segment_ids=None):
    state = state or {}
    new_state = {}
    h = self.mixer_norm(x)
    if self.conv is not None:
      h, new_state["conv"] = self.conv(h, state=state.get("conv"), segment_ids=segment_ids)
    h, new_state["mixer"] = self.mixer(h, state=state.get("mixer"), segment_ids=segment_ids)
    x = x + h.astype(x.dtype)
    if self.mlp is not None:
      x = x + self.mlp(self.mlp_norm(x)).astype(x.dtype)
    return x, new_state


class LM(nnx.Module):
  """Token embedding (+ learned positions), num_layers blocks, final norm, tied or untied head; float32 logits."""

  def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
    self.cfg = cfg
    dt = cfg.compute_dtype
    self.embed = nnx.Embed(cfg.vocab_size, cfg.d_model, dtype=dt,
                           embedding_init=nnx.initializers.normal(0.02), rngs=rngs)
    self.pos_embed = nnx.Embed(cfg.max_len, cfg.d_model, dtype=dt, embedding_init=nnx.initializers.normal(0.02),
                               rngs=rngs) if cfg.input_pos == "learned" else None
    self.blocks = nnx.List([Block(cfg, name, rngs=rngs) for name in cfg.mixers])
    self.final_norm = make_norm(cfg, rngs=rngs)
    self.head = None if cfg.tie_embeddings else nnx.Linear(
        cfg.d_model, cfg.vocab_size, use_bias=False, dtype=jnp.float32, rngs=rngs)
    if cfg.init != "default":  # no key drawn otherwise: the caller's Rngs stream is as before the option
      param_init.apply(self, cfg.init, num_layers=cfg.num_layers, key=rngs.params())

  def init_state(self, batch_size: int, max_len: int) -> list:
    """Fresh decode state for sequences up to max_len tokens (max_len only sizes softmax's cache)."""
    state = [block.init_state(batch_size, max_len) for block in self.blocks]
    if self.pos_embed is not None:
      state[0]["pos"] = jnp.zeros((batch_size,), jnp.int32)
    return state

  def state_size(self, seq_len: int) -> int:
    """Floats per sequence held by the decode state after seq_len tokens, summed over layers."""
    return sum(block.state_size(seq_len) for block in self.blocks)

  def __call__(self, tokens, *, segment_ids=None, state=None, positions=None):
    """tokens [B, T] -> (logits [B, T, V] float32, the new state). positions [B, K] int: the head runs only at
    these positions of each row (logits [B, K, V]), e.g. a task's few answer positions (steps.weighted_positions)."""
    if state is not None and len(state) != len(self.blocks):
      raise ValueError(f"state has {len(state)} layers, the model {len(self.blocks)}")
    tokens = jnp.asarray(tokens, jnp.int32)
    x = self.embed(tokens).astype(self.cfg.compute_dtype)
    if self.pos_embed is not None:
      B, T = tokens.shape
      pos_BT = segments.positions(segment_ids, jnp.zeros((B,), jnp.int32) if state is None else state[0]["pos"], T)
      x = x + self.pos_embed(jnp.minimum(pos_BT, self.cfg.max_len - 1)).astype(x.dtype)
    new_state = []
    for i, block in enumerate(self.blocks):
      x, s = block(x, state=None if state is None else state[i], segment_ids=segment_ids)
      new_state.append(s)
    if self.pos_embed is not None:
      new_state[0]["pos"] = pos_BT[:, -1] + 1
    h = self.final_norm(x).astype(jnp.float32)
    if positions is not None:
      h = jnp.take_along_axis(h, jnp.asarray(positions, jnp.int32)[..., None], axis=1)
    if self.head is None:
      logits = h @ self.embed.embedding[...].astype(jnp.float32).T
    else:
      logits = self.head(h)
    return logits, new_state


# ------------------------------------------------------------------------------------------------
# Generation.

def filter_logits(logits_BV, temperature, top_k=0, top_p=1.0) -> jax.Array:
  """The sampling distribution's logits: logits / temperature, then −inf outside the kept set.

  top_k > 0 keeps the k largest logits (a tie with the k-th largest is kept too); top_p < 1 then keeps the
  smallest set of the largest remaining ones whose probability (softmax of the kept, temperature-scaled logits)
  reaches top_p: a token is kept when the tokens before it in descending order (ties in index order) hold less
  than top_p. The largest logit is always kept. top_k = 0 and top_p = 1 keep everything. Scalars may be traced.
  """
  logits_BV = jnp.asarray(logits_BV, jnp.float32) / jnp.maximum(temperature, 1e-6)
  V = logits_BV.shape[-1]
  order_BV = jnp.argsort(-logits_BV, axis=-1, stable=True)                    # descending, ties by index
  sorted_BV = jnp.take_along_axis(logits_BV, order_BV, axis=-1)
  k = jnp.where(top_k > 0, jnp.minimum(top_k, V), V)
  kth_B1 = jnp.take_along_axis(sorted_BV, jnp.broadcast_to(k - 1, sorted_BV.shape[:-1])[..., None], axis=-1)
  sorted_BV = jnp.where(sorted_BV >= kth_B1, sorted_BV, -jnp.inf)
  probs_BV = jax.nn.softmax(sorted_BV, axis=-1)
  before_BV = jnp.cumsum(probs_BV, axis=-1) - probs_BV                          # mass strictly before each token
  keep_sorted_BV = (sorted_BV > -jnp.inf) & ((before_BV < top_p) | (top_p >= 1.0))
  keep_sorted_BV = keep_sorted_BV.at[..., 0].set(True)
  keep_BV = jnp.take_along_axis(keep_sorted_BV, jnp.argsort(order_BV, axis=-1), axis=-1)  # back to vocab order
  return jnp.where(keep_BV, logits_BV, -jnp.inf)


def _sample(logits_BV, key, temperature, top_k, top_p):
  """Greedy where temperature == 0, else a sample of the filtered distribution (filter_logits; traced scalars)."""
  greedy = jnp.argmax(logits_BV, axis=-1)
  sampled = jax.random.categorical(key, filter_logits(logits_BV, temperature, top_k, top_p), axis=-1)
  return jnp.where(temperature == 0, greedy, sampled).astype(jnp.int32)


@functools.partial(jax.jit, static_argnames=("graphdef", "n"))
def _generate(graphdef, params, prompt_BT, state, key, temperature, top_k, top_p, *, n: int):
  lm = nnx.merge(graphdef, params)
  keys = jax.random.split(key, n)
  logits, state = lm(prompt_BT, state=state)           # prefill: the parallel/chunk form
  first = _sample(logits[:, -1], keys[0], temperature, top_k, top_p)

  def step(carry, key):
    token_B, state = carry
    logits, state = lm(token_B[:, None], state=state)  # one token with the recurrent state
    return (_sample(logits[:, -1], key, temperature, top_k, top_p), state), token_B

  (last, _), tokens_NB = jax.lax.scan(step, (first, state), keys[1:])
  return jnp.concatenate([prompt_BT, tokens_NB.T, last[:, None]], axis=1)


def check_sampling(temperature: float, top_k: int = 0, top_p: float = 1.0) -> None:
  """ValueError unless temperature >= 0, top_k an integer >= 0 and 0 < top_p <= 1."""
  if not temperature >= 0:
    raise ValueError(f"temperature must be >= 0, got {temperature}")
  if isinstance(top_k, bool) or int(top_k) != top_k or top_k < 0:
    raise ValueError(f"top_k must be an integer >= 0 (0 = no top-k), got {top_k}")
  if not 0 < top_p <= 1:
    raise ValueError(f"top_p must be in (0, 1] (1 = no nucleus filter), got {top_p}")


def generate(lm: LM, prompt, n: int, *, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
             key=None) -> jax.Array:
  """Continues prompt int [B,T0] by n tokens -> [B,T0+n] int32; temperature 0 = greedy (argmax), else samples
  softmax(logits / temperature) restricted to the top_k largest logits (0 = all) and then to the nucleus of
  probability top_p (1 = all): filter_logits. Changing the three values does not recompile.

  Prefills the prompt in one parallel pass, then decodes one token per step with the recurrent state
  (O(1) memory per token for linear mixers and S4, a KV cache of T0+n slots for softmax), all in one
  jitted function (lax.scan over the steps).
  """
  prompt = jnp.asarray(prompt, jnp.int32)
  if prompt.ndim != 2 or prompt.shape[1] < 1:
    raise ValueError(f"prompt has shape {list(prompt.shape)}, expected [B, T0] with T0 >= 1")
  if n <= 0:
    return prompt
  check_sampling(temperature, top_k, top_p)
  if key is None:
    if temperature:
      raise ValueError("sampling with temperature > 0 needs a PRNG key")
    key = jax.random.key(0)
  graphdef, params = nnx.split(lm)
  state = lm.init_state(prompt.shape[0], prompt.shape[1] + n)
  return _generate(graphdef, params, prompt, state, key, jnp.float32(temperature), jnp.int32(top_k),
                   jnp.float32(top_p), n=n)
