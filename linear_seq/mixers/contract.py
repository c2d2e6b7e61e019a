"""The mixer contract: `check_mixer` runs the checks the test suite holds every built-in mixer to, on any mixer.

  report = linear_seq.mixers.check_mixer("gla")            # a registered name, a mixer class or a config
  print(report)                                            # one line per check: name, measured error, tolerance
  check_mixer(MyMixer, raise_on_failure=False).failed      # the failed checks instead of a MixerContractError

At small shapes (B=2, T=11, d_model 16, 2 heads, chunk 4: the chunk form's ragged tail is exercised), in float32
unless said otherwise, errors as relative RMS (`rel_rms`: RMS(a − b) / RMS(b), in float64 on the host):
  forward            y [B,T,D] finite; the returned state has init_state's structure, shapes and dtypes.
  state_size         B · state_size(T) = the floats in init_state(B, T)'s float leaves (complex counts 2).
  prefill_decode     a T1-token prefill then T − T1 one-token steps == one parallel pass (outputs; and the final
                     state, where both passes give states of the same shapes).
  packed_documents   a row of two documents (segment_ids): the first equals the row without ids (causality),
                     the second equals running it alone from init_state; ids without a boundary change nothing.
  packed_decode      a packed prefill then one step: the step sees only the last document.
  causality          d y_t0 / d x_s: 0 for s > t0 (at most `tolerance` × the largest), nonzero for every s ≤ t0.
  bf16               built with dtype bfloat16 (the same parameters), run on bf16 inputs: finite, and within
                     the tolerance of the float32 output.
  chunk_vs_recurrent the mixer built with mode 'chunk' and 'recurrent' (S4: 'fft' and 'scan') gives the same
                     outputs and state; skipped when the built mixers do not differ in their `mode` attribute
                     (a mixer with one form, e.g. softmax, or one that ignores model.mode).
A check that raises reports the exception as its failure. The tolerances are TOLERANCES, per check
overridable with `tolerances={name: value}`.
"""
import dataclasses
from typing import Any, Callable, Mapping, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

CHECKS = ("forward", "state_size", "prefill_decode", "packed_documents", "packed_decode", "causality", "bf16",
          "chunk_vs_recurrent")
# float32 checks: 1e-5 relative RMS (the suite's float32 value tolerance); causality: the largest gradient on a
# future input over the largest one (FFT convolutions round to ~1e-7; an exact mixer gives 0); bf16: 8 bits of
# mantissa through a few projections.
TOLERANCES = {"forward": 0.0, "state_size": 0.0, "prefill_decode": 1e-5, "packed_documents": 1e-5,
              "packed_decode": 1e-5, "causality": 1e-6, "bf16": 5e-2, "chunk_vs_recurrent": 1e-5}
# The size fields a config's values are replaced with (small=True): every mixer's sizes at d_model 16.
SMALL = dict(d_model=16, num_heads=2, chunk_size=4, state_size=4, gate_rank=4, num_features=12,
             mamba_head_dim=8, max_len=32)
B, T, T1, T0 = 2, 11, 6, 4  # batch, length, prefill length (documents of T − T1 and T1 tokens), causality's t0


class MixerContractError(AssertionError):
  """A mixer failed checks of the contract; the message names each failed check and what it measured, and
  `report` holds the whole ContractReport."""

  def __init__(self, message: str, report: "ContractReport"):
    super().__init__(message)
    self.report = report


@dataclasses.dataclass(frozen=True)
class CheckResult:
  name: str
  passed: Optional[bool]  # None: skipped
  error: Optional[float]  # the measured error (see the module docstring); None when skipped or not measured
  tolerance: float
  detail: str = ""

  def __str__(self) -> str:
    status = "skipped" if self.passed is None else "ok" if self.passed else "FAILED"
    err = "" if self.error is None else f" error {self.error:.3g} (tolerance {self.tolerance:.3g})"
    return f"{self.name:<19} {status}{err}{'; ' + self.detail if self.detail else ''}"


class ContractReport(list):
  """The CheckResults of one mixer, in CHECKS order; report['bf16'] looks one up by name."""

  def __init__(self, mixer: str, results: Sequence[CheckResult]):
    super().__init__(results)
    self.mixer = mixer

  def __getitem__(self, key):
    if isinstance(key, str):
      for r in self:
        if r.name == key:
          return r
      raise KeyError(f"no check {key!r} in this report (ran: {', '.join(r.name for r in self)})")
    return super().__getitem__(key)

  @property
  def failed(self) -> list[CheckResult]:
    return [r for r in self if r.passed is False]

  @property
  def passed(self) -> bool:
    return not self.failed

  def __str__(self) -> str:
    return "\n".join([f"mixer contract of {self.mixer}:"] + [f"  {r}" for r in self])


def rel_rms(a, b) -> float:
  """RMS(a − b) / RMS(b) in float64 over a pytree's leaves (complex: both parts); inf if anything is not finite."""
  a = np.concatenate([_flat(x) for x in jax.tree.leaves(a)] or [np.zeros(0)])
  b = np.concatenate([_flat(x) for x in jax.tree.leaves(b)] or [np.zeros(0)])
  if a.shape != b.shape:
    raise ValueError(f"shape mismatch: {a.shape} vs {b.shape}")
  if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
    return float("inf")
  err, ref = np.sqrt(np.mean((a - b) ** 2)) if a.size else 0.0, np.sqrt(np.mean(b ** 2)) if b.size else 0.0
  return float(err / ref) if ref else (0.0 if err == 0 else float("inf"))


def _flat(x) -> np.ndarray:
  x = np.asarray(x)
  if np.iscomplexobj(x):
    x = np.stack([x.real, x.imag])
  return np.asarray(x, np.float64).reshape(-1)


def _float_leaves(state) -> list:
  return [s for s in jax.tree.leaves(state) if jnp.issubdtype(s.dtype, jnp.inexact)]


class _Fwd:
  """A mixer's forward, jitted once per mixer (with its parameters as an argument: one compile per shape)."""

  def __init__(self, mixer):
    self.mixer = mixer
    self.graphdef, self.params = nnx.split(mixer)
    graphdef = self.graphdef

    @jax.jit
    def fwd(params, x, state=None, segment_ids=None):
      return nnx.merge(graphdef, params)(x, state=state, segment_ids=segment_ids)

    self.jitted = fwd

  def __call__(self, x, state=None, segment_ids=None):
    return self.jitted(self.params, x, state, segment_ids)


def _builder(mixer, overrides: Mapping[str, Any], small: bool) -> tuple[str, Callable]:
  """-> (the mixer's name, build(rngs, dtype, mode) -> module)."""
  from linear_seq import mixers, model  # (model imports this package)
  if isinstance(mixer, nnx.Module):
    raise ValueError(f"got a built {type(mixer).__name__}: pass its class, or a function (*, rngs, dtype, mode) "
                     "building it (the checks rebuild it in bfloat16 and in each mode)")
  if callable(mixer) and not isinstance(mixer, (str, type)):
    name = getattr(mixer, "__name__", None) or type(mixer).__name__

    def build_fn(rngs, dtype=None, mode=None):
      kw = {} if dtype is None else {"dtype": dtype}
      if mode is not None:
        kw["mode"] = mode
      return mixer(rngs=rngs, **kw)
    return name, build_fn
  if isinstance(mixer, str) or isinstance(mixer, type):
    cls = mixers.get(mixer) if isinstance(mixer, str) else mixer
    name = mixer if isinstance(mixer, str) else next(
        (n for n, c in mixers.MIXERS.items() if c is cls), cls.__name__)
    cfg = model.ModelConfig(vocab_size=1, mixer=name if name in mixers.MIXERS else "gla")
  else:
    if isinstance(mixer, model.ModelConfig):
      cfg = mixer
    else:  # a full config (with .model) or its model section
      section = mixer["model"] if "model" in mixer else mixer
      cfg = model.ModelConfig.from_config(section, vocab_size=1)
    names = sorted(set(cfg.mixers))
    if len(names) > 1:
      raise ValueError(f"the config names several mixers ({', '.join(names)}): check each, e.g. "
                       f"check_mixer(config, overrides={{'layer_mixers': '', 'mixer': {names[0]!r}}})")
    name, cls = names[0], mixers.get(names[0])
  fields = {**(SMALL if small else {}), **dict(overrides), "dtype": "float32"}
  if "layer_mixers" in overrides or "mixer" in overrides:
    cfg = dataclasses.replace(cfg, **{k: fields.pop(k) for k in ("layer_mixers", "mixer") if k in fields})
    name, cls = cfg.mixers[0], mixers.get(cfg.mixers[0])
  cfg = dataclasses.replace(cfg, **fields)

  def build(rngs, dtype=None, mode=None):
    c = cfg
    if dtype is not None:
      c = dataclasses.replace(c, dtype={jnp.bfloat16: "bfloat16", jnp.float32: "float32"}[dtype])
    if mode is not None:
      c = dataclasses.replace(c, mode=mode)
    return cls.from_config(c, rngs=rngs)
  return name, build


def check_mixer(mixer, overrides: Optional[Mapping[str, Any]] = None, *, checks: Sequence[str] = CHECKS,
                tolerances: Optional[Mapping[str, float]] = None, small: bool = True, seed: int = 0,
                raise_on_failure: bool = True) -> ContractReport:
  """Runs the mixer contract (module docstring) -> a ContractReport, each check by name with its measured error.

  mixer: a registered mixer name; a mixer class (built with `cls.from_config(ModelConfig)`); a config naming one
  registered mixer (a full config, its `model` section, or a ModelConfig); or a function
  `(*, rngs, dtype=..., mode=...) -> mixer module` (dtype a jnp dtype, mode 'chunk' | 'recurrent'; each
  keyword passed only by the checks that need it). overrides: ModelConfig fields set on the config
  (e.g. {'feature_map': 'favor'}). small: replace the config's sizes by SMALL (d_model 16, 2 heads, chunk 4, ...).
  checks: a subset of CHECKS; tolerances: per-check overrides of TOLERANCES.
  raise_on_failure: raise MixerContractError naming every failed check (else return the report).
  """
  unknown = sorted(set(checks) - set(CHECKS)) + sorted(set(tolerances or {}) - set(CHECKS))
  if unknown:
    raise ValueError(f"unknown check(s) {', '.join(unknown)}; valid: {', '.join(CHECKS)}")
  name, build = _builder(mixer, overrides or {}, small)
  tol = {**TOLERANCES, **(tolerances or {})}
  base = build(nnx.Rngs(seed))
  fwd = _Fwd(base)
  x = jax.random.normal(jax.random.key(seed + 1), (B, T, _width(base)), jnp.float32)
  runners = {"forward": _forward, "state_size": _state_size, "prefill_decode": _prefill_decode,
             "packed_documents": _packed_documents, "packed_decode": _packed_decode, "causality": _causality,
             "bf16": _bf16, "chunk_vs_recurrent": _chunk_vs_recurrent}
  results = []
  for check in CHECKS:
    if check not in checks:
      continue
    try:
      error, detail = runners[check](fwd=fwd, x=x, build=build, seed=seed, tol=tol[check])
    except Exception as e:  # pylint: disable=broad-except  (a check that crashes fails, naming the exception)
      results.append(CheckResult(check, False, None, tol[check], f"raised {type(e).__name__}: {e}"))
      continue
    if error is None:
      results.append(CheckResult(check, None, None, tol[check], detail))
    else:
      results.append(CheckResult(check, error <= tol[check] and not detail, error, tol[check], detail))
  report = ContractReport(name, results)
  if raise_on_failure and report.failed:
    raise MixerContractError(f"mixer {name} fails the mixer contract: " + "; ".join(
        f"{r.name}: {r.detail or ''}{', ' if r.detail and r.error is not None else ''}"
        f"{'' if r.error is None else f'error {r.error:.3g} > tolerance {r.tolerance:.3g}'}" for r in report.failed)
        + f"\n{report}", report)
  return report


def _width(mixer) -> int:
  """The mixer's d_model (its `d_model` attribute, else the first Linear's input width)."""
  if hasattr(mixer, "d_model"):
    return int(mixer.d_model)
  for _, m in nnx.iter_graph(mixer):
    if isinstance(m, nnx.Linear):
      return int(m.in_features)
  raise ValueError("cannot tell the mixer's d_model: give it a `d_model` attribute")


# ------------------------------------------------------------------------------------------------
# The checks: each -> (error, detail); detail non-empty = failed (or, with error None, skipped).

def _forward(*, fwd, x, tol, **_):
  del tol
  y, state = fwd(x)
  if y.shape != x.shape:
    return 0.0, f"output shape {list(y.shape)} != input shape {list(x.shape)}"
  if not np.all(np.isfinite(np.asarray(y, np.float32))):
    return float("inf"), "non-finite outputs"
  init = fwd.mixer.init_state(B, T)
  if jax.tree.structure(state) != jax.tree.structure(init):
    return 0.0, f"returned state {jax.tree.structure(state)} != init_state's {jax.tree.structure(init)}"
  for s, s0 in zip(jax.tree.leaves(state), jax.tree.leaves(init)):
    if s.shape != s0.shape or s.dtype != s0.dtype:
      return 0.0, f"a returned state leaf is {s.dtype}{list(s.shape)}, init_state's {s0.dtype}{list(s0.shape)}"
    if not np.all(np.isfinite(np.abs(np.asarray(s)))):
      return float("inf"), "non-finite state"
  return 0.0, ""


def _state_size(*, fwd, tol, **_):
  del tol
  floats = sum(s.size * (2 if jnp.iscomplexobj(s) else 1) for s in _float_leaves(fwd.mixer.init_state(B, T)))
  claimed = B * fwd.mixer.state_size(T)
  if floats != claimed:
    return float(abs(floats - claimed)), (f"state_size({T}) = {claimed // B} floats per sequence, but "
                                          f"init_state({B}, {T}) holds {floats / B:g} per sequence")
  return 0.0, ""


def _prefill_decode(*, fwd, x, tol, **_):
  y_full, s_full = fwd(x)
  y_pre, state = fwd(x[:, :T1], fwd.mixer.init_state(B, T))
  ys = [y_pre]
  for t in range(T1, T):
    y_t, state = fwd(x[:, t:t + 1], state)
    ys.append(y_t)
  err = rel_rms(jnp.concatenate(ys, axis=1), y_full)
  detail = f"prefill {T1} + {T - T1} one-token steps vs one pass: outputs {err:.3g}"
  if err > tol:
    return err, detail
  same_shapes = (jax.tree.structure(state) == jax.tree.structure(s_full) and
                 all(a.shape == b.shape for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(s_full))))
  if same_shapes:
    s_err = rel_rms(_float_leaves(state), _float_leaves(s_full))
    if s_err > tol:
      return s_err, f"{detail}, final states {s_err:.3g}"
    err = max(err, s_err)
  return err, ""


def _packed_documents(*, fwd, x, tol, **_):
  t_a = T - T1
  seg = jnp.asarray([[3] * t_a + [4] * T1, [1] * t_a + [2] * T1], jnp.int32)
  y_packed, _ = fwd(x, segment_ids=seg)
  y_full, _ = fwd(x)
  y_second, _ = fwd(x[:, t_a:], fwd.mixer.init_state(B, T))  # the second document alone, fresh state
  y_one_doc, _ = fwd(x, segment_ids=jnp.ones((B, T), jnp.int32))  # no boundary: as without ids
  errs = {"the first document vs the row without segment_ids": rel_rms(y_packed[:, :t_a], y_full[:, :t_a]),
          "the second document vs running it alone": rel_rms(y_packed[:, t_a:], y_second),
          "segment_ids without a boundary vs none": rel_rms(y_one_doc, y_full)}
  bad = [f"{k}: {v:.3g}" for k, v in errs.items() if v > tol]
  return max(errs.values()), "; ".join(bad)


def _packed_decode(*, fwd, x, tol, **_):
  seg = jnp.asarray([[1] * 3 + [2] * (T - 3)] * B, jnp.int32)
  y_packed, _ = fwd(x, segment_ids=seg)
  _, state = fwd(x[:, :T1], fwd.mixer.init_state(B, T), seg[:, :T1])
  y_step, _ = fwd(x[:, T1:T1 + 1], state)
  err = rel_rms(y_step, y_packed[:, T1:T1 + 1])
  return err, (f"a step after a packed prefill vs the packed row: {err:.3g} (the step must see only the last "
               "document)" if err > tol else "")


def _causality(*, fwd, x, tol, **_):
  cot = jnp.zeros(x.shape, jnp.float32).at[:, T0].set(1.0)
  g = jax.grad(lambda x: jnp.sum(fwd.jitted(fwd.params, x)[0].astype(jnp.float32) * cot))(x)
  g_T = np.abs(np.asarray(g, np.float64)).max(axis=(0, 2))
  err = float(g_T[T0 + 1:].max() / max(g_T.max(), 1e-30))
  if err > tol:
    return err, f"y_{T0} depends on later inputs: max |d y_{T0} / d x_s| per s = {np.array2string(g_T, precision=2)}"
  dead = [s for s in range(T0 + 1) if not g_T[s] > 0]
  if dead:
    return err, f"y_{T0} does not depend on the inputs at s = {dead}"
  return err, ""


def _bf16(*, fwd, x, build, seed, tol):
  m16 = build(nnx.Rngs(seed), dtype=jnp.bfloat16)
  nnx.update(m16, nnx.state(fwd.mixer))  # the same parameters (float32 either way)
  y16, _ = nnx.jit(lambda m, x: m(x))(m16, x.astype(jnp.bfloat16))
  y32, _ = fwd(x)
  err = rel_rms(np.asarray(y16, np.float32), y32)
  return err, (f"bfloat16 outputs vs float32: {err:.3g}" if err > tol else "")


def _chunk_vs_recurrent(*, fwd, x, build, seed, tol):
  built = {}
  for mode in ("chunk", "recurrent"):
    try:
      built[mode] = build(nnx.Rngs(seed), mode=mode)
    except (TypeError, ValueError) as e:  # no such form
      return None, f"mode={mode!r} cannot be built ({e})"
  forms = {getattr(m, "mode", None) for m in built.values()}
  if None in forms or len(forms) < 2:
    return None, "the mixer does not have chunk and recurrent forms (its `mode` does not change)"
  outs = {}
  for mode, m in built.items():
    nnx.update(m, nnx.state(fwd.mixer))
    outs[mode] = fwd(x) if getattr(m, "mode") == getattr(fwd.mixer, "mode", None) else _Fwd(m)(x)
  err = max(rel_rms(outs["chunk"][0], outs["recurrent"][0]),
            rel_rms(_float_leaves(outs["chunk"][1]), _float_leaves(outs["recurrent"][1])))
  return err, (f"chunk vs recurrent ({' vs '.join(sorted(forms))}): outputs and states {err:.3g}"
               if err > tol else "")
