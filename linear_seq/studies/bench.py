"""Benchmark of the mixer ops: forward and forward+backward time, memory, and the target ratios.

  python -m linear_seq.studies.bench                                   # full run, ≈10 min on 2 CPU cores
  python -m linear_seq.studies.bench --T=512,2048 --forms=softmax,chunk --repeats=3
  python -m linear_seq.studies.bench --json=bench.json --markdown      # results file + README table
  python -m linear_seq.studies.bench --T=8192 \
    --forms=chunk,delta_recurrent,delta_chunk,delta_chunk_scalar,delta_chunk_vector   # delta rule
  python -m linear_seq.studies.bench --T=2048,8192 --forms=delta_chunk,delta_product_chunk   # DeltaProduct
  python -m linear_seq.studies.bench --T=8192 --repeats=7 \
    --forms=chunk_scalar,chunk_scalar_signed,chunk_vector,chunk_vector_signed          # signed decays
  python -m linear_seq.studies.bench --batch=8 --heads=16 --dk=128 --dv=128 --dtype=bfloat16 \
    --T=2048,8192,32768 --forms=chunk,delta_chunk,delta_chunk_vector   # the GPU shape (B, H, K) = (8, 16, 128)

Every case is jitted twice: the forward (the output only) and the forward+backward (the gradients of
Σ o ⊙ c for a fixed random cotangent c wrt q, k, v and log_decay; for the SSM wrt u, Ab, Bb, C, D;
for the delta rule also wrt β, with q and k L2-normalized). Compilation and one warm-up call are
excluded from the times. All cases at one T form a group whose repeats are interleaved (round r
times each case once: A, B, C, A, B, C, ...), so the ratios compare forms measured side by side
under the same machine load; each case's repeats are capped by a time budget so slow forms
(recurrent at T=8192) get fewer. Reported: median and min over the repeats, tokens/s of the
forward+backward, XLA's compiled memory (temp + arguments + outputs) and, where the device reports
it, the running peak of device memory. --dtype=bfloat16 feeds the attention, linear_recurrence and
delta-rule cases bf16 q, k, v (gates and β stay float32; the ops' precision policy, docs/DESIGN.md);
the SSM cases stay float32.
"""
import dataclasses
import json
import math
import os
import platform
import statistics
import sys
import time
from typing import Callable, Sequence

from absl import app
from absl import flags
import jax
import jax.numpy as jnp

from linear_seq import cli
from linear_seq import ops
from linear_seq.mixers import householder
from linear_seq.studies import common

GiB = 2.0 ** 30

# Sequence forms: name -> (op, mode, gate, quadratic-memory note or None).
SEQ_FORMS = {
    "softmax": ("softmax_attention", "causal", None, "O(T²)"),
    "recurrent": ("linear_recurrence", "recurrent", None, None),
    "parallel": ("linear_recurrence", "parallel", None, "O(T²)"),
    "chunk": ("linear_recurrence", "chunk", None, None),
    "assoc": ("linear_recurrence", "assoc", None, None),
    "chunk_scalar": ("linear_recurrence", "chunk", "scalar", None),
    "chunk_vector": ("linear_recurrence", "chunk", "vector", None),
    "chunk_scalar_signed": ("linear_recurrence", "chunk", "signed scalar", None),   # α ∈ [−1, 1]
    "chunk_vector_signed": ("linear_recurrence", "chunk", "signed vector", None),
    "parallel_vector": ("linear_recurrence", "parallel", "vector", "O(T²K)"),
    "delta_recurrent": ("delta_rule", "recurrent", None, None),
    "delta_chunk": ("delta_rule", "chunk", None, None),
    "delta_chunk_scalar": ("delta_rule", "chunk", "scalar", None),
    "delta_chunk_vector": ("delta_rule", "chunk", "vector", None),
    "delta_product_chunk": ("delta_product", "chunk", None, None),   # n_h = 2 steps per token
}
HOUSEHOLDER_STEPS = 2  # the delta_product form's n_h (the deltaproduct mixer's default)
SSM_MODES_BY_FORM = {"ssm_fft": "fft", "ssm_scan": "scan", "ssm_assoc": "assoc"}
FORMS = tuple(SEQ_FORMS) + tuple(SSM_MODES_BY_FORM)


@dataclasses.dataclass(frozen=True)
class Target:
  """time(slow) / time(fast) of the forward+backward, compared with `bound` at size `at_T`."""
  name: str
  slow: str
  fast: str
  bound: float
  at_least: bool  # True: ratio ≥ bound (a speedup); False: ratio ≤ bound (a cost)
  at_T: int | None  # the size the README states the target at; None: the SSM's one (S4D) shape
  memory: bool = False  # compare the compiled fwd+bwd memory instead of the time


TARGETS = (
    Target("chunk speedup vs softmax_attention", "softmax", "chunk", 40.0, True, 8192),
    Target("chunk speedup vs recurrent", "recurrent", "chunk", 10.0, True, 8192),
    Target("GLA (vector-gated) chunk / ungated chunk", "chunk_vector", "chunk", 2.5, False, 8192),
    Target("ssm fft speedup vs scan (S4D shape)", "ssm_scan", "ssm_fft", 4.0, True, None),
    Target("delta chunk speedup vs delta recurrent", "delta_recurrent", "delta_chunk", 10.0, True,
           8192),
    Target("delta chunk / ungated linear chunk", "delta_chunk", "chunk", 3.0, False, 8192),
    Target("scalar-gated delta chunk / ungated delta", "delta_chunk_scalar", "delta_chunk", 1.3,
           False, 8192),
    Target("per-channel delta chunk / ungated delta", "delta_chunk_vector", "delta_chunk", 2.5,
           False, 8192),
    Target("delta chunk / linear chunk, compiled memory", "delta_chunk", "chunk", 2.0, False, 8192,
           memory=True),
    Target("deltaproduct (n_h=2) chunk / delta chunk", "delta_product_chunk", "delta_chunk", 2.5, False, 8192),
    Target("signed / unsigned scalar-gated chunk", "chunk_scalar_signed", "chunk_scalar", 1.2, False, 8192),
    Target("signed / unsigned vector-gated chunk", "chunk_vector_signed", "chunk_vector", 1.2, False, 8192),
)


@dataclasses.dataclass
class Case:
  """One op in one form at one size; `fn(*args)` returns the output array."""
  form: str
  op: str
  mode: str
  T: int
  tokens: int
  fn: Callable | None = None
  args: tuple = ()
  diff: tuple = ()
  skip: str | None = None
  result: dict = dataclasses.field(default_factory=dict)


def _fmt_gib(b: float) -> str:
  return f"{b / GiB:.3g} GiB"


def _seq_case(form: str, T: int, a, key) -> Case:
  op, mode, gate, quad = SEQ_FORMS[form]
  B, H, K, V = a.batch, a.heads, a.dk, a.dv
  case = Case(form, op, mode + (f"+{gate} gate" if gate else ""), T, B * T)
  if quad:  # the T×T (×K) intermediates of the forward, kept for the backward: ≈ 3 such arrays
    need = 3 * B * H * T * T * (K if "K" in quad else 1) * 4
    if need > a.max_gib * GiB:
      case.skip = f"skipped ({quad} memory: ~{_fmt_gib(need)} > --max_gib={a.max_gib:g})"
      return case
  kq, kk, kv, kg = jax.random.split(key, 4)
  q = jax.random.normal(kq, (B, T, H, K), jnp.float32)
  k = jax.random.normal(kk, (B, T, H, K), jnp.float32)
  v = jax.random.normal(kv, (B, T, H, V), jnp.float32)
  dt = jnp.dtype(a.dtype)
  if op == "softmax_attention":
    case.fn, case.args = (lambda q, k, v: ops.softmax_attention(q, k, v, causal=True)), (q.astype(dt), k.astype(dt),
                                                                                          v.astype(dt))
  elif op == "delta_product":  # the delta_rule case's inputs with n_h keys, values and β per token
    n, opts = HOUSEHOLDER_STEPS, {"mode": mode} | ({"chunk_size": a.chunk_size} if a.chunk_size else {})
    l2 = lambda x: x / jnp.linalg.norm(x, axis=-1, keepdims=True)
    kn = l2(jax.random.normal(kk, (B, T, n, H, K), jnp.float32))
    vn = jax.random.normal(kv, (B, T, n, H, V), jnp.float32)
    beta = jax.nn.sigmoid(jax.random.normal(jax.random.fold_in(kg, 1), (B, T, n, H), jnp.float32))
    case.fn = lambda q, k, v, b: householder.delta_product(q, k, v, b, **opts)[0]
    case.args = (l2(q).astype(dt), kn.astype(dt), vn.astype(dt), beta)
  elif op == "delta_rule":  # q, k L2-normalized (as the deltanet mixer does), β = σ(x) ∈ (0, 1)
    opts = {"mode": mode} | ({"chunk_size": a.chunk_size} if a.chunk_size else {})
    l2 = lambda x: x / jnp.linalg.norm(x, axis=-1, keepdims=True)
    beta = jax.nn.sigmoid(jax.random.normal(jax.random.fold_in(kg, 1), (B, T, H), jnp.float32))
    case.fn = lambda q, k, v, b, g=None: ops.delta_rule(q, k, v, b, g, **opts)[0]
    case.args = (l2(q).astype(dt), l2(k).astype(dt), v.astype(dt), beta)
    if gate:  # as below
      shape = (B, T, H) if gate == "scalar" else (B, T, H, K)
      case.args += (jax.nn.log_sigmoid(4.0 + jax.random.normal(kg, shape, jnp.float32)),)
  else:
    opts = {"mode": mode} | ({"chunk_size": a.chunk_size} if a.chunk_size else {})
    case.fn = lambda q, k, v, g=None, sign=None: ops.linear_recurrence(q, k, v, g, decay_sign=sign, **opts)[0]
    case.args = (q.astype(dt), k.astype(dt), v.astype(dt))
    if gate:  # GLA-like gates, |α| ≈ 0.98: log σ(x + 4), no denormals on the way
      shape = (B, T, H) if gate.endswith("scalar") else (B, T, H, K)
      case.args += (jax.nn.log_sigmoid(4.0 + jax.random.normal(kg, shape, jnp.float32)),)
  case.diff = tuple(range(len(case.args)))
  if gate and gate.startswith("signed"):  # half the decays negative (the sign has no gradient)
    case.args += (jnp.where(jax.random.bernoulli(jax.random.fold_in(kg, 2), 0.5, shape), -1.0, 1.0),)
  return case


def _ssm_case(form: str, a, key) -> Case:
  """S4D shape: `channels` SISO systems with N complex states each, over a batch of B sequences.

  path 'channels': the batched-channel op `ops.ssm_diag_channels` (what an S4D layer calls);
  'vmap': jax.vmap of the general `ops.ssm` over the channels.
  """
  B, H, N, T = a.ssm_batch, a.ssm_channels, a.ssm_states, a.ssm_T
  mode = SSM_MODES_BY_FORM[form]
  case = Case(form, "ssm" if a.ssm_path == "vmap" else "ssm_diag_channels", mode, T, B * T)
  ku, kc, kd = jax.random.split(key, 3)
  u = jax.random.normal(ku, (B, T, H), jnp.float32)
  lam = -0.5 + 1j * jnp.pi * jnp.arange(N)  # S4D-Lin
  dt = jnp.exp(jnp.linspace(math.log(1e-3), math.log(1e-1), H))[:, None]
  Ab = jnp.exp(dt * lam).astype(jnp.complex64)  # ZOH, [H, N]
  Bb = (jnp.expm1(dt * lam) / lam).astype(jnp.complex64)  # [H, N], B = 1
  C = (jax.random.normal(kc, (H, N, 2)) @ jnp.array([1.0, 1j]) * 0.5 ** 0.5).astype(jnp.complex64)
  D = jax.random.normal(kd, (H,), jnp.float32)
  if a.ssm_path == "channels":
    case.fn = lambda u, Ab, Bb, C, D: ops.ssm_diag_channels(u, Ab, Bb, C, D, mode=mode)[0]
  else:
    def one_channel(u_BT, Ab_N, Bb_N, C_N, D_):
      y_BT1, _ = ops.ssm(u_BT[..., None], Ab_N, Bb_N[:, None], C_N[None], D_[None, None], mode=mode)
      return y_BT1[..., 0]
    case.fn = jax.vmap(one_channel, in_axes=(2, 0, 0, 0, 0), out_axes=2)
  case.args, case.diff = (u, Ab, Bb, C, D), (0, 1, 2, 3, 4)
  return case


def _fwd_bwd(case: Case) -> Callable:
  """Gradients of Σ fn(args) ⊙ c wrt args[diff], c a fixed random cotangent."""
  out = jax.eval_shape(case.fn, *case.args)
  ct = jax.random.normal(jax.random.key(7), out.shape, out.dtype)

  def loss(*args):
    return jnp.sum(case.fn(*args) * ct)

  return jax.grad(loss, argnums=case.diff)


def _device_peak() -> int | None:
  stats = jax.devices()[0].memory_stats() or {}
  return stats.get("peak_bytes_in_use")


def log(msg: str) -> None:
  print(msg, file=sys.stderr, flush=True)


def run_group(cases: list[Case], repeats: int, budget_s: float, max_gib: float) -> None:
  """Compiles, warms up and times every case (fwd and fwd+bwd), repeats interleaved across cases."""
  jobs = []  # (case, kind, compiled, repeats)
  for case in cases:
    if case.skip:
      continue
    try:
      for kind, f in (("fwd", case.fn), ("fwd_bwd", _fwd_bwd(case))):
        t0 = time.perf_counter()
        compiled = jax.jit(f).lower(*case.args).compile()
        case.result[f"{kind}_compile_s"] = time.perf_counter() - t0
        mem = case.result[f"{kind}_bytes"] = common.compiled_memory(compiled)
        if mem is not None and mem > max_gib * GiB:
          raise MemoryError(f"compiled {kind} needs {_fmt_gib(mem)} > --max_gib={max_gib:g}")
        _, warm, _ = common.timed(compiled, *case.args)
        n = max(1, min(repeats, int(budget_s / max(warm, 1e-9))))
        jobs.append((case, kind, compiled, n))
        case.result[f"{kind}_s"], case.result[f"{kind}_cpu_s"] = [], []
      case.result["device_peak_bytes"] = _device_peak()
    except MemoryError as e:
      case.skip = f"skipped ({e})"
    except Exception as e:  # pylint: disable=broad-except  # one broken form must not end the run
      first_line = (str(e).splitlines() or [""])[0][:100]
      case.skip = f"failed ({type(e).__name__}: {first_line})"
    if case.skip:
      jobs = [j for j in jobs if j[0] is not case]
      log(f"  {case.form} T={case.T}: {case.skip}")
  for r in range(max((j[3] for j in jobs), default=0)):
    for case, kind, compiled, n in jobs:
      if r < n:
        _, wall, cpu = common.timed(compiled, *case.args)  # CPU time: less sensitive to load
        case.result[f"{kind}_s"].append(wall)
        case.result[f"{kind}_cpu_s"].append(cpu)


def _stat(case: Case, kind: str, how=statistics.median) -> float | None:
  times = case.result.get(f"{kind}_s")
  return how(times) if times else None


def compute_ratios(cases: list[Case], s4d_default: bool) -> list[dict]:
  """The TARGETS, measured at every T where both forms ran; PASS/MISS only at the size the README states the
  target at (T=8192; the S4D shape for the SSM), 'n/a (not the target size)' with the ratio elsewhere."""
  by = {(c.form, c.T): c for c in cases}
  rows = []
  for tg in TARGETS:
    Ts = sorted({c.T for c in cases if c.form == tg.fast and (tg.slow, c.T) in by})
    for T in Ts:
      slow, fast = by[(tg.slow, T)], by[(tg.fast, T)]
      med = [_stat(slow, "fwd_bwd"), _stat(fast, "fwd_bwd")]
      mins = [_stat(slow, "fwd_bwd", min), _stat(fast, "fwd_bwd", min)]
      if tg.memory:
        med = mins = [slow.result.get("fwd_bwd_bytes"), fast.result.get("fwd_bwd_bytes")]
      row = {"name": tg.name, "T": T, "ratio": None, "ratio_min": None, "ratio_cpu": None,
             "target": ("≥ " if tg.at_least else "≤ ") + f"{tg.bound:g}×",
             "status": slow.skip or fast.skip or "n/a"}
      if None not in med:
        row["ratio"], row["ratio_min"] = med[0] / med[1], mins[0] / mins[1]
        row["ratio_cpu"] = (row["ratio"] if tg.memory else
                            _stat(slow, "fwd_bwd_cpu") / max(_stat(fast, "fwd_bwd_cpu"), 1e-9))
        at_size = tg.at_T == T if tg.at_T else (s4d_default or not tg.fast.startswith("ssm"))
        ok = row["ratio"] >= tg.bound if tg.at_least else row["ratio"] <= tg.bound
        row["status"] = ("PASS" if ok else "MISS") if at_size else "n/a (not the target size)"
      rows.append(row)
  return rows


def _fmt_ms(s):
  return "-" if s is None else f"{s * 1e3:.3g}" if s < 0.1 else f"{s * 1e3:.0f}"


def _fmt_mib(b):
  return "-" if b is None else f"{b / 2 ** 20:.0f}"


def table_rows(cases: list[Case]) -> list[list[str]]:
  rows = []
  for c in cases:
    head = [c.op, c.mode, str(c.T)]
    if c.skip:
      rows.append(head + [c.skip] + [""] * (len(HEADER) - 4))
      continue
    fb = _stat(c, "fwd_bwd")
    rows.append(head + [_fmt_ms(_stat(c, "fwd")), _fmt_ms(fb), _fmt_ms(_stat(c, "fwd_bwd", min)),
                        _fmt_ms(_stat(c, "fwd_bwd_cpu")),
                        f"{c.tokens / fb:,.0f}", _fmt_mib(c.result.get("fwd_bwd_bytes")),
                        _fmt_mib(c.result.get("device_peak_bytes")),
                        f"{len(c.result['fwd_s'])}/{len(c.result['fwd_bwd_s'])}"])
  return rows


HEADER = ["op", "form", "T", "fwd ms", "fwd+bwd ms", "min f+b ms", "f+b cpu ms", "tokens/s (f+b)",
          "mem MiB (f+b)", "dev peak MiB", "repeats"]


def _skipped(row: list[str]) -> bool:
  return row[3].startswith(("skipped", "failed"))


def format_text(rows: list[list[str]]) -> str:
  """Aligned columns; a skipped case prints its reason after op, form and T."""
  widths = [max(len(r[i]) for r in [HEADER] + [r for r in rows if i < 3 or not _skipped(r)])
            for i in range(len(HEADER))]
  fmt = lambda r: "  ".join(x.rjust(w) if i > 1 else x.ljust(w)
                            for i, (x, w) in enumerate(zip(r, widths)))
  lines = [fmt(HEADER), "  ".join("-" * w for w in widths)]
  lines += [fmt(r[:3]) + "  " + r[3] if _skipped(r) else fmt(r) for r in rows]
  return "\n".join(lines)


def format_markdown(rows: list[list[str]]) -> str:
  return "\n".join(common.md_table(HEADER, rows))


def format_ratios(ratios: list[dict], markdown: bool = False) -> str:
  x = lambda v: "-" if v is None else f"{v:.2f}×"
  if markdown:
    return "\n".join(common.md_table(
        ["ratio (fwd+bwd)", "T", "medians", "mins", "CPU time", "target", "status"],
        [[r["name"], r["T"], x(r["ratio"]), x(r["ratio_min"]), x(r["ratio_cpu"]), r["target"], r["status"]]
         for r in ratios]))
  return "\n".join(f"{r['name']:<41} T={r['T']:<5} {x(r['ratio']):>8} (mins {x(r['ratio_min']):>8}, "
                   f"CPU time {x(r['ratio_cpu']):>8})  target {r['target']:<6} {r['status']}" for r in ratios)


def environment() -> dict:
  dev = jax.devices()[0]
  return {
      "device": f"{dev.platform}: {dev.device_kind} x{jax.device_count()}",
      "host": f"{platform.machine()}, {os.cpu_count()} cpus",
      **common.versions(("jax", "jaxlib")),
      "XLA_FLAGS": common.xla_flags(),
      "matmul_precision": str(jax.config.jax_default_matmul_precision),
      "load_avg_at_start": common.load_average(),
      "date": time.strftime("%Y-%m-%d %H:%M:%S"),
  }


class _PositiveInts(flags.ArgumentParser):
  """'512,2048' -> [512, 2048]."""

  def parse(self, argument):
    if isinstance(argument, list):
      return argument
    try:
      vals = [int(x) for x in argument.split(",") if x.strip()]
    except ValueError:
      vals = []
    if not vals or min(vals) <= 0:
      raise ValueError(f"expected comma-separated positive integers, got {argument!r}")
    return vals

  def flag_type(self):
    return "list of positive ints"


FLAGS = flags.FLAGS


def define_flags(flag_values: flags.FlagValues = FLAGS) -> None:
  """The CLI flags (defined only when run as a program, or into the FlagValues a test passes)."""
  kw = {"flag_values": flag_values}
  flags.DEFINE(_PositiveInts(), "T", [512, 2048, 8192], "Sequence lengths, e.g. 512,2048.",
               serializer=flags.CsvListSerializer(","), **kw)
  flags.DEFINE_list("forms", list(FORMS), "Subset of: " + ", ".join(FORMS) + ".", **kw)
  flags.DEFINE_integer("repeats", 5, "Timed repeats per case (after a warm-up).", **kw)
  flags.DEFINE_float("budget_s", 6.0, "Cap on the timed seconds per case and pass (fwd, fwd+bwd): slow forms "
                     "get fewer repeats, at least 1.", **kw)
  flags.DEFINE_float("max_gib", 6.0, "Skip a case whose memory would exceed this.", **kw)
  flags.DEFINE_integer("batch", 1, "Batch of the attention and linear_recurrence cases (GPU shape: 8).", **kw)
  flags.DEFINE_integer("heads", 4, "Heads H (GPU shape: 16).", **kw)
  flags.DEFINE_integer("dk", 64, "Key dimension K (GPU shape: 128, and --dv=128).", **kw)
  flags.DEFINE_integer("dv", 64, "Value dimension V.", **kw)
  flags.DEFINE_enum("dtype", "float32", ("float32", "bfloat16"), "dtype of q, k, v in the attention, "
                    "linear_recurrence and delta-rule cases (gates, β and the SSM stay float32).", **kw)
  flags.DEFINE_integer("chunk_size", None, "Chunk mode's chunk_size (default: the op's).", **kw)
  flags.DEFINE_integer("ssm_batch", 16, "SSM batch.", **kw)
  flags.DEFINE_integer("ssm_channels", 128, "SSM SISO channels.", **kw)
  flags.DEFINE_integer("ssm_states", 64, "Complex states per channel.", **kw)
  flags.DEFINE_integer("ssm_T", 4096, "SSM sequence length.", **kw)
  flags.DEFINE_enum("ssm_path", "channels", ("channels", "vmap"),
                    "ops.ssm_diag_channels (batched channels) or jax.vmap of ops.ssm.", **kw)
  flags.DEFINE_string("json", None, "Write the results and ratios to this JSON file.", **kw)
  flags.DEFINE_bool("markdown", False, "Also print markdown tables (for the README).", **kw)

  def check_forms(names):
    bad = [n for n in names if n not in FORMS]
    if bad or not names:
      raise flags.ValidationError(f"unknown form(s) {', '.join(bad) or repr(names)}; valid: {', '.join(FORMS)}")
    return True

  flags.register_validator("forms", check_forms, flag_values=flag_values)
  flags.register_validator("repeats", lambda n: n >= 1, "--repeats must be ≥ 1", flag_values=flag_values)
  flags.register_validator("json", lambda p: p is None or os.path.isdir(os.path.dirname(os.path.abspath(p))),
                           "--json: its folder does not exist (checked before the benchmark runs)",
                           flag_values=flag_values)
  if "verbose" not in flag_values:
    flags.DEFINE_bool("verbose", False, "Print the traceback of an error, not only its one-line message.", **kw)
  cli.define_dry_run_flag(flag_values)


def run_flags(a: flags.FlagValues = FLAGS) -> dict:
  """Runs the benchmark that the parsed flags describe; returns (and with --json writes) the results."""
  env = environment()
  print("\n".join(f"{k}: {v}" for k, v in env.items()), flush=True)
  key = jax.random.key(0)
  cases = []
  for T in a.T:
    group = [_seq_case(f, T, a, jax.random.fold_in(key, T)) for f in a.forms if f in SEQ_FORMS]
    if group:
      log(f"timing T={T}: {', '.join(c.form for c in group)}")
      run_group(group, a.repeats, a.budget_s, a.max_gib)
      cases += group
  group = [_ssm_case(f, a, key) for f in a.forms if f in SSM_MODES_BY_FORM]
  if group:
    log(f"timing ssm ({a.ssm_path}) B={a.ssm_batch} channels={a.ssm_channels} "
        f"N={a.ssm_states} T={a.ssm_T}")
    run_group(group, a.repeats, a.budget_s, a.max_gib)
    cases += group
  env["load_avg_at_end"] = common.load_average()
  s4d = (a.ssm_batch, a.ssm_channels, a.ssm_states, a.ssm_T) == (16, 128, 64, 4096)
  ratios = compute_ratios(cases, s4d)
  rows = table_rows(cases)
  print(f"\nattention, linear_recurrence: B={a.batch} H={a.heads} K={a.dk} V={a.dv} {a.dtype}; "
        f"ssm ({a.ssm_path} path): B={a.ssm_batch}, {a.ssm_channels} SISO channels x "
        f"{a.ssm_states} complex states.\nms: median of the repeats (fwd/fwd+bwd counts in the "
        f"last column); cpu: process CPU time, all threads; memory: XLA's compiled "
        f"temp+args+outputs. Load average at the end: {env['load_avg_at_end']}.")
  print(format_text(rows) + "\n\n" + format_ratios(ratios))
  if a.markdown:
    print("\n" + format_markdown(rows) + "\n\n" + format_ratios(ratios, markdown=True))
  args = {f.name: f.value for f in a.get_flags_for_module(__name__) if f.name not in ("verbose", "dry_run")}  # the setup
  results = {"environment": env, "args": args, "ratios": ratios,
             "cases": [{"form": c.form, "op": c.op, "mode": c.mode, "T": c.T, "tokens": c.tokens,
                        "skip": c.skip, **c.result} for c in cases]}
  if a.json:
    with open(a.json, "w") as f:
      json.dump(results, f, indent=1)
  return results


def main(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  cli.exit_if_dry_run(f"would time {', '.join(FLAGS.forms)} at T={FLAGS.T}")
  with cli.one_line_errors(OSError, ValueError):  # e.g. --json in a folder that does not exist
    run_flags()


if __name__ == "__main__":
  define_flags()
  app.run(main, flags_parser=cli.parse_flags)
