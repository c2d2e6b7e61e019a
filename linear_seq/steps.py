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
import numpy as np
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
  n = int(config.train.get("loss_positions", 0))
  train_fn = functools.partial(train_step, graphdef=graphdef, tx=tx, loss_positions=n,
                               accum_steps=int(config.train.get("grad_accum_steps", 1)))
  eval_fn = functools.partial(eval_step, graphdef=graphdef, loss_positions=n)
  train = jax.jit(train_fn, donate_argnames=("state",),
                  out_shardings=(shardings, {"loss": replicated, "grad_norm": replicated}))
  evaluate = jax.jit(eval_fn)
  if config.train.get("debug_checks", False):  # the ops' value checks inside the steps (checkify)
    train, evaluate = checks.checked(train_fn), checks.checked(eval_fn)
  return Static(graphdef, tx, mesh, bool(config.train.fsdp), train, evaluate), abstract, shardings


def init_state(config: ml_collections.ConfigDict, vocab_size: int, static: Static, shardings) -> State:
  """Fresh parameters from config.seed, created directly with their shardings (same values on any mesh)."""
  cfg = model_config(config, vocab_size)
  return jax.jit(_init_fn(cfg, config.seed, static.tx), out_shardings=shardings)()


def merge(static: Static, state: State) -> "model_lib.LM":
  return nnx.merge(static.graphdef, state["params"], state["rest"])


def loss_terms(logits_BTV: jax.Array, batch: dict[str, jax.Array], positions_BK=None) -> dict[str, jax.Array]:
  """Weighted next-token cross entropy: sums over the batch (float32) of nll·w, w, [argmax = target]·w,
  the bytes predicted (for bits per byte: batch['target_bytes'] when given, the bytes of text each target
  stands for, see data/text.py; else the weights), and per position [T] sums of nll·w and w.
  positions_BK: the logits are [B, K, V] at these positions only (weighted_positions); the targets and weights
  are read there and the per-position sums scattered back to [T]."""
  logits_BTV = logits_BTV.astype(jnp.float32)
  targets_BT, w_BT = batch["targets"], batch["weights"].astype(jnp.float32)
  if positions_BK is not None:
    targets_BT, w_BT = (jnp.take_along_axis(a, positions_BK, axis=1) for a in (targets_BT, w_BT))
  logz_BT = jax.nn.logsumexp(logits_BTV, axis=-1)
  nll_BT = logz_BT - jnp.take_along_axis(logits_BTV, targets_BT[..., None], axis=-1)[..., 0]
  correct_BT = (jnp.argmax(logits_BTV, axis=-1) == targets_BT).astype(jnp.float32)
  if positions_BK is None:
    per_position = lambda v_BT: jnp.sum(v_BT, axis=0)  # noqa: E731
  else:
    T = batch["targets"].shape[1]
    per_position = lambda v_BK: jnp.zeros((T,), jnp.float32).at[positions_BK.reshape(-1)].add(v_BK.reshape(-1))  # noqa: E731
  return {"nll": jnp.sum(nll_BT * w_BT), "weight": jnp.sum(w_BT), "correct": jnp.sum(correct_BT * w_BT),
          "byte_weight": jnp.sum(batch["target_bytes"]) if "target_bytes" in batch else jnp.sum(w_BT),
          "position_nll": per_position(nll_BT * w_BT), "position_weight": per_position(w_BT)}


def weighted_positions(weights_BT: jax.Array, n: int) -> jax.Array:
  """[B, n] int32: each row's positions of nonzero weight in order, then (to fill n) positions of zero weight.
  With train.loss_positions = n the head runs only there; exact when no row has more than n weighted
  positions (check_loss_positions)."""
  return jnp.argsort(weights_BT == 0, axis=1, stable=True)[:, :n].astype(jnp.int32)


def check_loss_positions(weights_BT, n: int) -> None:
  """Raises ValueError if a row of this (host) batch has more than n > 0 positions of nonzero weight."""
  if n:
    most = int(np.max(np.count_nonzero(np.asarray(weights_BT), axis=1), initial=0))
    if most > n:
      raise ValueError(f"train.loss_positions={n}, but a row of the batch has {most} positions of nonzero weight; "
                       f"set it to at least {most}, or 0 for logits at every position")


def _forward(graphdef, params, rest, batch, loss_positions: int = 0):
  lm = nnx.merge(graphdef, params, rest)
  positions = weighted_positions(batch["weights"], loss_positions) if loss_positions else None
  logits, _ = lm(batch["inputs"], segment_ids=batch.get("segment_ids"), positions=positions)
  return loss_terms(logits, batch, positions)


def _loss(params, rest, batch, graphdef, loss_positions: int = 0):
  terms = _forward(graphdef, params, rest, batch, loss_positions)
  return terms["nll"] / jnp.maximum(terms["weight"], 1.0), terms


def loss_and_grads(params, rest, batch: dict[str, jax.Array], graphdef, loss_positions: int = 0,
                   accum_steps: int = 1):
  """(the weighted mean loss over the batch, its gradients wrt params).

  accum_steps = N > 1: gradient accumulation. The batch's B rows run as N micro-batches of B/N rows (row r in
  micro-batch r mod N, so each one takes B/N/D rows of every data shard and nothing moves between devices) in a
  lax.scan: their summed nll and gradients of the summed nll are added up and divided once by the batch's total
  weight. That is the one-pass mean over all loss tokens (micro-batches weighted by their loss-token counts),
  equal to float32 rounding, with the activations of one micro-batch in memory.
  """
  if accum_steps == 1:
    (loss, _), grads = jax.value_and_grad(_loss, has_aux=True)(params, rest, batch, graphdef, loss_positions)
    return loss, grads

  def nll_sum(params, micro):
    terms = _forward(graphdef, params, rest, micro, loss_positions)
    return terms["nll"], terms["weight"]

  def add(carry, micro):
    nll, weight, grads = carry
    (n, w), g = jax.value_and_grad(nll_sum, has_aux=True)(params, micro)
    return (nll + n, weight + w, jax.tree.map(jnp.add, grads, g)), None

  micro_batches = jax.tree.map(
      lambda a: jnp.moveaxis(a.reshape(a.shape[0] // accum_steps, accum_steps, *a.shape[1:]), 1, 0), batch)
  zero = jnp.zeros((), jnp.float32)
  (nll, weight, grads), _ = jax.lax.scan(add, (zero, zero, jax.tree.map(jnp.zeros_like, params)), micro_batches)
  weight = jnp.maximum(weight, 1.0)
  return nll / weight, jax.tree.map(lambda g: g / weight, grads)


def train_step(state: State, batch: dict[str, jax.Array], *, graphdef, tx: optax.GradientTransformation,
               loss_positions: int = 0, accum_steps: int = 1):
  """One AdamW step on the weighted mean loss over the global batch -> (new state, {loss, grad_norm}).
  loss_positions > 0: the head only at each row's weighted positions (weighted_positions; the same loss).
  accum_steps > 1: the gradients accumulated over that many micro-batches (loss_and_grads; the same step)."""
  loss, grads = loss_and_grads(state["params"], state["rest"], batch, graphdef, loss_positions, accum_steps)
  updates, opt_state = tx.update(grads, state["opt_state"], state["params"])
  new = {"step": state["step"] + 1, "params": optax.apply_updates(state["params"], updates),
         "rest": state["rest"], "opt_state": opt_state}
  return new, {"loss": loss, "grad_norm": optax.tree.norm(grads)}


def eval_step(params, rest, batch: dict[str, jax.Array], *, graphdef, loss_positions: int = 0) -> dict[str, jax.Array]:
  """Sums of the loss terms over one batch (see loss_terms)."""
  return _forward(graphdef, params, rest, batch, loss_positions)


def num_params(state: State) -> int:
  return int(sum(x.size for x in jax.tree.leaves(state["params"])))
