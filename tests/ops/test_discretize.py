"""Tests for ops.discretize / discretize_diagonal / diagonalize against float64 closed forms.

Tolerances (float32 results vs float64 references, relative RMS unless stated):
  discretize values: 1e-6 (observed ≲ 2e-7); tiny dt·λ (1e-8): 1e-6 elementwise relative;
  gradients diagonal vs dense path: 1e-5; diagonalize transfer function C Aᵗ B: 1e-5.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

from linear_seq import ops
from linear_seq.ops.discretize import DIAGONALIZE_MAX_COND, phi1
from tests.helpers import assert_close

RNG = np.random.default_rng(0)


def _rand_complex(*shape):
  return RNG.normal(size=shape) + 1j * RNG.normal(size=shape)


def _ri(x):
  """Real and imaginary parts stacked, so rel_rms compares complex arrays fully."""
  x = np.asarray(x)
  return np.stack([x.real, x.imag]) if np.iscomplexobj(x) else x


def _ref_zoh(A, B, dt):
  """float64 ZOH via scipy expm of the block matrix (an independent implementation)."""
  N, P = B.shape
  M = np.zeros((N + P, N + P), np.result_type(A, B, np.float64))
  M[:N, :N], M[:N, N:] = A, B
  E = scipy.linalg.expm(M * dt)
  return E[:N, :N], E[:N, N:]


def _ref_bilinear(A, B, dt):
  eye = np.eye(A.shape[0])
  inv = np.linalg.inv(eye - dt / 2 * A)
  return inv @ (eye + dt / 2 * A), inv @ (dt * B)


def test_dense_zoh_and_bilinear_match_closed_forms():
  N, P, dt = 5, 3, 0.3
  A = -np.eye(N) + 0.5 * RNG.normal(size=(N, N))
  B = RNG.normal(size=(N, P))
  Ab, Bb = ops.discretize(A, B, dt, method="zoh")
  assert Ab.dtype == jnp.float32 and Bb.shape == (N, P)
  expAdt = scipy.linalg.expm(A * dt)
  assert_close(Ab, expAdt, 1e-6, "zoh Ab")
  assert_close(Bb, np.linalg.solve(A, (expAdt - np.eye(N)) @ B), 1e-6, "zoh Bb = A⁻¹(Ab − I)B")
  Ab, Bb = ops.discretize(A, B, dt, method="bilinear")
  assert_close((Ab, Bb), _ref_bilinear(A, B, dt), 1e-6, "bilinear")


@pytest.mark.parametrize("lam", [-0.7, 0.4])
def test_scalar_system_analytic(lam):
  b, dt = 1.3, 0.25
  e = np.exp(lam * dt)
  zoh = (e, (e - 1) / lam * b)
  bil = ((1 + dt * lam / 2) / (1 - dt * lam / 2), dt * b / (1 - dt * lam / 2))
  for A in (np.array([[lam]]), np.array([lam])):  # dense and diagonal
    for method, ref in (("zoh", zoh), ("bilinear", bil)):
      Ab, Bb = ops.discretize(A, np.array([[b]]), dt, method=method)
      np.testing.assert_allclose(np.ravel(Ab)[0], ref[0], rtol=1e-6)
      np.testing.assert_allclose(np.ravel(Bb)[0], ref[1], rtol=1e-6)


def test_singular_A_is_exact():
  B = RNG.normal(size=(3, 2))
  dt = 0.37
  for A in (np.zeros((3, 3)), np.zeros(3)):  # A = 0: Ab = I, Bb = dt·B
    Ab, Bb = ops.discretize(A, B, dt)
    np.testing.assert_allclose(Ab, np.eye(3) if A.ndim == 2 else np.ones(3), rtol=1e-7)
    np.testing.assert_allclose(Bb, dt * B, rtol=1e-6)
  # nilpotent A: exp(dt A) = I + dt A, Bb = (dt I + dt²/2 A) B
  A = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 2.0], [0.0, 0.0, 0.0]])
  Ab, Bb = ops.discretize(A, B, dt)
  assert_close(Ab, np.eye(3) + dt * A + dt**2 / 2 * A @ A, 1e-7, "nilpotent Ab")
  assert_close(Bb, (dt * np.eye(3) + dt**2 / 2 * A + dt**3 / 6 * A @ A) @ B, 1e-6, "nilpotent Bb")
  assert_close(_ref_zoh(A, B, dt), (Ab, Bb), 1e-6, "nilpotent vs scipy")


def test_tiny_dt_lambda_is_exact_in_value_and_gradient():
  lam = np.array([1e-8, -3e-8, 2e-8 + 1e-8j, -1e-9j, 0.0], np.complex128)
  B = np.ones((5, 1))
  dt = 0.5
  _, Bb = ops.discretize(lam, B, dt)
  ref = dt * (1 + dt * lam / 2)  # φ1(z) = 1 + z/2 + O(z²)
  np.testing.assert_allclose(np.asarray(Bb)[:, 0], ref, rtol=1e-6)
  # d Bb / d Re λ = dt² φ1'(z) ≈ dt²/2 at z ≈ 0: no cancellation, no 0/0 at λ = 0.
  g = jax.grad(lambda x: jnp.sum(jnp.real(ops.discretize(x.astype(jnp.complex64), B, dt)[1])))(
      jnp.asarray(lam.real, jnp.float32))
  np.testing.assert_allclose(g, dt**2 / 2, rtol=1e-6)


def test_phi1_accurate_across_its_branches():
  # |z| straddling the Taylor radius 0.5, several phases; reference in complex128.
  r = np.array([1e-6, 1e-3, 0.1, 0.49, 0.51, 1.0, 5.0, 30.0])
  z = (r[:, None] * np.exp(1j * np.linspace(0, 2 * np.pi, 7))[None]).ravel()
  z = z.astype(np.complex64).astype(np.complex128)
  ref = np.expm1(z) / z
  got = np.asarray(phi1(jnp.asarray(z, jnp.complex64)))
  np.testing.assert_allclose(got, ref, rtol=2e-6)
  # its derivative (real direction) against the series / closed form (z e^z − expm1 z)/z²
  x = np.array([-2.0, -0.6, -0.49, -1e-3, 0.0, 1e-4, 0.3, 0.51, 2.0])
  dref = np.where(x == 0, 0.5, (x * np.exp(x) - np.expm1(x)) / np.where(x == 0, 1, x) ** 2)
  dref[np.abs(x) < 1e-2] = 0.5 + x[np.abs(x) < 1e-2] / 3
  d = jax.vmap(jax.grad(phi1))(jnp.asarray(x, jnp.float32))
  np.testing.assert_allclose(d, dref, rtol=3e-6)


@pytest.mark.parametrize("method", ["zoh", "bilinear"])
def test_complex_diagonal_matches_dense_and_reference(method):
  N, P, dt = 4, 2, 0.2
  lam = -RNG.uniform(0.1, 1.0, N) + 1j * RNG.normal(size=N) * 4
  B = _rand_complex(N, P)
  Ab_d, Bb_d = ops.discretize(lam, B, dt, method=method)
  assert Ab_d.dtype == jnp.complex64 and Ab_d.shape == (N,)
  Ab, Bb = ops.discretize(np.diag(lam), B, dt, method=method)  # dense complex path
  assert_close((_ri(np.diag(Ab_d)), _ri(Bb_d)), (_ri(Ab), _ri(Bb)), 1e-6, "diagonal vs dense")
  ref = (_ref_zoh if method == "zoh" else _ref_bilinear)(np.diag(lam), B, dt)
  assert_close((_ri(np.diag(Ab_d)), _ri(Bb_d)), tuple(_ri(r) for r in ref), 1e-6, method)


def test_per_state_dt_and_batched_diagonal():
  H, N = 3, 4
  lam = -RNG.uniform(0.1, 1.0, (H, N)) + 1j * RNG.normal(size=(H, N))
  B = _rand_complex(H, N)
  dt = np.exp(RNG.uniform(-4, -1, (H, 1)))
  Ab, Bb = ops.discretize_diagonal(lam, B, dt, "zoh")
  assert Ab.shape == Bb.shape == (H, N)
  for h in range(H):
    Ab_h, Bb_h = ops.discretize(lam[h], B[h][:, None], np.full(N, dt[h, 0]))  # dt per state [N]
    np.testing.assert_allclose(Ab[h], Ab_h, rtol=1e-6)
    np.testing.assert_allclose(Bb[h], Bb_h[:, 0], rtol=1e-6)
  # vmap of the ssm signature over channels works and agrees
  Ab_v, Bb_v = jax.vmap(lambda a, b, d: ops.discretize(a, b[:, None], d[0], method="zoh"))(lam, B, dt)
  np.testing.assert_allclose(Ab_v, Ab, rtol=1e-6)
  np.testing.assert_allclose(Bb_v[..., 0], Bb, rtol=1e-6)


@pytest.mark.parametrize("method", ["zoh", "bilinear"])
def test_gradients_diagonal_path_match_dense_path(method):
  N, P = 3, 2
  lam = jnp.asarray(-RNG.uniform(0.1, 2.0, N), jnp.float32)
  B = jnp.asarray(RNG.normal(size=(N, P)), jnp.float32)
  wA, wB = RNG.normal(size=N), RNG.normal(size=(N, P))

  def loss_diag(lam, B, dt):
    Ab, Bb = ops.discretize(lam, B, dt, method=method)
    return jnp.sum(wA * Ab) + jnp.sum(wB * Bb)

  def loss_dense(lam, B, dt):
    Ab, Bb = ops.discretize(jnp.diag(lam), B, dt, method=method)
    return jnp.sum(wA * jnp.diag(Ab)) + jnp.sum(wB * Bb)

  g_diag = jax.jit(jax.grad(loss_diag, argnums=(0, 1, 2)))(lam, B, 0.3)
  g_dense = jax.jit(jax.grad(loss_dense, argnums=(0, 1, 2)))(lam, B, 0.3)
  assert_close(g_diag, g_dense, 1e-5, f"{method} grads")


def test_discretize_under_jit_skips_dt_check():
  f = jax.jit(lambda dt: ops.discretize(jnp.array([-1.0]), jnp.ones((1, 1)), dt)[0])
  assert np.isfinite(f(0.1)).all()


def test_diagonalize_reproduces_the_transfer_function():
  N, P, Q = 6, 2, 3
  A = -np.eye(N) + 0.4 * RNG.normal(size=(N, N))
  B, C = RNG.normal(size=(N, P)), RNG.normal(size=(Q, N))
  lam, Bp, Cp = ops.diagonalize(A, B, C)
  assert (lam.shape, Bp.shape, Cp.shape) == ((N,), (N, P), (Q, N)) and lam.dtype == jnp.complex64
  lam, Bp, Cp = (np.asarray(x, np.complex128) for x in (lam, Bp, Cp))
  for t in (0, 1, 5):
    ref = C @ np.linalg.matrix_power(A, t) @ B
    got = Cp @ np.diag(lam**t) @ Bp
    assert_close(got.real, ref, 1e-5, f"t={t}")
    assert np.abs(got.imag).max() < 1e-5 * np.abs(ref).max()


def test_diagonalize_errors():
  jordan = np.array([[-1.0, 1.0], [0.0, -1.0]])
  with pytest.raises(ValueError, match=r"ill-conditioned.*max_cond 1e\+04"):
    ops.diagonalize(jordan, np.ones((2, 1)), np.ones((1, 2)))
  near = np.array([[-1.0, 1.0], [0.0, -1.0 + 1e-7]])  # diagonalizable, cond ≈ 1e7 > DIAGONALIZE_MAX_COND
  with pytest.raises(ValueError, match="ill-conditioned"):
    ops.diagonalize(near, np.ones((2, 1)), np.ones((1, 2)))
  assert DIAGONALIZE_MAX_COND == 1e4
  ops.diagonalize(near, np.ones((2, 1)), np.ones((1, 2)), max_cond=1e9)  # threshold is adjustable
  with pytest.raises(ValueError, match=r"A has shape \[2, 3\], expected \[N, N\]"):
    ops.diagonalize(np.ones((2, 3)), np.ones((2, 1)), np.ones((1, 2)))
  with pytest.raises(ValueError, match=r"B has shape \[3, 1\], expected \[2, \?\]"):
    ops.diagonalize(-np.eye(2), np.ones((3, 1)), np.ones((1, 2)))
  with pytest.raises(ValueError, match=r"C has shape \[1, 3\], expected \[\?, 2\]"):
    ops.diagonalize(-np.eye(2), np.ones((2, 1)), np.ones((1, 3)))
  with pytest.raises(ValueError, match="must be finite"):
    ops.diagonalize(np.array([[np.nan, 0.0], [0.0, 1.0]]), np.ones((2, 1)), np.ones((1, 2)))


@pytest.mark.parametrize("traced", ["A", "B", "C"])
def test_diagonalize_rejects_tracers(traced):
  """Under jit any of A, B, C is a tracer: an init-time transform cannot run there."""
  args = {"A": -jnp.eye(2), "B": jnp.ones((2, 1)), "C": jnp.ones((1, 2))}
  def f(x):
    return ops.diagonalize(**{**args, traced: x})
  with pytest.raises(TypeError, match=f"diagonalize is an init-time transform and needs concrete {traced} "
                     r"\(not a jax tracer\)"):
    jax.jit(f)(args[traced])


def test_discretize_errors():
  A, B = -np.eye(3), np.ones((3, 2))
  with pytest.raises(ValueError, match="unknown discretization method 'euler'; valid: zoh, bilinear"):
    ops.discretize(A, B, 0.1, method="euler")
  for bad in (0.0, -0.1, np.array([0.1, -1.0, 0.1])):
    with pytest.raises(ValueError, match="dt must be real and > 0"):
      ops.discretize(np.diag(A), B, bad)
  with pytest.raises(ValueError, match="dt must be real and > 0"):
    ops.discretize(A, B, 0.0, method="bilinear")
  with pytest.raises(ValueError, match=r"A has shape \[3, 2\], expected \[N, N\] \(dense\) or \[N\]"):
    ops.discretize(np.ones((3, 2)), B, 0.1)
  with pytest.raises(ValueError, match=r"B has shape \[4, 2\], expected \[3, \?\] \(\[N, P\] with N=3"):
    ops.discretize(A, np.ones((4, 2)), 0.1)
  with pytest.raises(ValueError, match=r"B has shape \[3\], expected \[3, \?\]"):
    ops.discretize(np.diag(A), np.ones(3), 0.1)
  with pytest.raises(ValueError, match=r"dt has shape \[3\], expected a scalar for dense A"):
    ops.discretize(A, B, np.full(3, 0.1))
  with pytest.raises(ValueError, match=r"dt has shape \[2\], expected a scalar or \[N=3\]"):
    ops.discretize(np.diag(A), B, np.full(2, 0.1))
  with pytest.raises(ValueError, match="unknown discretization method"):
    ops.discretize_diagonal(np.diag(A), B, 0.1, "foh")
