"""AdamW with linear warmup + cosine decay, global-norm clipping, parameter groups.

Groups come from a label function on the parameter path (by default `param_label`, this module's policy):
  'decay'    — AdamW with weight decay;
  'no_decay' — no weight decay (norms, biases, gate biases);
  'ssm'      — no weight decay and the learning rate times `ssm_lr_multiplier` (the SSM's A and log dt).
One Adam state for all parameters: update = -lr_t · m(label) · (adam(g) + wd(label) · p).
"""
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import optax

LABELS = ("decay", "no_decay", "ssm")
SSM_PARAMS = ("log_A_real", "A_imag", "log_dt")  # the S4 mixer's A and log Δ
_NO_DECAY = ("scale", "bias")


def param_label(path: Sequence[Any]) -> str:
  """'ssm' (the SSM's A and log Δ), 'no_decay' (norm scales, biases incl. gate biases) or 'decay'.

  path: the parameter's path in nnx.state(lm), e.g. ('blocks', '0', 'mixer', 'gate_up', 'bias').
  """
  names = [str(p) for p in path]
  if names and names[-1] == "value":  # tolerate a trailing '.value' key
    names = names[:-1]
  if not names:
    raise ValueError("empty parameter path")
  leaf = names[-1]
  if leaf in SSM_PARAMS:
    return "ssm"
  if leaf in _NO_DECAY or leaf.endswith("_bias") or any("norm" in n for n in names[:-1]):
    return "no_decay"
  return "decay"


def make_schedule(train: ml_collections.ConfigDict) -> optax.Schedule:
  """lr(count): linear warmup to the peak over `warmup_steps` (lr(0) = peak / warmup_steps, so the first step
  already learns), then cosine decay to `end_lr_fraction · peak` at `num_steps`."""
  peak = float(train.learning_rate)
  end = peak * float(train.end_lr_fraction)
  warmup = max(int(train.warmup_steps), 0)
  decay_steps = max(int(train.num_steps) - warmup, 1)

  def schedule(count):
    count = jnp.asarray(count, jnp.float32)
    warm = peak * jnp.minimum(1.0, (count + 1.0) / max(warmup, 1))
    progress = jnp.clip((count - warmup) / decay_steps, 0.0, 1.0)
    cosine = end + (peak - end) * 0.5 * (1.0 + jnp.cos(jnp.pi * progress))
    return jnp.where(count < warmup, warm, cosine)

  return schedule


def path_names(path) -> tuple[str, ...]:
  """A pytree key path of an nnx.State -> ('blocks', '0', 'mixer', 'A_log') (the trailing '.value' dropped)."""
  names = []
  for k in path:
    for attr in ("key", "name", "idx"):
      if hasattr(k, attr):
        names.append(str(getattr(k, attr)))
        break
    else:
      names.append(str(k))
  if names and names[-1] == "value":
    names.pop()
  return tuple(names)


def param_labels(params, label_fn: Callable[[tuple[str, ...]], str]):
  """Pytree of group labels with the structure of `params`; checks every label is known."""
  def label(path, _):
    lab = label_fn(path_names(path))
    if lab not in LABELS:
      raise ValueError(f"param_label{path_names(path)} returned {lab!r}; valid: {', '.join(LABELS)}")
    return lab
  return jax.tree_util.tree_map_with_path(label, params)


def make_optimizer(train: ml_collections.ConfigDict,
                   label_fn: Callable[[tuple[str, ...]], str] = param_label) -> optax.GradientTransformation:
  """clip_by_global_norm -> Adam -> decoupled weight decay ('decay' group) -> SSM lr multiplier -> -lr_t."""
  if train.grad_clip < 0 or train.weight_decay < 0 or train.learning_rate <= 0:
    raise ValueError("train.learning_rate must be > 0 and train.grad_clip, train.weight_decay >= 0; got "
                     f"{train.learning_rate}, {train.grad_clip}, {train.weight_decay}")

  def mask(group):
    return lambda params: jax.tree.map(lambda lab: lab == group, param_labels(params, label_fn))

  # Every part is always present (a no-op when disabled), so the optimizer state has the same structure for any
  # values: a checkpoint restores after changing grad_clip / weight_decay / ssm_lr_multiplier.
  clip = float(train.grad_clip) if train.grad_clip > 0 else float("inf")
  return optax.chain(
      optax.clip_by_global_norm(clip),
      optax.scale_by_adam(b1=float(train.b1), b2=float(train.b2), eps=1e-8),
      optax.add_decayed_weights(float(train.weight_decay), mask=mask("decay")),
      optax.masked(optax.scale(float(train.ssm_lr_multiplier)), mask("ssm")),
      optax.scale_by_learning_rate(make_schedule(train)))
