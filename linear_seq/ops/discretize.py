"""Continuous -> discrete state-space systems (seed eq. 12-18) and diagonalization (eq. 21-25).

Column convention (DESIGN.md): x'(t) = A x + B u, y = C x + D u, with A [N,N] dense or [N] diagonal
(real or complex), B [N,P], C [Q,N]. Discrete system: x_t = Ab x_{t-1} + Bb u_t.

  ZOH:      Ab = exp(dt A),  Bb = A⁻¹(exp(dt A) − I) B = (∫_0^dt exp(sA) ds) B
  bilinear: Ab = (I − dt/2 A)⁻¹ (I + dt/2 A),  Bb = (I − dt/2 A)⁻¹ dt B

Dense ZOH is read off one matrix exponential, expm([[A, B], [0, 0]]·dt) = [[Ab, Bb], [0, I]], so a
singular A is exact. Diagonal ZOH uses Bb = dt·φ1(dt λ)·B with φ1(z) = expm1(z)/z, evaluated by a
Taylor series for |z| < 0.5 (φ1(0) = 1: λ = 0 gives Bb = dt·B; dt·λ = 1e-8 stays exact to float32
rounding, in value and gradient) and by an accurate complex expm1 elsewhere.
Results are float32 (complex64 when A or B is complex), or wider when the inputs are.
"""
import jax
import jax.numpy as jnp
import numpy as np

from linear_seq.checks import check_choice, check_shape, if_concrete, is_concrete

DISCRETIZE_METHODS = ("zoh", "bilinear")
DIAGONALIZE_MAX_COND = 1e4  # largest accepted 2-norm condition number of the eigenvector matrix P
_TAYLOR_RADIUS = 0.5  # |z| below which φ1 uses its Taylor series (10 terms: error < 3e-11)


def _compute_dtype(*xs):
  """At least float32; complex (at least complex64) when any input is complex."""
  dt = jnp.result_type(*[jnp.asarray(x).dtype for x in xs])
  if jnp.issubdtype(dt, jnp.complexfloating):
    return jnp.promote_types(dt, jnp.complex64)
  return jnp.promote_types(dt, jnp.float32)


def expm1_complex(z):
  """expm1 accurate near 0 for real or complex z.

  Complex: expm1(x + iy) = expm1(x)·cos y − 2 sin²(y/2) + i·e^x·sin y (no cancellation at small z).
  """
  if not jnp.iscomplexobj(z):
    return jnp.expm1(z)
  x, y = jnp.real(z), jnp.imag(z)
  re = jnp.expm1(x) * jnp.cos(y) - 2.0 * jnp.sin(0.5 * y) ** 2
  im = jnp.exp(x) * jnp.sin(y)
  return jax.lax.complex(re, im)


def phi1(z):
  """φ1(z) = expm1(z)/z with φ1(0) = 1; accurate (value and derivative) for all z, real or complex."""
  small = jnp.abs(z) < _TAYLOR_RADIUS
  # Taylor: Σ_{k=0}^{9} z^k/(k+1)!, Horner form.
  zs = jnp.where(small, z, jnp.zeros_like(z))
  taylor = jnp.ones_like(z)
  for k in range(9, 0, -1):
    taylor = 1.0 + zs * taylor / (k + 1)
  zl = jnp.where(small, jnp.ones_like(z), z)  # double-where: no 0/0 in the unused branch's gradient
  return jnp.where(small, taylor, expm1_complex(zl) / zl)


def _check_dt_positive(dt) -> None:
  if_concrete(dt, lambda d: not np.iscomplexobj(d) and np.all(d > 0),
              lambda d: f"dt must be real and > 0, got {d if d.size <= 8 else f'an array with min {d.min()}'}")


def discretize_diagonal(lam, B, dt, method: str = "zoh"):
  """Elementwise discretization of diagonal systems, batched over leading dims (the S4D path).

  lam [..., N] (real or complex), B [..., N] or [..., N, P] (B multiplies elementwise along N, with
  a trailing P if given), dt broadcastable to lam ([...,1] per channel, [..., N] per state, or a
  scalar). Returns (Ab [..., N], Bb shaped like B·broadcast).
  ZOH: Ab = exp(dt λ), Bb = dt·φ1(dt λ)·B.  Bilinear: Ab = (1 + dt λ/2)/(1 − dt λ/2), Bb = dt/(1 − dt λ/2)·B.
  """
  check_choice("discretization method", method, DISCRETIZE_METHODS)
  _check_dt_positive(dt)
  cdt = _compute_dtype(lam, B)
  lam = jnp.asarray(lam, cdt)
  B = jnp.asarray(B, cdt)
  dt = jnp.asarray(dt).astype(jnp.finfo(cdt).dtype)
  z = dt * lam
  if method == "zoh":
    Ab = jnp.exp(z)
    scale = dt * phi1(z)
  else:
    denom = 1.0 - 0.5 * z
    Ab = (1.0 + 0.5 * z) / denom
    scale = dt / denom
  scale = jnp.broadcast_to(scale, jnp.broadcast_shapes(scale.shape, lam.shape))
  Bb = scale * B if B.ndim == scale.ndim else scale[..., None] * B
  return Ab, Bb


def discretize(A, B, dt, method: str = "zoh"):
  """Discretize x' = A x + B u with step dt (seed eq. 14-18), column convention.

  A [N,N] dense or [N] diagonal (real or complex); B [N,P]; dt a scalar > 0 (for diagonal A also
  broadcastable per state, shape [N]). method: 'zoh' | 'bilinear'. Returns (Ab, Bb) with Ab shaped
  like A and Bb [N,P]. dt ≤ 0 raises when dt's value is concrete (skipped under jit).
  """
  check_choice("discretization method", method, DISCRETIZE_METHODS)
  a_shape = tuple(np.shape(A))
  if len(a_shape) not in (1, 2) or (len(a_shape) == 2 and a_shape[0] != a_shape[1]):
    raise ValueError(f"A has shape {list(a_shape)}, expected [N, N] (dense) or [N] (diagonal)")
  N = a_shape[0]
  check_shape("B", B, (N, None), f"([N, P] with N={N} from A)")
  dt_shape = tuple(np.shape(dt))
  if len(a_shape) == 1:
    if dt_shape not in ((), (1,), (N,)):
      raise ValueError(f"dt has shape {list(dt_shape)}, expected a scalar or [N={N}] for diagonal A")
    return discretize_diagonal(A, B, jnp.reshape(dt, (-1,)) if dt_shape else dt, method)
  if dt_shape not in ((), (1,)):
    raise ValueError(f"dt has shape {list(dt_shape)}, expected a scalar for dense A")
  _check_dt_positive(dt)
  cdt = _compute_dtype(A, B)
  A = jnp.asarray(A, cdt)
  B = jnp.asarray(B, cdt)
  dt = jnp.reshape(jnp.asarray(dt), ()).astype(jnp.finfo(cdt).dtype)
  P = B.shape[1]
  if method == "zoh":
    M = jnp.zeros((N + P, N + P), cdt).at[:N, :N].set(A).at[:N, N:].set(B)
    E = jax.scipy.linalg.expm(M * dt)
    return E[:N, :N], E[:N, N:]
  eye = jnp.eye(N, dtype=cdt)
  lhs = eye - 0.5 * dt * A
  Ab = jnp.linalg.solve(lhs, eye + 0.5 * dt * A)
  Bb = jnp.linalg.solve(lhs, dt * B)
  return Ab, Bb


def diagonalize(A, B, C, *, max_cond: float = DIAGONALIZE_MAX_COND):
  """A = P Λ P⁻¹ -> (Λ [N], P⁻¹B [N,P], C P [Q,N]), all complex64 (seed eq. 21-25).

  Init-time transform on concrete values (numpy, float64 inside; eigenvectors have no gradient).
  The transfer function is unchanged: C Aᵗ B = (C P) Λᵗ (P⁻¹ B), so with y = Re(C' x) the diagonal
  system reproduces the dense one (conjugate eigenvalue pairs cancel the imaginary parts).
  Raises ValueError when cond₂(P) > max_cond (default 1e4: float32 errors grow by up to that
  factor), e.g. for a defective matrix such as a Jordan block, or on non-finite input.
  """
  for name, x in (("A", A), ("B", B), ("C", C)):
    if not is_concrete(x):
      raise TypeError(f"diagonalize is an init-time transform and needs concrete {name} (not a jax tracer)")
  A, B, C = (np.asarray(x) for x in (A, B, C))
  if A.ndim != 2 or A.shape[0] != A.shape[1]:
    raise ValueError(f"A has shape {list(A.shape)}, expected [N, N]")
  N = A.shape[0]
  check_shape("B", B, (N, None), f"([N, P] with N={N} from A)")
  check_shape("C", C, (None, N), f"([Q, N] with N={N} from A)")
  if not all(np.all(np.isfinite(x)) for x in (A, B, C)):
    raise ValueError("diagonalize: A, B and C must be finite")
  wide = np.complex128
  lam, P = np.linalg.eig(A.astype(wide))
  cond = np.linalg.cond(P)
  if not np.isfinite(cond) or cond > max_cond:
    raise ValueError(f"diagonalize: eigenvector matrix is ill-conditioned (cond {cond:.3g} > max_cond "
                     f"{max_cond:.3g}); A is (nearly) defective, use the dense system instead")
  Bp = np.linalg.solve(P, B.astype(wide))
  Cp = C.astype(wide) @ P
  return tuple(jnp.asarray(x, jnp.complex64) for x in (lam, Bp, Cp))
