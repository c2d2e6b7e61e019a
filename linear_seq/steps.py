"""The train state and the jitted train/eval steps.

The NNX model is kept as graphdef + state: `nnx.split(lm, nnx.Param, ...)` gives the static graphdef, the
trainable params and the rest (non-trainable variables such as random-feature projections). The train state is
a plain dict pytree {step, params, rest, opt_state}: that is what is checkpointed, sharded and donated.
The steps are module-level functions jitted once with the graphdef, optimizer and mesh as static arguments,
so repeated runs in one process (tests, sweeps) reuse the compiled steps.
"""
import dataclasses
import json
from typing import Any

from flax import nnx
import jax
import jax.numpy as jnp
import ml_collections
import optax

from linear_seq import model as model_lib
from linear_seq import optim
from linear_seq import sharding
from linear_seq.data import tokenizer

State = dict[str, Any]  # {'step': int32[], 'params': nnx.State, 'rest': nnx.State, 'opt_state': optax state}


@dataclasses.dataclass(frozen=True)
class Static:
  """What a run's jitted steps close over (hashable: used as static jit arguments)."""
  graphdef: Any
  tx: optax.GradientTransformation
  mesh: jax.sharding.Mesh
  fsdp: bool


_OPTIMIZERS: dict[str, optax.GradientTransformation] = {}


def make_optimizer(train: ml_collections.ConfigDict) -> optax.GradientTransformation:
  """optim.make_optimizer, memoized on the train config's values so equal configs share compiled steps."""
  key = json.dumps(train.to_dict(), sort_keys=True, default=str)
  if key not in _OPTIMIZERS:
    _OPTIMIZERS[key] = optim.make_optimizer(train, model_lib.param_label)
  return _OPTIMIZERS[key]


def model_config(config: ml_collections.ConfigDict, vocab_size: int) -> "model_lib.ModelConfig":
  return model_lib.ModelConfig.from_config(config.model, vocab_size=config.model.vocab_size or vocab_size)


def _init_fn(cfg, seed: int, tx: optax.GradientTransformation):
  def init():
    lm = model_lib.LM(cfg, rngs=nnx.Rngs(seed))
    _, params, rest = nnx.split(lm, nnx.Param, ...)
    return {"step": jnp.zeros((), jnp.int32), "params": params, "rest": rest, "opt_state": tx.init(params)}
  return init


def setup(config: ml_collections.ConfigDict, vocab_size: int, mesh: jax.sharding.Mesh):
  """-> (static, abstract_state, shardings) without computing anything (for init and for restore targets)."""
  cfg = model_config(config, vocab_size)
  tx = make_optimizer(config.train)
  graphdef, _, _ = nnx.split(nnx.eval_shape(lambda: model_lib.LM(cfg, rngs=nnx.Rngs(0))), nnx.Param, ...)
  abstract = jax.eval_shape(_init_fn(cfg, config.seed, tx))
  shardings = sharding.state_shardings(abstract, mesh, bool(config.train.fsdp))
  return Static(graphdef, tx, mesh, bool(config.train.fsdp)), abstract, shardings


def init_state(config: ml_collections.ConfigDict, vocab_size: int, static: Static, shardings) -> State:
  """Fresh parameters from config.seed, created directly with their shardings (same values on any mesh)."""
  cfg = model_config(config, vocab_size)
  return jax.jit(_init_fn(cfg, config.seed, static.tx), out_shardings=shardings)()


def merge(static: Static, state: State) -> "model_lib.LM":
  return nnx.merge(static.graphdef, state["params"], state["rest"])


def loss_terms(logits_BTV: jax.Array, batch: dict[str, jax.Array]) -> dict[str, jax.Array]:
  """Weighted next-token cross entropy: sums over the batch (float32) of nll·w, w, [argmax = target]·w,
  the bytes predicted (batch['target_bytes'] when given, else w on byte-level ids < 256; for bits per byte),
  and per position [T] sums of nll·w and w."""
  logits_BTV = logits_BTV.astype(jnp.float32)
  targets_BT, w_BT = batch["targets"], batch["weights"].astype(jnp.float32)
  logz_BT = jax.nn.logsumexp(logits_BTV, axis=-1)
  nll_BT = logz_BT - jnp.take_along_axis(logits_BTV, targets_BT[..., None], axis=-1)[..., 0]
  correct_BT = (jnp.argmax(logits_BTV, axis=-1) == targets_BT).astype(jnp.float32)
  return {"nll": jnp.sum(nll_BT * w_BT), "weight": jnp.sum(w_BT), "correct": jnp.sum(correct_BT * w_BT),
          "byte_weight": (jnp.sum(batch["target_bytes"]) if "target_bytes" in batch
                          else jnp.sum(w_BT * (targets_BT < tokenizer.NUM_BYTES))),
          "position_nll": jnp.sum(nll_BT * w_BT, axis=0), "position_weight": jnp.sum(w_BT, axis=0)}


def _forward(graphdef, params, rest, batch):
  lm = nnx.merge(graphdef, params, rest)
  logits, _ = lm(batch["inputs"], segment_ids=batch.get("segment_ids"))
  return loss_terms(logits, batch)


def _loss(params, rest, batch, graphdef):
  terms = _forward(graphdef, params, rest, batch)
  return terms["nll"] / jnp.maximum(terms["weight"], 1.0), terms


def train_step(state: State, batch: dict[str, jax.Array], static: Static):
  """One AdamW step on the weighted mean loss over the global batch -> (new state, {loss, grad_norm})."""
  (loss, _), grads = jax.value_and_grad(_loss, has_aux=True)(state["params"], state["rest"], batch, static.graphdef)
  updates, opt_state = static.tx.update(grads, state["opt_state"], state["params"])
  new = {"step": state["step"] + 1, "params": optax.apply_updates(state["params"], updates),
         "rest": state["rest"], "opt_state": opt_state}
  new = jax.lax.with_sharding_constraint(new, sharding.state_shardings(new, static.mesh, static.fsdp))
  return new, {"loss": loss, "grad_norm": optax.tree.norm(grads)}


def eval_step(params, rest, batch: dict[str, jax.Array], static: Static) -> dict[str, jax.Array]:
  """Sums of the loss terms over one batch (see loss_terms)."""
  return _forward(static.graphdef, params, rest, batch)


train_step_jit = jax.jit(train_step, static_argnames=("static",), donate_argnames=("state",))
eval_step_jit = jax.jit(eval_step, static_argnames=("static",))


def num_params(state: State) -> int:
  return int(sum(x.size for x in jax.tree.leaves(state["params"])))
