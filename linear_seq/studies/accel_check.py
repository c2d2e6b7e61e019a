"""The prepared accelerator check: exactness, speed and a training run on a GPU or TPU, in one time-boxed script.

  python -m linear_seq.studies.accel_check --out=experiments/benchmark/gpu_h200     # ≈ 6 min on an H200
  python -m linear_seq.studies.accel_check --out=/tmp/accel --tiny                  # CPU, seconds (the suite)

Written to be run once on a lent machine whose image has JAX, flax and optax but not this project's other
dependencies: the op and speed sections import only `linear_seq.ops`; the training section needs
`ml_collections` too (pure Python: carry its wheel and put the .whl file itself on PYTHONPATH, zipimport reads
it) and is skipped with that reason without it. Each section has a time budget and each case its own
try/except: a failure or an exhausted budget is recorded and the check goes on. OUT.json and OUT.md are
rewritten after every case, so a run killed at its limit keeps what it measured.

Sections:
  exactness — chunk forms against their recurrent (`lax.scan`) forms on the device: GLA's vector and scalar
      gates and the delta rule's three gates, values and gradients (relative RMS), float32 at the default matmul
      precision (TF32 on NVIDIA GPUs, one bf16 pass on TPUs) and at HIGHEST, and bfloat16 inputs.
  speed — fwd+bwd time (median of the repeats after a warm-up) of chunk GLA, the chunk delta rule and softmax
      attention (XLA in float32, XLA and cuDNN flash attention in bfloat16) at (B, H, K) in {(1, 8, 64),
      (8, 16, 128)} and T in {2K, 8K, 32K}, with ratios to softmax; dense attention is skipped where its
      [B, H, T, T] scores would not fit.
  training — a GLA LM (4 layers, width 512) at batch 16 × 2048 on in-memory random tokens: steps/s, tokens/s.
"""
import json
import os
import statistics
import sys
import time
import traceback
from typing import Any, Callable

from absl import app
from absl import flags
import jax
import jax.numpy as jnp
import numpy as np

from linear_seq import ops

FLAGS = flags.FLAGS


def define_flags() -> None:
  flags.DEFINE_string("out", None, "Output prefix: writes OUT.json and OUT.md (its folder is created).")
  flags.DEFINE_bool("tiny", False, "CPU smoke mode: small shapes, one repeat (seconds).")
  flags.DEFINE_float("budget_s", 480.0, "Total time budget; split over the sections (exactness 20%, speed 55%, "
                     "training 25%). A section stops starting new cases once its share is spent.")
  flags.DEFINE_integer("repeats", 5, "Timed repeats per speed case.")
  flags.DEFINE_list("sections", ["exactness", "speed", "training"], "Sections to run (all by default).")
  # (not cli.define_dry_run_flag: linear_seq.cli needs ml_collections, which the accelerator image lacks)
  flags.DEFINE_bool("dry_run", False, "Parse the flags, print what would run and exit 0.")
  flags.mark_flags_as_required(["out"])


def _rel_rms(a, b) -> float:
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  return float(np.sqrt(np.mean((a - b) ** 2)) / max(np.sqrt(np.mean(b ** 2)), 1e-30))


class Report:
  """Results by section, rewritten to OUT.json / OUT.md after every case."""

  def __init__(self, out: str, meta: dict):
    self.out, self.meta, self.sections = out, meta, {}
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)

  def add(self, section: str, row: dict) -> None:
    self.sections.setdefault(section, []).append(row)
    print(f"[{section}] " + ", ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    self.write()

  def write(self) -> None:
    data = {"meta": self.meta, "sections": self.sections}
    for path, text in ((self.out + ".json", json.dumps(data, indent=1)), (self.out + ".md", self.markdown())):
      with open(path + ".tmp", "w") as f:
        f.write(text + "\n")
      os.replace(path + ".tmp", path)

  def markdown(self) -> str:
    lines = ["# Accelerator check", "", "`python -m linear_seq.studies.accel_check " + " ".join(sys.argv[1:]) + "`",
             "", *(f"- {k}: {v}" for k, v in self.meta.items())]
    for name, rows in self.sections.items():
      keys = list(dict.fromkeys(k for r in rows for k in r))
      lines += ["", f"## {name}", "", "| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
      lines += ["| " + " | ".join(_fmt(r.get(k, "")) for k in keys) + " |" for r in rows]
    return "\n".join(lines)


def _fmt(v) -> str:
  if isinstance(v, float):
    return f"{v:.3g}" if abs(v) < 1e-2 or abs(v) >= 1e4 else f"{v:.4g}"
  return str(v)


class Budget:
  def __init__(self, seconds: float):
    self.deadline = time.monotonic() + seconds

  def left(self) -> float:
    return self.deadline - time.monotonic()


def _case(report: Report, section: str, budget: Budget, row: dict, fn: Callable[[], dict]) -> None:
  """Runs one case unless the section's budget is spent; records its results or its error."""
  if budget.left() <= 0:
    report.add(section, {**row, "status": "skipped: time budget spent"})
    return
  t0 = time.monotonic()
  try:
    report.add(section, {**row, **fn(), "status": "ok", "seconds": round(time.monotonic() - t0, 1)})
  except Exception as e:  # pylint: disable=broad-except  (the check survives any single failure)
    report.add(section, {**row, "status": f"error: {type(e).__name__}: {str(e).splitlines()[0][:200]}"})
    traceback.print_exc()


# ------------------------------------------------------------------------------------------------ the ops

def _inputs(key, B, T, H, K, V, gate: str, dtype, delta: bool):
  kq, kk, kv, kg, kb = jax.random.split(key, 5)
  q = jax.random.normal(kq, (B, T, H, K), jnp.float32)
  k = jax.random.normal(kk, (B, T, H, K), jnp.float32)
  if delta:
    q, k = q / jnp.linalg.norm(q, axis=-1, keepdims=True), k / jnp.linalg.norm(k, axis=-1, keepdims=True)
  v = jax.random.normal(kv, (B, T, H, V), jnp.float32)
  shape = {"none": None, "scalar": (B, T, H), "vector": (B, T, H, K), "channel": (B, T, H, K)}[gate]
  g = None if shape is None else jax.nn.log_sigmoid(3.0 + jax.random.normal(kg, shape, jnp.float32))
  args = [q.astype(dtype), k.astype(dtype), v.astype(dtype)]
  if delta:
    args.append(jax.nn.sigmoid(jax.random.normal(kb, (B, T, H), jnp.float32)))
  return args, g


def _op(delta: bool, mode: str, chunk_size: int = 64):
  if delta:
    return lambda q, k, v, beta, g: ops.delta_rule(q, k, v, beta, g, mode=mode, chunk_size=chunk_size)[0]
  return lambda q, k, v, g: ops.linear_recurrence(q, k, v, g, mode=mode, chunk_size=chunk_size)[0]


def _fwd_bwd(f, n_args: int):
  """(output, gradients wrt every input) of Σ f(...) ⊙ c for a fixed cotangent c."""
  def loss(*args):
    out = f(*args).astype(jnp.float32)
    c = jnp.cos(jnp.arange(out.size, dtype=jnp.float32).reshape(out.shape))
    return jnp.sum(out * c), out
  return jax.jit(jax.grad(loss, argnums=tuple(range(n_args)), has_aux=True))


def exactness(report: Report, budget: Budget, tiny: bool) -> None:
  B, T, H, K = (1, 70, 2, 16) if tiny else (2, 1000, 4, 64)
  cases = [("gla", "vector", False), ("gla", "scalar", False), ("delta", "none", True),
           ("delta", "scalar", True), ("delta", "channel", True)]
  settings = [("float32", "default"), ("float32", "highest"), ("bfloat16", "default")]
  if tiny:  # one case of each op, two settings: the script's paths, in seconds
    cases, settings = [cases[0], cases[-1]], settings[1:]
  for name, gate, delta in cases:
    for dtype_name, precision in settings:
      def run(gate=gate, delta=delta, dtype_name=dtype_name, precision=precision):
        dtype = jnp.float32 if dtype_name == "float32" else jnp.bfloat16
        args, g = _inputs(jax.random.key(0), B, T, H, K, K, gate, dtype, delta)
        args = args + ([g] if g is not None else [])
        wrap = (lambda f: (lambda *a: f(*a[:-1], a[-1]))) if g is not None else (lambda f: (lambda *a: f(*a, None)))
        with jax.default_matmul_precision(precision):
          grads_c, out_c = _fwd_bwd(wrap(_op(delta, "chunk")), len(args))(*args)
        with jax.default_matmul_precision("highest"):   # the reference: the scan at full precision, float32 in
          ref_args = [a.astype(jnp.float32) for a in args]
          grads_r, out_r = _fwd_bwd(wrap(_op(delta, "recurrent")), len(args))(*ref_args)
        return {"value_rel_rms": _rel_rms(out_c, out_r),
                "grad_rel_rms_max": max(_rel_rms(a, b) for a, b in zip(grads_c, grads_r))}
      _case(report, "exactness", budget, {"op": name, "gate": gate, "dtype": dtype_name, "precision": precision,
                                           "B,T,H,K": f"{B},{T},{H},{K}"}, run)


def _timed(fn, args, repeats: int) -> float:
  jax.block_until_ready(fn(*args))   # compile + warm-up
  times = []
  for _ in range(repeats):
    t0 = time.perf_counter()
    jax.block_until_ready(fn(*args))
    times.append(time.perf_counter() - t0)
  return statistics.median(times)


def _device_bytes() -> int:
  stats = getattr(jax.devices()[0], "memory_stats", lambda: None)() or {}
  return int(stats.get("bytes_limit", 16 * 2 ** 30))


def speed(report: Report, budget: Budget, tiny: bool, repeats: int) -> None:
  shapes = [(1, 2, 16)] if tiny else [(1, 8, 64), (8, 16, 128)]
  lengths = [64] if tiny else [2048, 8192, 32768]
  on_gpu = jax.default_backend() == "gpu"
  forms = {
      "gla chunk (vector gate) f32": (False, "vector", jnp.float32),
      "delta chunk f32": (True, "none", jnp.float32),
      "softmax xla f32": ("softmax", None, jnp.float32),
      "softmax xla bf16": ("softmax", "xla", jnp.bfloat16),
      **({"softmax cudnn bf16": ("softmax", "cudnn", jnp.bfloat16)} if on_gpu else {}),
  }
  for B, H, K in shapes:
    for T in lengths:
      times = {}
      for form, (kind, gate, dtype) in forms.items():
        def run(kind=kind, gate=gate, dtype=dtype, form=form):
          if kind == "softmax":
            if B * H * T * T * 4 * 3 > 0.8 * _device_bytes():
              raise MemoryError(f"[B,H,T,T] scores need {B * H * T * T * 4 / 2 ** 30:.1f} GiB")
            q, k, v = _inputs(jax.random.key(1), B, T, H, K, K, "none", dtype, False)[0]
            impl = None if gate in (None, "xla") else gate
            f = lambda q, k, v: ops.softmax_attention(q, k, v, causal=True, implementation=impl)
            args = [q, k, v]
          else:
            args, g = _inputs(jax.random.key(1), B, T, H, K, K, gate, dtype, kind)
            f = _op(kind, "chunk")
            args = args + [g] if g is not None else args
            if g is None:
              f = (lambda f0: (lambda *a: f0(*a, None)))(f)
          seconds = _timed(_fwd_bwd(f, len(args)), args, repeats)
          times[form] = seconds
          return {"fwd+bwd ms": seconds * 1e3, "tokens/s": B * T / seconds}
        _case(report, "speed", budget, {"form": form, "B,H,K": f"{B},{H},{K}", "T": T}, run)
      base = times.get("softmax cudnn bf16") or times.get("softmax xla bf16")
      for form in ("gla chunk (vector gate) f32", "delta chunk f32"):
        if base and form in times:
          report.add("speed ratios", {"B,H,K": f"{B},{H},{K}", "T": T, "form": form,
                                      "softmax (best bf16) / form": base / times[form]})


# ------------------------------------------------------------------------------------------------ training

def training(report: Report, budget: Budget, tiny: bool) -> None:
  row = {"model": "gla 4 x 512" if not tiny else "gla 1 x 32"}
  try:
    import ml_collections  # pylint: disable=g-import-not-at-top,unused-import
  except ImportError:
    report.add("training", {**row, "status": "skipped: ml_collections is not installed (carry its wheel)"})
    return

  def run():
    from linear_seq import config_lib, sharding, steps  # pylint: disable=g-import-not-at-top
    default = os.path.join(os.path.dirname(__file__), "..", "..", "configs", "default.py")
    B, T, L, D, n = (2, 64, 1, 32, 3) if tiny else (16, 2048, 4, 512, 20)
    config = config_lib.apply_overrides(config_lib.load_config(default), {
        "model.num_layers": L, "model.d_model": D, "model.num_heads": max(D // 64, 1), "data.seq_len": T,
        "data.batch_size": B, "train.num_steps": n})
    mesh = sharding.make_mesh()
    static, _, shardings = steps.setup(config, 258, mesh)
    state = steps.init_state(config, 258, static, shardings)
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 256, (B, T + 1)).astype(np.int32)
    spec = sharding.batch_sharding(mesh)
    batch = {"inputs": tokens[:, :-1], "targets": tokens[:, 1:], "weights": np.ones((B, T), np.float32)}
    batch = {k: jax.device_put(v, spec) for k, v in batch.items()}
    with jax.set_mesh(mesh):
      state, m = static.train_step(state, batch)   # compile
      jax.block_until_ready(m)
      t0 = time.perf_counter()
      for _ in range(n):
        state, m = static.train_step(state, batch)
      jax.block_until_ready(m)
    dt = time.perf_counter() - t0
    return {"batch": f"{B} x {T}", "steps": n, "steps/s": n / dt, "tokens/s": n * B * T / dt,
            "final loss": float(m["loss"])}

  _case(report, "training", budget, row, run)


def run_check(out: str, tiny: bool, budget_s: float, repeats: int,
              sections=("exactness", "speed", "training")) -> Report:
  meta = {"jax": jax.__version__, "backend": jax.default_backend(), "devices": str(jax.devices()),
          "tiny": tiny, "budget_s": budget_s, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
  report = Report(out, meta)
  report.write()
  start = time.monotonic()
  for name, share, fn in (("exactness", 0.20, lambda b: exactness(report, b, tiny)),
                          ("speed", 0.55, lambda b: speed(report, b, tiny, 1 if tiny else repeats)),
                          ("training", 0.25, lambda b: training(report, b, tiny))):
    if name not in sections:
      continue
    fn(Budget(share * budget_s))
    report.meta[f"{name} seconds"] = round(time.monotonic() - start, 1)
    report.write()
  return report


def main(argv) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  unknown = set(FLAGS.sections) - {"exactness", "speed", "training"}
  if unknown:
    raise app.UsageError(f"unknown sections {sorted(unknown)}; valid: exactness, speed, training")
  if FLAGS.dry_run:
    print(f"dry run: would run {', '.join(FLAGS.sections)} into {FLAGS.out}.json and .md")
    return
  report = run_check(FLAGS.out, FLAGS.tiny, FLAGS.budget_s, FLAGS.repeats, FLAGS.sections)
  print(f"wrote {FLAGS.out}.json and {FLAGS.out}.md ({sum(len(r) for r in report.sections.values())} rows)")


if __name__ == "__main__":
  define_flags()
  app.run(main)
