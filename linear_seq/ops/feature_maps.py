"""Feature maps φ for kernelized linear attention: sim(q, k) = φ(q)·φ(k) (seed eq. 6-9, seed 001).

Each map takes x[..., K] and returns φ(x)[..., K'] (computed in float32, returned in x's dtype):

  name       φ(x)                                   K'           φ(x)·φ(y)
  identity   x                                      K            x·y                (can be < 0)
  relu       max(x, 0)                              K            ≥ 0
  elu1       elu(x) + 1                             K            > 0
  exp        exp(x)                                 K            Σ_d exp(x_d + y_d) > 0
  sincos     [sin x, cos x]                         2K           Σ_d cos(x_d − y_d) (can be < 0)
  taylor     [1, x, vec(x xᵀ)/√2]                   1 + K + K²   1 + x·y + (x·y)²/2 ≥ 1/2 (Based)
  favor      exp(Wᵀx − |x|²/2) / √m                 m            ≈ exp(x·y)           (FAVOR+)
  rbf        exp(Wᵀx − |x|²) / √m                   m            ≈ exp(−|x − y|²/2)

`favor` and `rbf` are positive random features, unbiased for their kernels when the columns of
W [K, m] are N(0, I_K) (`random_projection`): E_w[exp(wᵀ(x+y))] = exp(|x + y|²/2).

Numerical stabilization. `phi(x)` is always the exact map above (unbiased for the random ones).
`exp`, `favor` and `rbf` are exponentials of log-features ℓ(x) (`FeatureMap.log_features`); a shift
of ℓ by a constant c multiplies φ by e^{−c}. `phi(x, row_shift=True)` subtracts the per-row max
max_d ℓ(x)_d: that rescales each row by its own positive factor, which cancels exactly in normalized
attention on the *query* side only (on keys it would reweight tokens). `ops.linear_attention`
stabilizes both sides when it normalizes: queries by this row shift, keys by a running max over
time and features carried as an extra decay (see linear_attention.py).
"""
import dataclasses
import math
from typing import Callable

import jax
import jax.numpy as jnp

from linear_seq.checks import check_choice, check_positive_int, check_shape


@dataclasses.dataclass(frozen=True)
class FeatureMap:
  """A named feature map. Call as `phi(x)` (deterministic) or `phi(x, projection=W)` (random).

  Attributes:
    name: registry name.
    fn: (x float32 [..., K], W or None) -> features [..., K'] (exact map).
    log_fn: for exponential maps, (x, W) -> ℓ(x) with φ = exp(ℓ); else None.
    random: needs `projection=` (W [K, m] from `random_projection`).
    positive_kernel: φ(x)·φ(y) ≥ 0 for all x, y, so the normalizer φ(q)·z is safe.
  """
  name: str
  fn: Callable
  log_fn: Callable | None
  random: bool
  positive_kernel: bool

  def _prepare(self, x, projection):
    x = jnp.asarray(x)
    if self.random and projection is None:
      raise ValueError(f"feature map {self.name!r} is a random-feature map and needs "
                       "projection=random_projection(key, K, m) (an array [K, m])")
    if not self.random and projection is not None:
      raise ValueError(f"feature map {self.name!r} is deterministic and takes no projection "
                       f"(random-feature maps: {', '.join(n for n, f in FEATURE_MAPS.items() if f.random)})")
    if projection is not None:
      check_shape("projection", projection, (x.shape[-1], None),
                  "[K, m] with K = the last dim of x")
      projection = jnp.asarray(projection, jnp.float32)
    return x, projection

  def __call__(self, x, projection=None, *, row_shift: bool = False):
    """φ(x): x[..., K] -> [..., K'] in x's dtype.

    row_shift: exponential maps only — divide each row by its largest feature (exp of the row
      max of ℓ(x), gradient stopped); cancels in normalized attention when applied to queries.
    """
    x, projection = self._prepare(x, projection)
    x32 = x.astype(jnp.float32)
    if row_shift:
      if self.log_fn is None:
        raise ValueError(f"row_shift applies to the exponential maps (exp, favor, rbf), "
                         f"not {self.name!r}")
      log_phi = self.log_fn(x32, projection)
      log_phi = log_phi - jax.lax.stop_gradient(jnp.max(log_phi, axis=-1, keepdims=True))
      return jnp.exp(log_phi).astype(x.dtype)
    return self.fn(x32, projection).astype(x.dtype)

  def log_features(self, x, projection=None):
    """ℓ(x) in float32 with φ(x) = exp(ℓ(x)); exponential maps only."""
    if self.log_fn is None:
      raise ValueError(f"feature map {self.name!r} is not an exponential map (exp, favor, rbf)")
    x, projection = self._prepare(x, projection)
    return self.log_fn(x.astype(jnp.float32), projection)


def _taylor(x, _):
  # φ(x)·φ(y) = 1 + x·y + Σ_ij x_i x_j y_i y_j / 2 = 1 + x·y + (x·y)²/2.
  outer = (x[..., :, None] * x[..., None, :]).reshape(*x.shape[:-1], x.shape[-1] ** 2)
  return jnp.concatenate([jnp.ones_like(x[..., :1]), x, outer * (0.5 ** 0.5)], axis=-1)


def _log_favor(x, W):
  m = W.shape[-1]
  sq = 0.5 * jnp.sum(x * x, axis=-1, keepdims=True)
  return x @ W - sq - 0.5 * math.log(m)


def _log_rbf(x, W):
  # exp(−|x − y|²/2) = exp(−|x|²/2) exp(−|y|²/2) exp(x·y): FAVOR+ features times exp(−|x|²/2).
  return _log_favor(x, W) - 0.5 * jnp.sum(x * x, axis=-1, keepdims=True)


def _exp_map(log_fn):
  return lambda x, W: jnp.exp(log_fn(x, W))


_identity_log = lambda x, _: x  # noqa: E731  (ℓ of the `exp` map)

FEATURE_MAPS: dict[str, FeatureMap] = {
    "identity": FeatureMap("identity", lambda x, _: x, None, random=False, positive_kernel=False),
    "relu": FeatureMap("relu", lambda x, _: jax.nn.relu(x), None, random=False, positive_kernel=True),
    "elu1": FeatureMap("elu1", lambda x, _: jax.nn.elu(x) + 1.0, None, random=False,
                       positive_kernel=True),
    "exp": FeatureMap("exp", _exp_map(_identity_log), _identity_log, random=False,
                      positive_kernel=True),
    "sincos": FeatureMap("sincos", lambda x, _: jnp.concatenate([jnp.sin(x), jnp.cos(x)], -1), None,
                         random=False, positive_kernel=False),
    "taylor": FeatureMap("taylor", _taylor, None, random=False, positive_kernel=True),
    "favor": FeatureMap("favor", _exp_map(_log_favor), _log_favor, random=True, positive_kernel=True),
    "rbf": FeatureMap("rbf", _exp_map(_log_rbf), _log_rbf, random=True, positive_kernel=True),
}


def feature_map(name: str) -> FeatureMap:
  """The feature map called `name` (see FEATURE_MAPS); raises ValueError listing the valid names."""
  check_choice("feature map", name, tuple(FEATURE_MAPS))
  return FEATURE_MAPS[name]


def random_projection(key, K: int, m: int, orthogonal: bool = True) -> jax.Array:
  """Random features W [K, m] float32 whose columns are each distributed N(0, I_K).

  orthogonal=True (Performer's ORF): columns come in blocks of K mutually orthogonal directions
  (Haar-random: QR of a Gaussian with the signs of diag(R) fixed), each column rescaled by an
  independent chi_K norm (the norm of a fresh N(0, I_K) vector), so every column is still N(0, I_K)
  and the features stay unbiased, with lower variance. m > K stacks ceil(m / K) independent blocks
  and keeps the first m columns. orthogonal=False: i.i.d. N(0, 1) entries.
  """
  check_positive_int("K", K)
  check_positive_int("m", m)
  if not orthogonal:
    return jax.random.normal(key, (K, m), jnp.float32)
  n_blocks = -(-m // K)
  k_dir, k_norm = jax.random.split(key)
  g = jax.random.normal(k_dir, (n_blocks, K, K), jnp.float32)
  q, r = jnp.linalg.qr(g)
  signs = jnp.where(jnp.diagonal(r, axis1=-2, axis2=-1) < 0, -1.0, 1.0)
  q = q * signs[..., None, :]  # Haar-distributed, not QR-biased
  norms = jnp.linalg.norm(jax.random.normal(k_norm, (n_blocks, K, K), jnp.float32), axis=-2)
  blocks = q * norms[:, None, :]  # [n_blocks, K, K]: column j of block b
  return jnp.transpose(blocks, (1, 0, 2)).reshape(K, n_blocks * K)[:, :m]


def positive_kernel_maps() -> tuple[str, ...]:
  """Names of the maps with φ(x)·φ(y) ≥ 0 (safe for the normalizer)."""
  return tuple(n for n, f in FEATURE_MAPS.items() if f.positive_kernel)

