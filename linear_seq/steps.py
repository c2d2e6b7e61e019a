"""The train state and the jitted train/eval steps.

The NNX model is kept as graphdef + state: `nnx.split(lm, nnx.Param, ...)` gives the static graphdef, the
trainable params and the rest (non-trainable variables such as random-feature projections). The train state is
a plain dict pytree {step, params, rest, opt_state}: that is what is checkpointed, sharded and donated.
The steps are jitted per run by `setup` (functools.partial over the graphdef and optimizer under jax.jit, with
the state's shardings and the state donated, as nanodo does) and travel with the run in `Static`: nothing is
cached at module level (a second run in one process traces again; JAX's persistent cache can skip the compile).
"""
import dataclasses
import functools
from typing import Any, Callable

from flax import nnx
import jax
import jax.numpy as jnp
import ml_collections
import optax

from linear_seq import checks
from linear_seq import model as model_lib
from linear_seq import optim
from linear_seq import sharding

State = dict[str, Any]  # {'step': int32[], 'params': nnx.State, 'rest': nnx.State, 'opt_state': optax state}


@dataclasses.dataclass(frozen=True)
class Static:
  """A run's fixed parts: the model's graphdef, the optimizer, the mesh, and the steps jitted for them."""
  graphdef: Any
  tx: optax.GradientTransformation
  mesh: jax.sharding.Mesh
  fsdp: bool
  train_step: Callable  # (state, batch) -> (new state, {loss, grad_norm}); donates state (see train_step)
  eval_step: Callable  # (params, rest, batch) -> loss-term sums (see eval_step)


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
  tx = optim.make_optimizer(config.train)
  graphdef, _, _ = nnx.split(nnx.eval_shape(lambda: model_lib.LM(cfg, rngs=nnx.Rngs(0))), nnx.Param, ...)
  abstract = jax.eval_shape(_init_fn(cfg, config.seed, tx))
  shardings = sharding.state_shardings(abstract, mesh, bool(config.train.fsdp))
  replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
  train = jax.jit(functools.partial(train_step, graphdef=graphdef, tx=tx), donate_argnames=("state",),
                  out_shardings=(shardings, {"loss": replicated, "grad_norm": replicated}))
  evaluate = jax.jit(functools.partial(eval_step, graphdef=graphdef))
  if config.train.get("debug_checks", False):  # the ops' value checks inside the steps (checkify)
    train = checks.checked(functools.partial(train_step, graphdef=graphdef, tx=tx))
    evaluate = checks.checked(functools.partial(eval_step, graphdef=graphdef))
  return Static(graphdef, tx, mesh, bool(config.train.fsdp), train, evaluate), abstract, shardings


def init_state(config: ml_collections.ConfigDict, vocab_size: int, static: Static, shardings) -> State:
  """Fresh parameters from config.seed, created directly with their shardings (same values on any mesh)."""
  cfg = model_config(config, vocab_size)
  return jax.jit(_init_fn(cfg, config.seed, static.tx), out_shardings=shardings)()


def merge(static: Static, state: State) -> "model_lib.LM":
  return nnx.merge(static.graphdef, state["params"], state["rest"])


def loss_terms(logits_BTV: jax.Array, batch: dict[str, jax.Array]) -> dict[str, jax.Array]:
  """Weighted next-token cross entropy: sums over the batch (float32) of nll·w, w, [argmax = target]·w,
  the bytes predicted (for bits per byte: batch['target_bytes'] when given, the bytes of text each target
  stands for, see data/text.py; else the weights), and per position [T] sums of nll·w and w."""
  logits_BTV = logits_BTV.astype(jnp.float32)
  targets_BT, w_BT = batch["targets"], batch["weights"].astype(jnp.float32)
  logz_BT = jax.nn.logsumexp(logits_BTV, axis=-1)
  nll_BT = logz_BT - jnp.take_along_axis(logits_BTV, targets_BT[..., None], axis=-1)[..., 0]
  correct_BT = (jnp.argmax(logits_BTV, axis=-1) == targets_BT).astype(jnp.float32)
  return {"nll": jnp.sum(nll_BT * w_BT), "weight": jnp.sum(w_BT), "correct": jnp.sum(correct_BT * w_BT),
          "byte_weight": jnp.sum(batch["target_bytes"]) if "target_bytes" in batch else jnp.sum(w_BT),
          "position_nll": jnp.sum(nll_BT * w_BT, axis=0), "position_weight": jnp.sum(w_BT, axis=0)}


def _forward(graphdef, params, rest, batch):
  lm = nnx.merge(graphdef, params, rest)
  logits, _ = lm(batch["inputs"], segment_ids=batch.get("segment_ids"))
  return loss_terms(logits, batch)


def _loss(params, rest, batch, graphdef):
  terms = _forward(graphdef, params, rest, batch)
  return terms["nll"] / jnp.maximum(terms["weight"], 1.0), terms


def train_step(state: State, batch: dict[str, jax.Array], *, graphdef, tx: optax.GradientTransformation):
  """One AdamW step on the weighted mean loss over the global batch -> (new state, {loss, grad_norm})."""
  (loss, _), grads = jax.value_and_grad(_loss, has_aux=True)(state["params"], state["rest"], batch, graphdef)
  updates, opt_state = tx.update(grads, state["opt_state"], state["params"])
  new = {"step": state["step"] + 1, "params": optax.apply_updates(state["params"], updates),
         "rest": state["rest"], "opt_state": opt_state}
  return new, {"loss": loss, "grad_norm": optax.tree.norm(grads)}


def eval_step(params, rest, batch: dict[str, jax.Array], *, graphdef) -> dict[str, jax.Array]:
  """Sums of the loss terms over one batch (see loss_terms)."""
  return _forward(graphdef, params, rest, batch)


def num_params(state: State) -> int:
  return int(sum(x.size for x in jax.tree.leaves(state["params"])))
