"""Discrete linear state-space systems: kernel, FFT convolution, and the three computation forms.

Notation (docs/DESIGN.md): B batch, T time, N states, P inputs, Q outputs, H channels. Column convention:

    x_t = Ab x_{t-1} + Bb u_t,   y_t = Re(C x_t) + D u_t,   x_{-1} = initial_state (default 0)

Ab is [N,N] (dense) or [N] (diagonal); complex Ab/Bb give a complex64 state and y = Re(C x) + D u.
Unrolling gives y_t = Σ_{s≤t} K[t−s] u_s + Re(C Ab^{t+1} x_{-1}) + D u_t with the kernel
K[t] = Re(C Ab^t Bb) (seed eq. 19), so y is a causal convolution computed by FFT (eq. 20).

Modes of `ssm` (all agree to float32 rounding, values and gradients):
  'fft'   kernel by powers of Ab, causal FFT convolution (O(T log T)), the initial state's response
          Re(C Ab^{t+1} x0), and x_T = Ab^T x0 + Σ_t Ab^{T-1-t} Bb u_t as one contraction.
  'scan'  lax.scan over t (the decode path); reverse mode keeps one state per 64 steps
          (rematerializing inside each chunk), so memory is O(T/64 + 64) states, not O(T).
  'assoc' lax.associative_scan over (Ab, Bb u_t) pairs; O(log T) depth, O(T) states of memory.
  'chunk' (ssm_diag_channels only) chunkwise: inside each chunk of L steps the masked kernel matrix
          K[t−s] (a [L, L] Toeplitz block), across chunks a scan over the T/L chunk-boundary states.
          Unlike 'fft' it takes `reset` (packed documents), at a cost linear in T.
Powers Ab^t are blocked, Ab^{iM+j} = (Ab^M)^i · Ab^j with M ≈ √T, each factor from a chain of
products (√T sequential steps, no squaring, no log/exp: exact at Ab = 0 and for negative real Ab),
and the kernel, the initial state's response and x_T are contractions over n against these factors,
so the [T, N] Vandermonde is never formed. Measured float32 error at T = 4096, N = 64 (S4D-Lin,
|Ab| ≈ 1): y 2e-6, x_T 9e-6 (fft); 1e-6, 2e-6 (scan); 1.3e-5, 3.6e-5 (assoc, whose tree of
products repeats rounding errors). All arithmetic is float32/complex64; bfloat16 u gives bfloat16 y.

Batched channels (an extension beyond the ssm signature, for S4D layers): `ssm_diag_channels` runs H
independent single-input single-output diagonal systems in one computation. `jax.vmap` of `ssm`
over channels works too (tested); the dedicated path keeps every contraction real-valued and the
FFT on the last axis.
"""
import jax
import jax.numpy as jnp
import numpy as np

from linear_seq.checks import check_choice, check_positive_int, check_shape

SSM_MODES = ("fft", "scan", "assoc")
SSM_CHANNEL_MODES = SSM_MODES + ("chunk",)  # ssm_diag_channels also has the chunkwise form
SSM_CHUNK = 16  # default chunk length of the 'chunk' form (measured fastest of 8/16/32 for S4D layers on CPU)
_SCAN_CHUNK = 64  # steps per rematerialized chunk of the scan form


# ----------------------------------------------------------------------------------------------
# Validation and dtypes.

def _is_complex(*xs) -> bool:
  return any(x is not None and jnp.iscomplexobj(x) for x in xs)


def _state_dtype(*xs):
  return jnp.complex64 if _is_complex(*xs) else jnp.float32


def _out_dtype(u):
  d = jnp.asarray(u).dtype
  return d if jnp.issubdtype(d, jnp.floating) else jnp.float32


def _check_system(Ab, Bb, C, P=None):
  """Validates Ab [N] | [N,N], Bb [N,P], C [Q,N]; returns (N, P, Q, diagonal)."""
  a_shape = tuple(np.shape(Ab))
  if len(a_shape) not in (1, 2) or (len(a_shape) == 2 and a_shape[0] != a_shape[1]):
    raise ValueError(f"Ab has shape {list(a_shape)}, expected [N, N] (dense) or [N] (diagonal)")
  N = a_shape[0]
  if P is None:
    check_shape("Bb", Bb, (N, None), f"([N, P] with N={N} from Ab)")
    P = np.shape(Bb)[1]
  else:
    check_shape("Bb", Bb, (N, P), f"([N, P] with N={N} from Ab, P={P} from u)")
  check_shape("C", C, (None, N), f"([Q, N] with N={N} from Ab)")
  return N, P, np.shape(C)[0], len(a_shape) == 1


def _readout_matrix(C, state_dtype):
  """C as used in y = Re(C x): complex C on a real state reduces to Re(C)."""
  C = jnp.asarray(C)
  if state_dtype == jnp.float32:
    return jnp.real(C).astype(jnp.float32)
  return C.astype(state_dtype)


# ----------------------------------------------------------------------------------------------
# Powers of Ab: doubling, and blocked Vandermonde contractions.

def _re_dot(spec, z, w):
  """Re(einsum(spec, z, w)) for a spec that contracts the last axis (n) of both operands.

  Complex × complex is one real contraction over 2N: Re Σ_n z w = Σ [Re z, −Im z]·[Re w, Im w].
  """
  if not (jnp.iscomplexobj(z) and jnp.iscomplexobj(w)):
    return jnp.einsum(spec, jnp.real(z), jnp.real(w))
  return jnp.einsum(spec, jnp.concatenate([z.real, -z.imag], -1), jnp.concatenate([w.real, w.imag], -1))


def _dot_real(spec, z, r):
  """einsum(spec, z, r) for complex z, real r, when z's last axis (n) is the output's last axis.

  One real contraction with [Re z, Im z] stacked along n, split afterwards.
  """
  if not jnp.iscomplexobj(z):
    return jnp.einsum(spec, z, r)
  n = z.shape[-1]
  out = jnp.einsum(spec, jnp.concatenate([z.real, z.imag], -1), r)
  return jax.lax.complex(out[..., :n], out[..., n:])


def _diag_powers(a, length: int):
  """[length, *a.shape]: a^t for t = 0..length-1, elementwise, by sequential products.

  Sequential (x_{t+1} = x_t · a) rather than by squaring: squaring repeats one rounding error
  coherently (relative error ~t·eps), a chain accumulates independent ones (~√t·eps).
  """
  def step(x, _):
    return x * a, x
  return jax.lax.scan(step, jnp.ones_like(a), None, length=length)[1]


def _vander_blocks(a, T: int):
  """Block factors of the Vandermonde a^t = a^{iM} · a^j (t = i·M + j ≤ T, M a power of two ≈ √T).

  Returns (lo [M, ...] = a^j, hi [I+1, ...] = a^{iM}) with I = ⌈T/M⌉, so hi covers t = T too.
  """
  M = 1 << ((max(T, 2) - 1).bit_length() + 1) // 2
  I = -(-T // M)
  lo = _diag_powers(a, M + 1)
  return lo[:M], _diag_powers(lo[M], I + 1)


def _vander_power(a, T: int):
  """a^T from the block factors (same accuracy as the kernel's powers)."""
  lo, hi = _vander_blocks(a, T)
  M = lo.shape[0]
  return hi[T // M] * lo[T % M]


def _vander_eval(a, w, T: int, hs: str, rs: str, shift: bool = False):
  """Re Σ_n w[r, h, n] a[h, n]^{t+shift} for t < T -> real [T, r..., h...] (never forms [T, h, n]).

  a has dims hs+'n' (hs: batch dims shared with w, e.g. 'h'), w has dims rs+hs+'n'. With t = i·M + j
  the sum is a batched matmul Σ_n (w a^{iM+shift})[i, r, h, n] · (a^j)[j, h, n].
  """
  lo, hi = _vander_blocks(a, T)
  hi = hi[:-1]
  if shift:
    w = w * a
  wh = w[None] * hi.reshape(hi.shape[:1] + (1,) * len(rs) + hi.shape[1:])  # [I, r, h, n]
  out = _re_dot(f"i{rs}{hs}n,j{hs}n->ij{rs}{hs}", wh, lo)
  return out.reshape((-1,) + out.shape[2:])[:T]


def _vander_reduce(a, z, T: int, hs: str, rs: str):
  """Σ_t a[h, n]^{T-1-t} z[t, r, h] -> [r, h, n] (z real, time-major) as two blocked contractions."""
  lo, hi = _vander_blocks(a, T)
  hi = hi[:-1]
  I, M = hi.shape[0], lo.shape[0]
  z_rev = jnp.pad(z[::-1], [(0, I * M - T)] + [(0, 0)] * (z.ndim - 1))  # s = T-1-t = i·M + j
  z_rev = z_rev.reshape((I, M) + z.shape[1:])
  part = _dot_real(f"j{hs}n,ij{rs}{hs}->i{rs}{hs}n", lo, z_rev)
  hi = hi.reshape(hi.shape[:1] + (1,) * len(rs) + hi.shape[1:])
  return jnp.sum(hi * part, axis=0)


def _dense_powers_apply(A, X, length: int):
  """[length, N, R]: A^t X for t < length (A [N,N], X [N,R]), blocked like the Vandermonde.

  With t = i·M + j: A^j X and A^M by a chain of M products, (A^M)^i by a chain of I products,
  then one batched matmul — √T sequential steps, no squaring (its errors grow coherently).
  """
  N, R = X.shape
  M = 1 << ((max(length, 2) - 1).bit_length() + 1) // 2
  I = -(-length // M)

  def chain(step_matrix, start, n):
    return jax.lax.scan(lambda y, _: (step_matrix @ y, y), start, None, length=n)

  eye = jnp.eye(N, dtype=A.dtype)
  A_M, lo = chain(A, jnp.concatenate([X, eye], axis=1), M)  # lo[j] = A^j [X | I]
  _, hi = chain(A_M[:, R:], eye, I)  # hi[i] = A^{iM}
  out = jnp.einsum("inm,jmr->ijnr", hi, lo[:, :, :R])
  return out.reshape((I * M, N, R))[:length]


def ssm_kernel(Ab, Bb, C, length: int):
  """K[t] = Re(C Ab^t Bb) for t < length (seed eq. 19, in forward time order).

  Ab [N] (diagonal: Vandermonde) or [N,N] (dense: repeated products); Bb [N,P]; C [Q,N].
  Returns float32 [length, Q, P].
  """
  check_positive_int("length", length)
  _, _, _, diagonal = _check_system(Ab, Bb, C)
  sdt = _state_dtype(Ab, Bb)
  Ab, Bb, C = jnp.asarray(Ab, sdt), jnp.asarray(Bb, sdt), _readout_matrix(C, sdt)
  if diagonal:
    return _vander_eval(Ab, C[:, None, :] * Bb.T[None], length, "", "qp").astype(jnp.float32)
  K = jnp.einsum("qn,tnp->tqp", C, _dense_powers_apply(Ab, Bb, length))
  return jnp.real(K).astype(jnp.float32)


# ----------------------------------------------------------------------------------------------
# FFT convolution.

def _fft_len(T: int) -> int:
  return 1 << int(2 * T - 1).bit_length()  # power of two ≥ 2T: no circular wraparound


def causal_conv_fft(u, K):
  """y[b,t,q] = Σ_{s≤t} Σ_p K[t−s,q,p] u[b,s,p] via float32 rfft of length ≥ 2T (seed eq. 20).

  u [B,T,P], K [T,Q,P] -> [B,T,Q], in u's dtype (bfloat16 in, bfloat16 out).
  """
  if np.ndim(u) != 3:
    raise ValueError(f"u has shape {list(np.shape(u))}, expected [B, T, P]")
  _, T, P = np.shape(u)
  check_shape("K", K, (T, None, P), f"([T, Q, P] with T={T}, P={P} from u)")
  out_dtype = _out_dtype(u)
  n = _fft_len(T)
  u_BPT = jnp.swapaxes(jnp.asarray(u, jnp.float32), 1, 2)
  K_QPT = jnp.transpose(jnp.asarray(K, jnp.float32), (1, 2, 0))
  uf_BPF = jnp.fft.rfft(u_BPT, n=n)
  Kf_QPF = jnp.fft.rfft(K_QPT, n=n)
  y_BQT = jnp.fft.irfft(jnp.einsum("bpf,qpf->bqf", uf_BPF, Kf_QPF), n=n)[..., :T]
  return jnp.swapaxes(y_BQT, 1, 2).astype(out_dtype)


# ----------------------------------------------------------------------------------------------
# The scan form, with chunked rematerialization.

def _chunked_scan(step, x0, xs, chunk: int = _SCAN_CHUNK):
  """lax.scan(step, x0, xs) whose reverse mode stores one carry per `chunk` steps."""
  T = jax.tree.leaves(xs)[0].shape[0]
  n = T // chunk
  if n <= 1:
    return jax.lax.scan(step, x0, xs)
  main = jax.tree.map(lambda a: a[:n * chunk].reshape((n, chunk) + a.shape[1:]), xs)
  inner = jax.checkpoint(lambda c, x: jax.lax.scan(step, c, x))
  x, ys = jax.lax.scan(inner, x0, main)
  ys = jax.tree.map(lambda a: a.reshape((n * chunk,) + a.shape[2:]), ys)
  if T > n * chunk:
    x, ys_rest = jax.lax.scan(step, x, jax.tree.map(lambda a: a[n * chunk:], xs))
    ys = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), ys, ys_rest)
  return x, ys


def _assoc_combine_diag(e1, e2):
  a1, b1 = e1
  a2, b2 = e2
  return a1 * a2, a2 * b1 + b2


def _assoc_combine_dense(e1, e2):
  a1, b1 = e1  # a [..., N, N], b [..., B, N]
  a2, b2 = e2
  return a2 @ a1, jnp.einsum("...nm,...bm->...bn", a2, b1) + b2


# ----------------------------------------------------------------------------------------------
# The general system.

def _check_input(u, mode: str, channels: str, modes=SSM_MODES) -> tuple[int, int, int]:
  """Checks mode and u [B, T, channels] with T >= 1; returns u's shape."""
  check_choice("ssm mode", mode, modes)
  if np.ndim(u) != 3:
    raise ValueError(f"u has shape {list(np.shape(u))}, expected [B, T, {channels}]")
  if np.shape(u)[1] < 1:
    raise ValueError(f"u has shape {list(np.shape(u))}: expected at least one time step")
  return np.shape(u)


def ssm(u, Ab, Bb, C, D, *, mode: str = "fft", initial_state=None):
  """Runs x_t = Ab x_{t-1} + Bb u_t, y_t = Re(C x_t) + D u_t over u (seed eq. 14-15, 19-20).

  u [B,T,P]; Ab [N] diagonal or [N,N] dense (real or complex); Bb [N,P]; C [Q,N]; D [Q,P] (real);
  initial_state [B,N] or None (zeros). mode: 'fft' | 'scan' | 'assoc'.
  Returns (y [B,T,Q] in u's dtype, x_T [B,N] float32, complex64 when Ab, Bb or the state is complex).
  """
  Bsz, T, P = _check_input(u, mode, "P")
  N, P, Q, diagonal = _check_system(Ab, Bb, C, P)
  check_shape("D", D, (Q, P), f"([Q, P] with Q={Q} from C, P={P} from u)")
  if jnp.iscomplexobj(D):
    raise TypeError("D must be real (y = Re(C x) + D u)")
  if initial_state is not None:
    check_shape("initial_state", initial_state, (Bsz, N), f"([B, N] with B={Bsz} from u, N={N} from Ab)")
  sdt = _state_dtype(Ab, Bb, initial_state)
  out_dtype = _out_dtype(u)
  u = jnp.asarray(u, jnp.float32)
  Ab, Bb, C = jnp.asarray(Ab, sdt), jnp.asarray(Bb, sdt), _readout_matrix(C, sdt)
  x0 = None if initial_state is None else jnp.asarray(initial_state, sdt)
  y_skip = jnp.einsum("btp,qp->btq", u, jnp.asarray(D, jnp.float32))

  if mode == "fft":
    if diagonal:
      K = _vander_eval(Ab, C[:, None, :] * Bb.T[None], T, "", "qp")
      x_T = jnp.einsum("bpn,np->bn", _vander_reduce(Ab, jnp.swapaxes(u, 0, 1), T, "", "bp"), Bb)
      if x0 is not None:
        y0_TBQ = _vander_eval(Ab, C[None] * x0[:, None, :], T, "", "bq", shift=True)
        y_skip = y_skip + jnp.swapaxes(y0_TBQ, 0, 1)
        x_T = x_T + _vander_power(Ab, T) * x0
    else:
      G = _dense_powers_apply(Ab, Bb, T)  # [T, N, P]: Ab^t Bb
      K = jnp.real(jnp.einsum("qn,tnp->tqp", C, G))
      x_T = jnp.einsum("tnp,btp->bn", G[::-1], u.astype(sdt))
      if x0 is not None:
        H = _dense_powers_apply(Ab.T, C.T, T + 1)[1:]  # [T, N, Q]: (C Ab^{t+1})ᵀ
        y_skip = y_skip + jnp.real(jnp.einsum("tnq,bn->btq", H, x0))
        x_T = x_T + _dense_powers_apply(Ab, x0.T, T + 1)[T].T
    y = causal_conv_fft(u, K.astype(jnp.float32)) + y_skip
    return y.astype(out_dtype), x_T

  u_TBP = jnp.swapaxes(u, 0, 1)
  if x0 is None:
    x0 = jnp.zeros((Bsz, N), sdt)
  if mode == "scan":
    def step(x_BN, u_BP):
      x_BN = (x_BN * Ab if diagonal else x_BN @ Ab.T) + u_BP @ Bb.T
      return x_BN, jnp.real(x_BN @ C.T)
    x_T, y_TBQ = _chunked_scan(step, x0, u_TBP)
  else:  # assoc
    b_TBN = jnp.einsum("tbp,np->tbn", u_TBP.astype(sdt), Bb)
    b_TBN = b_TBN.at[0].add(x0 * Ab if diagonal else x0 @ Ab.T)
    if diagonal:
      a = jnp.broadcast_to(Ab, (T, 1, N))
      _, x_TBN = jax.lax.associative_scan(_assoc_combine_diag, (a, b_TBN))
    else:
      a = jnp.broadcast_to(Ab, (T, N, N))
      _, x_TBN = jax.lax.associative_scan(_assoc_combine_dense, (a, b_TBN))
    x_T = x_TBN[-1]
    y_TBQ = jnp.real(jnp.einsum("tbn,qn->tbq", x_TBN, C))
  y = jnp.swapaxes(y_TBQ, 0, 1) + y_skip
  return y.astype(out_dtype), x_T


# ----------------------------------------------------------------------------------------------
# Batched channels: H single-input single-output diagonal systems (the S4D layer).

def _causal_conv_channels(u_BTH, K_TH):
  """Per-channel causal convolution y[b,t,h] = Σ_{s≤t} K[t−s,h] u[b,s,h] (float32 rfft)."""
  T = u_BTH.shape[1]
  n = _fft_len(T)
  uf_BHF = jnp.fft.rfft(jnp.swapaxes(u_BTH, 1, 2), n=n)
  Kf_HF = jnp.fft.rfft(K_TH.T, n=n)
  return jnp.swapaxes(jnp.fft.irfft(uf_BHF * Kf_HF, n=n)[..., :T], 1, 2)


def _chunk_channels(u, Ab, Bb, C, x0, reset, L: int):
  """The 'chunk' form of ssm_diag_channels (y without the D term, x_T); u [B,T,H] float32, x0 [B,H,N].

  Chunk c holds steps cL + j, j < L (u padded with zeros to a whole chunk). Within a chunk, doc[j] counts
  the resets at steps ≤ j, so steps i ≤ j share a document iff doc[i] = doc[j], and the state entering
  the chunk reaches step j iff doc[j] = 0:
    y[j] = Σ_{i≤j, doc i = doc j} K[j−i] u[i] + [doc j = 0] Re(C Ab^{j+1} x_in),   K[k] = Re(C Bb Ab^k)
    x_out = [doc L−1 = 0] Ab^L x_in + Σ_{doc i = doc L−1} Ab^{L−1−i} Bb u[i]   (a scan over chunks).
  x_T is the same sum over the last chunk's r = T − (nC−1)L real steps.
  """
  Bsz, T, H = u.shape
  nC = -(-T // L)
  pad = nC * L - T
  u_BCLH = jnp.pad(u, ((0, 0), (0, pad), (0, 0))).reshape(Bsz, nC, L, H)
  r_BT = jnp.zeros((Bsz, T), bool) if reset is None else jnp.asarray(reset, bool)
  doc_BCL = jnp.cumsum(jnp.pad(r_BT, ((0, 0), (0, pad))).reshape(Bsz, nC, L).astype(jnp.int32), axis=-1)
  P_KHN = _diag_powers(Ab, L + 1)                                    # Ab^k, k = 0..L
  K_LH = _re_dot("khn,hn->kh", P_KHN[:L], C * Bb)
  j = np.arange(L)
  lag = j[:, None] - j[None, :]
  K_LLH = jnp.where(jnp.asarray(lag >= 0)[..., None], K_LH[np.maximum(lag, 0)], 0.0)   # [j, i, h]
  same_BCLL = (doc_BCL[..., :, None] == doc_BCL[..., None, :]) & jnp.asarray(lag >= 0)
  y_BCLH = jnp.einsum("bcjih,bcih->bcjh", same_BCLL[..., None] * K_LLH, u_BCLH)
  # Chunk-local end states (from a zero state) and the chunks' transitions, then the states entering each chunk.
  last_BCL = doc_BCL == doc_BCL[..., -1:]
  s_BCHN = Bb * _dot_real("ihn,bcih->bchn", P_KHN[L - 1::-1], u_BCLH * last_BCL[..., None])
  a_BCHN = jnp.where((doc_BCL[..., -1] == 0)[..., None, None], P_KHN[L], 0)

  def step(x_BHN, inputs):
    a, s = inputs
    return a * x_BHN + s, x_BHN
  _, xin_CBHN = jax.lax.scan(step, x0, (jnp.swapaxes(a_BCHN, 0, 1), jnp.swapaxes(s_BCHN, 0, 1)))
  y_BCLH = y_BCLH + _re_dot("jhn,cbhn->bcjh", C * P_KHN[1:], xin_CBHN) * (doc_BCL == 0)[..., None]
  y = y_BCLH.reshape(Bsz, nC * L, H)[:, :T]
  # Final state after step T−1: the last chunk's r real steps.
  r = T - (nC - 1) * L
  doc_BR, u_BRH = doc_BCL[:, -1, :r], u_BCLH[:, -1, :r]
  x_T = Bb * _dot_real("ihn,bih->bhn", P_KHN[r - 1::-1], u_BRH * (doc_BR == doc_BR[:, -1:])[..., None])
  x_T = x_T + jnp.where((doc_BR[:, -1] == 0)[:, None, None], P_KHN[r], 0) * xin_CBHN[-1]
  return y, x_T


def ssm_diag_channels(u, Ab, Bb, C, D, *, mode: str = "fft", initial_state=None, reset=None,
                      chunk_size: int = SSM_CHUNK):
  """H independent diagonal SISO systems in one computation (extension for S4D layers).

  For every channel h: x_t[h] = Ab[h] ⊙ x_{t-1}[h] + Bb[h]·u_t[h],
                       y_t[h] = Re(Σ_n C[h,n] x_t[h,n]) + D[h]·u_t[h].
  u [B,T,H]; Ab, Bb, C [H,N] (real or complex; e.g. from `discretize_diagonal`); D [H] (real);
  initial_state [B,H,N] or None. mode: 'fft' | 'scan' | 'assoc' (as in `ssm`) | 'chunk' (chunkwise,
    chunks of `chunk_size` steps; see the module docstring).
  reset: optional bool [B,T] (document boundaries in packed rows; 'scan', 'assoc' and 'chunk' only, the
    FFT form cannot reset): where True, x_{t-1} counts as 0, i.e. x_t = Bb·u_t.
  Returns (y [B,T,H] in u's dtype, x_T [B,H,N] float32 or complex64).
  Equals jax.vmap of `ssm` over h with Ab[h] [N], Bb[h][:, None], C[h][None], D[h][None, None].
  """
  Bsz, T, H = _check_input(u, mode, "H", SSM_CHANNEL_MODES)
  check_positive_int("chunk_size", chunk_size)
  if np.ndim(Ab) != 2 or np.shape(Ab)[0] != H:
    raise ValueError(f"Ab has shape {list(np.shape(Ab))}, expected [H, N] with H={H} from u")
  N = np.shape(Ab)[1]
  legend = f"(H={H} from u, N={N} from Ab)"
  check_shape("Bb", Bb, (H, N), legend)
  check_shape("C", C, (H, N), legend)
  check_shape("D", D, (H,), legend)
  if jnp.iscomplexobj(D):
    raise TypeError("D must be real (y = Re(C x) + D u)")
  if initial_state is not None:
    check_shape("initial_state", initial_state, (Bsz, H, N), f"(B={Bsz}, H={H} from u, N={N} from Ab)")
  sdt = _state_dtype(Ab, Bb, initial_state)
  out_dtype = _out_dtype(u)
  u = jnp.asarray(u, jnp.float32)
  Ab, Bb, C = jnp.asarray(Ab, sdt), jnp.asarray(Bb, sdt), _readout_matrix(C, sdt)
  x0 = None if initial_state is None else jnp.asarray(initial_state, sdt)
  y_skip = u * jnp.asarray(D, jnp.float32)
  if reset is not None:
    if mode == "fft":
      raise ValueError("reset needs mode 'scan', 'assoc' or 'chunk' (the FFT form cannot reset the state)")
    check_shape("reset", reset, (Bsz, T), "(bool, True at a document's first token)")
    keep_TB11 = ~jnp.swapaxes(jnp.asarray(reset, bool), 0, 1)[..., None, None]

  if mode == "fft":
    K_TH = _vander_eval(Ab, C * Bb, T, "h", "")
    x_T = Bb * _vander_reduce(Ab, jnp.swapaxes(u, 0, 1), T, "h", "b")
    if x0 is not None:
      y_skip = y_skip + jnp.swapaxes(_vander_eval(Ab, C * x0, T, "h", "b", shift=True), 0, 1)
      x_T = x_T + _vander_power(Ab, T) * x0
    y = _causal_conv_channels(u, K_TH) + y_skip
    return y.astype(out_dtype), x_T

  if x0 is None:  # zeros derived from u: under shard_map they vary over u's mesh axes, as a scan carry must
    x0 = jnp.zeros((Bsz, H, N), sdt) + u[:, :0].sum(axis=1)[..., None].astype(sdt)
  if mode == "chunk":
    y, x_T = _chunk_channels(u, Ab, Bb, C, x0, reset, chunk_size)
    return (y + y_skip).astype(out_dtype), x_T
  u_TBH = jnp.swapaxes(u, 0, 1)
  if mode == "scan" and reset is None:
    def step(x_BHN, u_BH):
      x_BHN = Ab * x_BHN + Bb * u_BH[..., None]
      return x_BHN, jnp.sum(jnp.real(x_BHN) * jnp.real(C) - jnp.imag(x_BHN) * jnp.imag(C), axis=-1)
    x_T, y_TBH = _chunked_scan(step, x0, u_TBH)
  elif mode == "scan":
    def step_reset(x_BHN, inputs):
      u_BH, keep_B11 = inputs
      x_BHN = jnp.where(keep_B11, Ab * x_BHN, 0) + Bb * u_BH[..., None]
      return x_BHN, _re_dot("bhn,hn->bh", x_BHN, C)
    x_T, y_TBH = _chunked_scan(step_reset, x0, (u_TBH, keep_TB11))
  else:  # assoc
    a = jnp.broadcast_to(Ab, (T, 1, H, N))
    x0_term = Ab * x0
    if reset is not None:
      a = jnp.where(keep_TB11, a, 0)
      x0_term = jnp.where(keep_TB11[0], x0_term, 0)
    b_TBHN = (Bb * u_TBH[..., None]).at[0].add(x0_term)
    _, x_TBHN = jax.lax.associative_scan(_assoc_combine_diag, (a, b_TBHN))
    x_T = x_TBHN[-1]
    y_TBH = _re_dot("tbhn,hn->tbh", x_TBHN, C)
  y = jnp.swapaxes(y_TBH, 0, 1) + y_skip
  return y.astype(out_dtype), x_T
