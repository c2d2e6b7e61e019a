"""The random-feature projection of favor/rbf linear attention: non-trainable, checkpointed state."""
import jax
from flax import nnx

from linear_seq import ops


class RandomProjection(nnx.Variable):
  """Random-feature matrix W [K, m] (`ops.random_projection`).

  A Variable but not an `nnx.Param`: optimizers built with `wrt=nnx.Param` leave it alone, while
  `nnx.state(model)` (and so a checkpoint) includes it. Redraw with `redraw(var, key)`.
  """


def draw(key: jax.Array, head_dim: int, num_features: int) -> jax.Array:
  """A fresh orthogonal random projection [head_dim, num_features]."""
  return ops.random_projection(key, head_dim, num_features, orthogonal=True)


def redraw(var: RandomProjection, key: jax.Array) -> None:
  """Replaces the projection in place with a fresh draw of the same shape."""
  K, m = var[...].shape
  var[...] = draw(key, K, m).astype(var[...].dtype)


def redraw_projections(module: nnx.Module, key: jax.Array) -> int:
  """Redraws every RandomProjection in `module` (e.g. the LM) in place, the i-th from fold_in(key, i);
  returns how many."""
  variables = [v for _, v in nnx.iter_graph(module) if isinstance(v, RandomProjection)]
  for i, var in enumerate(variables):
    redraw(var, jax.random.fold_in(key, i))
  return len(variables)
