"""Tests for ops.ssm / ssm_diag_channels / ssm_kernel / causal_conv_fft.

References are float64 numpy: the recurrence as a Python loop, explicit matrix powers, and direct
convolution. Tolerances (float32, relative RMS):
  outputs and final states vs the float64 loop: 1e-5 (observed ≲ 5e-7 at T = 257);
  kernel vs matrix powers: 1e-5; causal_conv_fft vs direct convolution: 1e-5;
  gradients fft vs scan / assoc with random cotangents: 2e-5 (observed ≲ 6e-7, 5e-6 for the scalar dt);
  ssm_diag_channels 'chunk' vs 'scan' with resets, values, final states and gradients: 1e-5 (observed ≲ 5e-7);
  long sequence (T = 2048, |Ab| ≈ 1 − 5e-4) fft vs scan, values and gradients: 1e-5 (observed ≲ 5e-7);
  bfloat16 u vs float32 u: 2e-2.
Causality: scan/assoc Jacobians are exactly zero above the diagonal; fft's are ≤ 1e-6 · max|J|
(FFT rounding spreads ~1e-7 relative noise over all positions).
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from linear_seq import ops
from tests.helpers import assert_close, vjp_grads

_ssm = jax.jit(ops.ssm, static_argnames=("mode",))
_chan = jax.jit(ops.ssm_diag_channels, static_argnames=("mode",))
B, P, Q, N = 2, 2, 3, 5


def _ri(x):
  x = np.asarray(x)
  return np.stack([x.real, x.imag]) if np.iscomplexobj(x) else x


def _cotangents(key, f, *args):
  """Fixed random cotangents shaped like f(*args) (normal; complex normal for complex outputs)."""
  leaves, tree = jax.tree.flatten(jax.eval_shape(f, *args))
  keys = jax.random.split(key, len(leaves))
  return jax.tree.unflatten(tree, [jax.random.normal(k, s.shape, s.dtype) for k, s in zip(keys, leaves)])


def _with_grads(f, args, key):
  """(f(*args), the gradients of Σ ⟨f(*args), fixed random cotangents⟩ wrt every non-None arg), jitted."""
  return jax.jit(lambda *a: (f(*a), vjp_grads(f, a, _cotangents(key, f, *args))))(*args)


def _assert_runs_match(run_a, run_b, tol):
  """Two _with_grads results of (y, x_T)-valued functions agree in y, x_T and every gradient."""
  ((y_a, x_a), g_a), ((y_b, x_b), g_b) = run_a, run_b
  assert_close(y_a, y_b, tol, "y")
  assert_close(_ri(x_a), _ri(x_b), tol, "x_T")
  for i, (a, b) in enumerate(zip(g_a, g_b)):
    assert_close(_ri(a), _ri(b), tol, f"grad[{i}]")


def _system(kind, seed=0):
  """(Ab, Bb, C, D) float32/complex64 numpy: 'dense' real, 'diag' complex, 'diag_real' with Ab < 0 entries."""
  rng = np.random.default_rng(seed)
  D = rng.normal(size=(Q, P)).astype(np.float32)
  if kind == "dense":
    S = rng.normal(size=(N, N))
    A = 0.7 * (S - S.T) - 0.3 * np.eye(N)  # stable, oscillating
    Ab, Bb = ops.discretize(A, rng.normal(size=(N, P)), 0.1)
    return np.asarray(Ab), np.asarray(Bb), rng.normal(size=(Q, N)).astype(np.float32), D
  if kind == "diag":
    lam = -rng.uniform(0.05, 0.5, N) + 1j * rng.normal(size=N) * 3
    Ab, Bb = ops.discretize(lam, rng.normal(size=(N, P)) + 1j * rng.normal(size=(N, P)), 0.1)
    C = (rng.normal(size=(Q, N)) + 1j * rng.normal(size=(Q, N))).astype(np.complex64)
    return np.asarray(Ab), np.asarray(Bb), C, D
  Ab = rng.uniform(-0.97, 0.97, N).astype(np.float32)
  return Ab, rng.normal(size=(N, P)).astype(np.float32), rng.normal(size=(Q, N)).astype(np.float32), D


def _inputs(T, Ab, x0, seed=1):
  rng = np.random.default_rng(seed)
  u = rng.normal(size=(B, T, P)).astype(np.float32)
  if not x0:
    return u, None
  x = rng.normal(size=(B, N)) + (1j * rng.normal(size=(B, N)) if np.iscomplexobj(Ab) else 0)
  return u, x.astype(np.complex64 if np.iscomplexobj(Ab) else np.float32)


def _ref_ssm(u, Ab, Bb, C, D, x0):
  """float64 loop of x_t = Ab x_{t-1} + Bb u_t, y_t = Re(C x_t) + D u_t."""
  Ab, Bb, C = (np.asarray(a, np.complex128) for a in (Ab, Bb, C))
  x = np.zeros((u.shape[0], Bb.shape[0]), np.complex128) if x0 is None else np.asarray(x0, np.complex128)
  ys = []
  for t in range(u.shape[1]):
    x = (x * Ab if Ab.ndim == 1 else x @ Ab.T) + u[:, t].astype(np.float64) @ Bb.T
    ys.append((x @ C.T).real + u[:, t] @ np.asarray(D, np.float64).T)
  return np.stack(ys, 1), x


CASES = [("dense", 7, False), ("diag", 100, True), ("dense", 257, True), ("diag", 257, False),
         ("diag_real", 100, True), ("diag_real", 1, True)]


@pytest.mark.parametrize("kind,T,with_x0", CASES)
def test_modes_match_float64_loop(kind, T, with_x0):
  Ab, Bb, C, D = _system(kind)
  u, x0 = _inputs(T, Ab, with_x0)
  y_ref, x_ref = _ref_ssm(u, Ab, Bb, C, D, x0)
  for mode in ops.SSM_MODES:
    y, x_T = _ssm(u, Ab, Bb, C, D, mode=mode, initial_state=x0)
    assert y.shape == (B, T, Q) and y.dtype == jnp.float32
    assert x_T.dtype == (jnp.complex64 if kind == "diag" else jnp.float32)
    assert_close(y, y_ref, 1e-5, f"{mode} y")
    assert_close(_ri(x_T), _ri(x_ref if kind == "diag" else x_ref.real), 1e-5, f"{mode} x_T")


@pytest.mark.parametrize("kind", ["dense", "diag"])
def test_kernel_matches_matrix_powers(kind):
  Ab, Bb, C, _ = _system(kind, seed=2)
  L = 100
  K = ops.ssm_kernel(Ab, Bb, C, L)
  A = np.diag(Ab.astype(np.complex128)) if Ab.ndim == 1 else Ab.astype(np.float64)
  ref, Ap = [], np.eye(N)
  for _ in range(L):
    ref.append((C.astype(np.complex128) @ Ap @ Bb.astype(np.complex128)).real)
    Ap = Ap @ A
  assert K.shape == (L, Q, P) and K.dtype == jnp.float32
  assert_close(K, np.stack(ref), 1e-5, "kernel")


def _grads(mode, kind, T, key):
  """VJPs of (y, x_T) wrt every input; diag systems go through discretize (continuous λ, B, dt)."""
  Ab, Bb, C, D = _system(kind, seed=3)
  u, x0 = _inputs(T, Ab, True, seed=4)
  if kind == "diag":
    rng = np.random.default_rng(5)
    lam = jnp.asarray(-rng.uniform(0.05, 0.5, N) + 3j * rng.normal(size=N), jnp.complex64)
    Bc = jnp.asarray(rng.normal(size=(N, P)) + 1j * rng.normal(size=(N, P)), jnp.complex64)

    def f(u, lam, Bc, dt, C, D, x0):
      Ab, Bb = ops.discretize(lam, Bc, dt)
      return ops.ssm(u, Ab, Bb, C, D, mode=mode, initial_state=x0)
    args = (u, lam, Bc, jnp.float32(0.1), C, D, x0)
  else:
    f = functools.partial(ops.ssm, mode=mode)
    f = lambda u, Ab, Bb, C, D, x0, f=f: f(u, Ab, Bb, C, D, initial_state=x0)  # noqa: E731
    args = (u, Ab, Bb, C, D, x0)
  return jax.jit(lambda *a: vjp_grads(f, a, _cotangents(key, f, *args)))(*args)


@pytest.mark.parametrize("kind,T,modes", [("diag", 100, ("scan", "fft")), ("dense", 63, ("assoc", "fft"))])
def test_gradients_agree_across_modes(kind, T, modes):
  """Pairwise coverage: fft against scan (complex diagonal, through discretize) and assoc (dense)."""
  key = jax.random.PRNGKey(7)
  g_ref, g = (_grads(mode, kind, T, key) for mode in modes)
  for i, (a, b) in enumerate(zip(g, g_ref)):
    assert_close(_ri(a), _ri(b), 2e-5, f"{kind} {modes} grad[{i}]")


@pytest.mark.parametrize("mode", ops.SSM_MODES)
def test_gradient_causality(mode):
  Ab, Bb, C, D = _system("diag", seed=6)
  u, _ = _inputs(12, Ab, False)
  J = jax.jit(jax.jacrev(lambda u: ops.ssm(u, Ab, Bb, C, D, mode=mode)[0]))(u)  # [B,T,Q,B,T,P]
  J = np.abs(np.asarray(J))
  future = np.triu(np.ones((12, 12), bool), k=1)  # s > t
  leak = J.transpose(1, 4, 0, 2, 3, 5)[future].max()
  if mode == "fft":
    assert leak <= 1e-6 * J.max(), leak
  else:
    assert leak == 0.0, leak
  assert J.transpose(1, 4, 0, 2, 3, 5)[~future].max() > 0.1


@pytest.mark.parametrize("kind", ["dense", "diag"])
def test_prefill_then_continue_equals_one_pass(kind):
  Ab, Bb, C, D = _system(kind, seed=8)
  u, x0 = _inputs(65, Ab, True, seed=9)
  y_all, x_all = _ssm(u, Ab, Bb, C, D, mode="fft", initial_state=x0)
  y1, x1 = _ssm(u[:, :37], Ab, Bb, C, D, mode="fft", initial_state=x0)
  y2, x2 = _ssm(u[:, 37:], Ab, Bb, C, D, mode="scan", initial_state=x1)  # decode path continues
  assert_close(jnp.concatenate([y1, y2], 1), y_all, 1e-5, "y")
  assert_close(_ri(x2), _ri(x_all), 1e-5, "x_T")


@pytest.mark.parametrize("method", ["zoh", "bilinear"])
def test_diagonalized_system_equals_dense(method):
  rng = np.random.default_rng(10)
  S = rng.normal(size=(N, N))
  A = 0.5 * (S - S.T) + 0.2 * rng.normal(size=(N, N)) - 0.4 * np.eye(N)
  Bc, C, D = rng.normal(size=(N, P)), rng.normal(size=(Q, N)), rng.normal(size=(Q, P))
  u, _ = _inputs(100, np.zeros(1), False)
  lam, Bp, Cp = ops.diagonalize(A, Bc, C)
  y_dense, _ = _ssm(u, *ops.discretize(A, Bc, 0.1, method=method), C, D, mode="fft")
  y_diag, _ = _ssm(u, *ops.discretize(lam, Bp, 0.1, method=method), Cp, D, mode="fft")
  assert_close(y_diag, y_dense, 1e-5, "diagonalized vs dense")


def _channels(H, Nc, seed, dt_range=(1e-3, 1e-1)):
  rng = np.random.default_rng(seed)
  lam = -0.5 + 1j * np.pi * np.arange(Nc) * np.ones((H, 1))  # S4D-Lin
  dt = np.exp(rng.uniform(*np.log(dt_range), size=(H, 1)))
  Ab, Bb = ops.discretize_diagonal(lam.astype(np.complex64), np.ones((H, Nc), np.complex64), dt)
  C = (rng.normal(size=(H, Nc)) + 1j * rng.normal(size=(H, Nc))).astype(np.complex64)
  return np.asarray(Ab), np.asarray(Bb), C, rng.normal(size=H).astype(np.float32)


def test_channels_match_loop_and_vmap_of_ssm():
  H, Nc, T = 3, 4, 257
  Ab, Bb, C, D = _channels(H, Nc, 11, dt_range=(0.05, 0.5))
  rng = np.random.default_rng(12)
  u = rng.normal(size=(B, T, H)).astype(np.float32)
  x0 = (rng.normal(size=(B, H, Nc)) + 1j * rng.normal(size=(B, H, Nc))).astype(np.complex64)
  refs = [_ref_ssm(u[..., h:h + 1], Ab[h], Bb[h][:, None], C[h][None], D[h][None, None], x0[:, h])
          for h in range(H)]
  y_ref = np.concatenate([r[0] for r in refs], -1)
  x_ref = np.stack([r[1] for r in refs], 1)
  for mode in ops.SSM_CHANNEL_MODES:
    y, x_T = _chan(u, Ab, Bb, C, D, mode=mode, initial_state=x0)
    assert y.shape == (B, T, H) and x_T.shape == (B, H, Nc) and x_T.dtype == jnp.complex64
    assert_close(y, y_ref, 1e-5, f"{mode} y")
    assert_close(_ri(x_T), _ri(x_ref), 1e-5, f"{mode} x_T")
  # jax.vmap of the ssm signature over channels
  vm = jax.jit(jax.vmap(
      lambda u, a, b, c, d, x: ops.ssm(u[..., None], a, b[:, None], c[None], d[None, None], mode="fft",
                                       initial_state=x),
      in_axes=(2, 0, 0, 0, 0, 1), out_axes=(2, 1)))
  y_v, x_v = vm(u, Ab, Bb, C, D, x0)
  assert_close(y_v[..., 0], y_ref, 1e-5, "vmap y")
  assert_close(_ri(x_v), _ri(x_ref), 1e-5, "vmap x_T")


def test_channels_long_sequence_and_gradients():
  """S4D-like: T = 2048, slow decay (|Ab| ≈ 1 − 5e-4); fft vs scan values and gradients."""
  H, Nc, T = 2, 16, 2048
  Ab, Bb, C, D = _channels(H, Nc, 13)
  u = np.random.default_rng(14).normal(size=(1, T, H)).astype(np.float32)
  key = jax.random.PRNGKey(15)

  def run(mode):
    return _with_grads(lambda u, Ab, Bb, C, D: ops.ssm_diag_channels(u, Ab, Bb, C, D, mode=mode),
                       (u, Ab, Bb, C, D), key)

  _assert_runs_match(run("fft"), run("scan"), 1e-5)


@pytest.mark.parametrize("kind,T,chunk,with_reset,with_x0", [
    ("complex", 37, 8, True, True), ("complex", 37, 8, False, False), ("complex", 5, 16, True, True),
    ("real", 50, 7, True, True), ("real", 16, 16, True, False), ("real", 1, 4, False, True)])
def test_channels_chunk_form_matches_scan_with_resets(kind, T, chunk, with_reset, with_x0):
  """'chunk' vs 'scan': y, x_T and the gradients wrt u, Ab, Bb, C, x0, on T not a multiple of the chunk,
  several documents per row (a reset at t = 0 too, which drops the initial state), real Ab < 0 entries."""
  H, Nc = 3, 5
  rng = np.random.default_rng(T + chunk)
  if kind == "complex":
    Ab, Bb, C, D = _channels(H, Nc, 21, dt_range=(0.05, 0.5))
  else:
    Ab = rng.uniform(-0.97, 0.97, (H, Nc)).astype(np.float32)
    Bb, C = rng.normal(size=(2, H, Nc)).astype(np.float32)
    D = rng.normal(size=H).astype(np.float32)
  u = rng.normal(size=(B, T, H)).astype(np.float32)
  x0 = None
  if with_x0:
    x0 = rng.normal(size=(B, H, Nc)) + (1j * rng.normal(size=(B, H, Nc)) if kind == "complex" else 0)
    x0 = x0.astype(np.complex64 if kind == "complex" else np.float32)
  reset = None
  if with_reset:
    reset = jnp.asarray(rng.random((B, T)) < 0.15).at[0, 0].set(True)
  key = jax.random.PRNGKey(22)

  def run(mode):
    return _with_grads(lambda u, Ab, Bb, C, x0: ops.ssm_diag_channels(
        u, Ab, Bb, C, D, mode=mode, initial_state=x0, reset=reset, chunk_size=chunk), (u, Ab, Bb, C, x0), key)

  _assert_runs_match(run("chunk"), run("scan"), 1e-5)


@pytest.mark.parametrize("T", [7, 100])
def test_causal_conv_fft_matches_direct_convolution(T):
  rng = np.random.default_rng(T)
  u, K = rng.normal(size=(B, T, P)), rng.normal(size=(T, Q, P))
  ref = np.zeros((B, T, Q))
  for b in range(B):
    for q in range(Q):
      for p in range(P):
        ref[b, :, q] += np.convolve(u[b, :, p], K[:, q, p])[:T]
  y = ops.causal_conv_fft(u.astype(np.float32), K.astype(np.float32))
  assert y.shape == (B, T, Q) and y.dtype == jnp.float32
  assert_close(y, ref, 1e-5, "conv")


def test_bfloat16_inputs():
  Ab, Bb, C, D = _system("diag", seed=16)
  u, x0 = _inputs(40, Ab, True)
  y32, x32 = _ssm(u, Ab, Bb, C, D, mode="fft", initial_state=x0)
  u16 = jnp.asarray(u, jnp.bfloat16)
  for mode in ("fft", "scan"):
    y, x_T = _ssm(u16, Ab, Bb, C, D, mode=mode, initial_state=x0)
    assert y.dtype == jnp.bfloat16 and x_T.dtype == jnp.complex64
    assert_close(y.astype(jnp.float32), y32, 2e-2, f"{mode} bf16 y")
    assert_close(_ri(x_T), _ri(x32), 2e-2, f"{mode} bf16 x_T")
  assert jax.eval_shape(ops.causal_conv_fft, u16, jnp.ones((40, Q, P))).dtype == jnp.bfloat16
  Abh, Bbh, Ch, Dh = _channels(2, 3, 17)
  y = jax.eval_shape(functools.partial(ops.ssm_diag_channels, mode="fft"), jnp.ones((1, 9, 2), jnp.bfloat16),
                     Abh, Bbh, Ch, Dh)[0]
  assert y.dtype == jnp.bfloat16


def test_ssm_errors():
  Ab, Bb, C, D = _system("dense")
  u = np.ones((B, 9, P), np.float32)
  with pytest.raises(ValueError, match="unknown ssm mode 'conv'; valid: fft, scan, assoc"):
    ops.ssm(u, Ab, Bb, C, D, mode="conv")
  with pytest.raises(ValueError, match=r"u has shape \[9, 2\], expected \[B, T, P\]"):
    ops.ssm(u[0], Ab, Bb, C, D)
  with pytest.raises(ValueError, match="expected at least one time step"):
    ops.ssm(u[:, :0], Ab, Bb, C, D)
  with pytest.raises(ValueError, match=r"Ab has shape \[5, 4\], expected \[N, N\] \(dense\) or \[N\]"):
    ops.ssm(u, Ab[:, :4], Bb, C, D)
  with pytest.raises(ValueError, match=r"Bb has shape \[5, 3\], expected \[5, 2\] \(\[N, P\] with N=5 from Ab, P=2"):
    ops.ssm(u, Ab, np.ones((N, 3)), C, D)
  with pytest.raises(ValueError, match=r"C has shape \[3, 4\], expected \[\?, 5\]"):
    ops.ssm(u, Ab, Bb, C[:, :4], D)
  with pytest.raises(ValueError, match=r"D has shape \[3, 3\], expected \[3, 2\] \(\[Q, P\] with Q=3"):
    ops.ssm(u, Ab, Bb, C, np.ones((Q, 3)))
  with pytest.raises(TypeError, match="D must be real"):
    ops.ssm(u, Ab, Bb, C, D + 1j)
  with pytest.raises(ValueError, match=r"initial_state has shape \[2, 4\], expected \[2, 5\]"):
    ops.ssm(u, Ab, Bb, C, D, initial_state=np.ones((B, 4)))
  for bad in (0, -3, 2.5):
    with pytest.raises(ValueError, match="length must be a positive integer"):
      ops.ssm_kernel(Ab, Bb, C, bad)
  with pytest.raises(ValueError, match=r"Bb has shape \[4, 2\], expected \[5, \?\]"):
    ops.ssm_kernel(Ab, Bb[:4], C, 3)
  with pytest.raises(ValueError, match=r"u has shape \[9, 2\], expected \[B, T, P\]"):
    ops.causal_conv_fft(u[0], np.ones((9, Q, P)))
  with pytest.raises(ValueError, match=r"K has shape \[8, 3, 2\], expected \[9, \?, 2\] \(\[T, Q, P\] with T=9"):
    ops.causal_conv_fft(u, np.ones((8, Q, P)))


def test_ssm_diag_channels_errors():
  H, Nc = 3, 4
  Ab, Bb, C, D = _channels(H, Nc, 18)
  u = np.ones((B, 9, H), np.float32)
  with pytest.raises(ValueError, match="unknown ssm mode 'x'; valid: fft, scan, assoc, chunk"):
    ops.ssm_diag_channels(u, Ab, Bb, C, D, mode="x")
  with pytest.raises(ValueError, match="chunk_size must be a positive integer"):
    ops.ssm_diag_channels(u, Ab, Bb, C, D, mode="chunk", chunk_size=0)
  with pytest.raises(ValueError, match=r"u has shape \[9, 3\], expected \[B, T, H\]"):
    ops.ssm_diag_channels(u[0], Ab, Bb, C, D)
  with pytest.raises(ValueError, match="expected at least one time step"):
    ops.ssm_diag_channels(u[:, :0], Ab, Bb, C, D)
  with pytest.raises(ValueError, match=r"Ab has shape \[4\], expected \[H, N\] with H=3 from u"):
    ops.ssm_diag_channels(u, Ab[0], Bb, C, D)
  with pytest.raises(ValueError, match=r"Ab has shape \[2, 4\], expected \[H, N\] with H=3 from u"):
    ops.ssm_diag_channels(u, Ab[:2], Bb, C, D)                # right rank, wrong H
  with pytest.raises(ValueError, match=r"Bb has shape \[3, 3\], expected \[3, 4\] \(H=3 from u, N=4 from Ab\)"):
    ops.ssm_diag_channels(u, Ab, Bb[:, :3], C, D)
  with pytest.raises(ValueError, match=r"C has shape \[2, 4\], expected \[3, 4\]"):
    ops.ssm_diag_channels(u, Ab, Bb, C[:2], D)
  with pytest.raises(ValueError, match=r"D has shape \[3, 1\], expected \[3\]"):
    ops.ssm_diag_channels(u, Ab, Bb, C, D[:, None])
  with pytest.raises(TypeError, match="D must be real"):
    ops.ssm_diag_channels(u, Ab, Bb, C, D * 1j)
  with pytest.raises(ValueError, match=r"initial_state has shape \[2, 4\], expected \[2, 3, 4\]"):
    ops.ssm_diag_channels(u, Ab, Bb, C, D, initial_state=np.ones((B, Nc)))
