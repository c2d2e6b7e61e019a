"""Study 5: speed and memory of the whole LM per mixer vs sequence length.

  python -m linear_seq.studies.speed --workdir=runs/speed                  # ≈5 min on a CPU core
  python -m linear_seq.studies.speed --workdir=/tmp/speed --tiny           # smoke run, ≈1 min
  python -m linear_seq.studies.speed --decode_workdir=runs/lm/SUB          # decode ms/token of a trained model
  python -m linear_seq.studies.speed --workdir=experiments/speed --plots_only   # redraw from speed.json

For every mixer and sequence length T it measures
  - the training step: forward + backward (gradients of the mean next-token loss wrt all parameters) of the LM
    on a [batch, T] batch, jitted; median of `repeats` calls after a warm-up; tokens/s; XLA's compiled
    memory (temp + arguments + outputs) of that step;
  - decoding: the time of one jitted one-token step with a state that has seen T tokens of context
    (a KV cache of T + 1 slots for softmax; the O(1) recurrent state for the linear mixers and S4).
Compilation and one warm-up call are excluded. A case that runs out of memory, or whose first call takes
longer than --max_case_seconds, is recorded as such and the mixer's longer lengths are skipped.
The crossover length of a linear mixer is where its training step becomes faster than softmax's
(log-log interpolation between the measured lengths). Writes DIR/speed.json, DIR/results.md and PNG plots.
The model is configs/default.py's (width 128, 2 layers, 4 heads, MLP 4x, byte vocabulary) unless overridden.
Softmax at long context (--softmax_arms, --memory_only_from), e.g. experiments/speed/long_context.md:
  python -m linear_seq.studies.speed --workdir=runs/speed_long --mixers=softmax --lengths=2048,8192,16384,32768 \
    --softmax_arms=explicit,chunked,explicit+packed,chunked+packed --memory_only_from=16384
"""
import json
import math
import os
import statistics
import sys
from typing import Any, Callable, Sequence

from absl import app
from absl import flags
import jax
import jax.numpy as jnp
import matplotlib
from flax import nnx

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top,wrong-import-position
import matplotlib.ticker  # pylint: disable=g-import-not-at-top,wrong-import-position

from linear_seq import cli  # pylint: disable=wrong-import-position
from linear_seq import config_lib  # pylint: disable=wrong-import-position
from linear_seq import eval_lib  # pylint: disable=wrong-import-position
from linear_seq import mixers as mixers_lib  # pylint: disable=wrong-import-position
from linear_seq import model as model_lib  # pylint: disable=wrong-import-position
from linear_seq import restored as restored_lib  # pylint: disable=wrong-import-position
from linear_seq import steps as steps_lib  # pylint: disable=wrong-import-position
from linear_seq.mixers import attention_impl as attn_impl  # pylint: disable=wrong-import-position
from linear_seq.studies import common  # pylint: disable=wrong-import-position
from linear_seq.studies import plots as plots_lib  # pylint: disable=wrong-import-position

MIXERS = tuple(mixers_lib.MIXERS)  # every built-in mixer (the registry when this module is imported)
LENGTHS = (64, 128, 256, 512, 1024, 2048, 4096, 8192)  # short lengths locate the crossover
VOCAB = 260
_DEFAULT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "configs", "default.py")


def model_config(mixer: str, *, tiny: bool = False, overrides: dict[str, Any] | None = None):
  """configs/default.py's model with `mixer` (tiny: width 32, 2 layers)."""
  c = config_lib.load_config(f"{_DEFAULT}:tiny=True" if tiny else _DEFAULT)
  c = config_lib.apply_overrides(c, {"model.mixer": mixer, **(overrides or {})})
  return model_lib.ModelConfig.from_config(c.model, vocab_size=VOCAB)


def _median_time(fn: Callable[[], Any], repeats: int) -> tuple[float, float]:
  """(first call seconds incl. compile, median seconds of `repeats` later calls)."""
  first = common.timed(fn)[1]
  return first, statistics.median([common.timed(fn)[1] for _ in range(repeats)])


def packed_segment_ids(batch_size: int, seq_len: int, doc_len: int) -> jax.Array:
  """int32 [batch_size, seq_len]: rows packed with documents of doc_len tokens (ids 1, 2, ...)."""
  return jnp.broadcast_to(1 + jnp.arange(seq_len, dtype=jnp.int32) // doc_len, (batch_size, seq_len))


def time_train_step(lm: model_lib.LM, batch_size: int, seq_len: int, repeats: int, *, doc_len: int = 0,
                    timed: bool = True) -> dict[str, Any]:
  """Forward + backward of the LM's mean next-token loss on random tokens [batch_size, seq_len].

  doc_len > 0: the rows are packed documents of doc_len tokens (segment_ids). timed=False: compile only
  (the compiled memory, no timing)."""
  graphdef, params, rest = nnx.split(lm, nnx.Param, ...)

  def loss_fn(params, tokens, segment_ids):
    logits, _ = nnx.merge(graphdef, params, rest)(tokens[:, :-1], segment_ids=segment_ids)
    logp = jax.nn.log_softmax(logits)
    return -jnp.mean(jnp.take_along_axis(logp, tokens[:, 1:, None], axis=-1))

  grad_fn = jax.jit(jax.value_and_grad(loss_fn))
  tokens = jax.random.randint(jax.random.key(0), (batch_size, seq_len + 1), 0, VOCAB, jnp.int32)
  segment_ids = packed_segment_ids(batch_size, seq_len, doc_len) if doc_len else None
  compiled = grad_fn.lower(params, tokens, segment_ids).compile()
  memory = common.compiled_memory(compiled)
  if not timed:
    return {"train_memory_bytes": memory}
  first, median = _median_time(lambda: compiled(params, tokens, segment_ids), repeats)
  return {"train_step_s": median, "train_first_s": first, "train_tokens_per_sec": batch_size * seq_len / median,
          "train_memory_bytes": memory}


def time_decode(lm: model_lib.LM, batch_size: int, context: int, steps: int) -> dict[str, Any]:
  """Seconds per one-token decode step after a prefill of `context` tokens (median over `steps` steps)."""
  graphdef, params = nnx.split(lm)

  @jax.jit
  def prefill(params, tokens, state):
    return nnx.merge(graphdef, params)(tokens, state=state)[1]

  @jax.jit
  def step(params, token, state):
    logits, state = nnx.merge(graphdef, params)(token, state=state)
    return jnp.argmax(logits[:, -1], -1).astype(jnp.int32)[:, None], state

  prompt = jax.random.randint(jax.random.key(1), (batch_size, context), 0, VOCAB, jnp.int32)
  state = jax.block_until_ready(prefill(params, prompt, lm.init_state(batch_size, context + steps + 1)))
  token = prompt[:, -1:]
  token, state = jax.block_until_ready(step(params, token, state))  # compile + warm-up
  times = []
  for _ in range(steps):
    (token, state), seconds, _ = common.timed(step, params, token, state)
    times.append(seconds)
  return {"decode_ms_per_token": 1e3 * statistics.median(times)}


def decode_speed_of_workdir(workdir: str, *, context: int = 0, steps: int = 32) -> dict[str, Any]:
  """Decode ms/token of a trained workdir's model (restored like linear_seq.evaluate) after `context` tokens
  (0 = its eval sequence length); written to workdir/decode.json by `--decode_workdir`."""
  r = restored_lib.restore(workdir)
  context = context or eval_lib.eval_seq_len(r.config)
  out = {"step": int(r.step), "decode_context": context,
         **time_decode(steps_lib.merge(r.static, r.state), 1, context, steps)}
  with open(os.path.join(workdir, "decode.json"), "w") as f:
    json.dump(out, f, indent=1)
  return out


def crossover(lengths: Sequence[int], fast: Sequence[float | None], slow: Sequence[float | None]) -> str:
  """First length where fast < slow, log-log interpolated between measured lengths (a readable string)."""
  pts = [(t, f, s) for t, f, s in zip(lengths, fast, slow) if f is not None and s is not None]
  if not pts:
    return "n/a"
  if pts[0][1] < pts[0][2]:
    return f"≤ {pts[0][0]}"
  for (t0, f0, s0), (t1, f1, s1) in zip(pts, pts[1:]):
    if f1 < s1:
      d0, d1 = math.log(f0 / s0), math.log(f1 / s1)
      frac = d0 / (d0 - d1)
      return f"≈ {round(math.exp(math.log(t0) + frac * (math.log(t1) - math.log(t0))))}"
  return f"> {pts[-1][0]}"


def arms(mixers: Sequence[str], softmax_arms: Sequence[str] = ("auto",)) -> list[tuple[str, str, dict, bool]]:
  """(label, mixer, config overrides, packed) per measured arm. softmax_arms: `IMPL` or `IMPL+packed`
  (model.attention_impl; packed rows of documents); the label is 'softmax' for plain 'auto'."""
  out = []
  for mixer in mixers:
    if mixer != "softmax":
      out.append((mixer, mixer, {}, False))
      continue
    for spec in softmax_arms:
      impl, packed = spec.removesuffix("+packed"), spec.endswith("+packed")
      label = "softmax" if spec == "auto" else f"softmax ({', '.join([impl] + ['packed'] * packed)})"
      out.append((label, mixer, {"model.attention_impl": impl}, packed))
  return out


def run(mixers: Sequence[str], lengths: Sequence[int], *, batch_size: int, repeats: int, decode_steps: int,
        tiny: bool, max_case_seconds: float, softmax_arms: Sequence[str] = ("auto",), doc_len: int = 512,
        memory_only_from: int = 0, log: Callable[[str], None] = print) -> list[dict[str, Any]]:
  """Measures every (arm, length); returns one record per case (its 'mixer' is the arm's label).

  Packed arms split each row into documents of doc_len tokens. At T >= memory_only_from (> 0) the training
  step is only compiled: its memory, no timing, no decode."""
  records = []
  for label, mixer, overrides, packed in arms(mixers, softmax_arms):
    cfg = model_config(mixer, tiny=tiny, overrides=overrides)
    lm = model_lib.LM(cfg, rngs=nnx.Rngs(0))
    skip = ""
    for T in lengths:
      rec: dict[str, Any] = {"mixer": label, "seq_len": T, "state_size": lm.state_size(T),
                             "num_params": sum(x.size for x in jax.tree.leaves(nnx.state(lm, nnx.Param)))}
      if overrides:
        rec.update(attention_impl=cfg.attention_impl, doc_len=doc_len if packed else 0)
      if skip:
        rec["status"] = skip
        records.append(rec)
        continue
      try:
        timed = not (memory_only_from and T >= memory_only_from)
        rec.update(time_train_step(lm, batch_size, T, repeats, doc_len=doc_len if packed else 0, timed=timed))
        if timed and decode_steps:
          rec.update(time_decode(lm, 1, T, decode_steps))
        rec["status"] = "ok" if timed else "memory only"
        if rec.get("train_first_s", 0) > max_case_seconds:
          skip = f"skipped (T={T} took {rec['train_first_s']:.0f}s)"
      except Exception as e:  # pylint: disable=broad-except  (XLA reports OOM as a runtime error)
        if "RESOURCE_EXHAUSTED" not in str(e) and "Out of memory" not in str(e) and not isinstance(e, MemoryError):
          raise
        rec["status"] = skip = "out of memory"
      records.append(rec)
      log(json.dumps({k: (round(v, 5) if isinstance(v, float) else v) for k, v in rec.items()}))
  return records


def _fmt(v, digits=3):
  return "" if v is None else (f"{v:.{digits}g}" if isinstance(v, float) else str(v))


def markdown(records: Sequence[dict[str, Any]], *, command: str, plots: Sequence[str]) -> str:
  lengths = sorted({r["seq_len"] for r in records})
  mixers = list(dict.fromkeys(r["mixer"] for r in records))
  by = {(r["mixer"], r["seq_len"]): r for r in records}
  get = lambda m, t, k: by.get((m, t), {}).get(k)
  columns = [f"T={t}" for t in lengths]
  body = []
  for m in mixers:
    cells = [_fmt(1e3 * get(m, t, "train_step_s")) if get(m, t, "train_step_s") else
             (get(m, t, "status") or "") for t in lengths]
    cross = "" if m == "softmax" else crossover(lengths, [get(m, t, "train_step_s") for t in lengths],
                                                [get("softmax", t, "train_step_s") for t in lengths])
    body.append([m, *cells, cross])
  lines = ["# Results: speed and memory", "", f"Command: `{command}`", "",
           "## Training step (forward + backward), ms", "",
           *common.md_table(["mixer", *columns, "crossover vs softmax"], body)]
  for title, key, scale in (("Decode, ms per token at context length T", "decode_ms_per_token", 1.0),
                            ("Compiled memory of the training step, MiB", "train_memory_bytes", 2.0 ** -20),
                            ("Decode state, floats per sequence", "state_size", 1.0)):
    body = [[m, *(_fmt(v * scale if v is not None else None) for v in (get(m, t, key) for t in lengths))]
            for m in mixers]
    lines += ["", f"## {title}", "", *common.md_table(["mixer", *columns], body)]
  lines += [""] + [f"![{p}]({p})" for p in plots if p.endswith(".png")]
  lines += ["", "## Environment", ""] + [f"- {k}: `{v}`" for k, v in common.environment().items()] + [""]
  return "\n".join(lines)


def _plain_log_y(ax) -> None:
  """Log-axis y labels as plain numbers (0.6, not 6×10⁻¹); the 2, 3, 4, 6 between the powers of ten too
  where the axis spans less than two decades."""
  lo, hi = ax.get_ylim()
  few = math.log10(hi / lo) < 2

  def minor(v, _):
    lead = round(v / 10 ** math.floor(math.log10(v)), 6)
    return f"{v:g}" if few and lead in (2, 3, 4, 6) else ""

  ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
  ax.yaxis.set_minor_formatter(matplotlib.ticker.FuncFormatter(minor))


# What memory_vs_length shows (its subtitle): XLA's memory analysis of the compiled step, not a timed run.
MEMORY_SUBTITLE = "XLA's memory analysis of the compiled step: temp + arguments + outputs"


def draw(records: Sequence[dict[str, Any]], workdir: str) -> list[str]:
  """train_step_vs_length, decode_vs_context, memory_vs_length, each as PNG and PDF (plots.save)."""
  files = []
  sizes = sorted({r["num_params"] for r in records if r.get("num_params")})
  model = f"LM of {sizes[0] / 1e6:.2f}-{sizes[-1] / 1e6:.2f}M parameters" if sizes else ""
  for key, scale, ylabel, name, title, what in (
      ("train_step_s", 1e3, "training step, forward + backward (ms)", "train_step_vs_length.png",
       "Training step time vs sequence length", "median of the timed calls"),
      ("decode_ms_per_token", 1.0, "decode time (ms/token)", "decode_vs_context.png",
       "Decode time per token after a context of length T", "median of the timed calls"),
      ("train_memory_bytes", 2.0 ** -20, "compiled training-step memory (MiB)", "memory_vs_length.png",
       "XLA compiled memory of the training step", MEMORY_SUBTITLE)):
    setup = " · ".join(filter(None, [model, what, "both axes log scale"]))
    fig, ax = plt.subplots(figsize=(6.4, 4))
    for m in dict.fromkeys(r["mixer"] for r in records):
      pts = [(r["seq_len"], r[key] * scale) for r in records if r["mixer"] == m and r.get(key) is not None]
      if pts:
        ax.plot(*zip(*pts), marker="o", markersize=4, label=m)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    plots_lib._plain_log_ticks(ax.xaxis)  # pylint: disable=protected-access
    _plain_log_y(ax)
    ax.set_xlabel(("sequence length" if key != "decode_ms_per_token" else "context length") + " T (tokens)")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    plots_lib.legend_outside(ax, "mixer")
    plots_lib.titles(fig, ax, title, setup)
    files += plots_lib.save(fig, workdir, name)
    plt.close(fig)
  return files


FLAGS = flags.FLAGS


def define_flags(flag_values: flags.FlagValues = FLAGS) -> None:
  """The CLI flags (defined only when run as a program, or into the FlagValues a test passes)."""
  kw = {"flag_values": flag_values}
  flags.DEFINE_string("workdir", None, "Where speed.json, results.md and the plots go.", **kw)
  flags.DEFINE_string("decode_workdir", "",
                      "Instead: time decoding of this trained workdir's model, write WORKDIR/decode.json.", **kw)
  flags.DEFINE_integer("decode_context", 0, "Context for --decode_workdir (0 = its eval seq_len).", **kw)
  flags.DEFINE_list("mixers", list(MIXERS), "Mixers to measure, a subset of: " + ", ".join(MIXERS) + ".", **kw)
  flags.DEFINE_list("lengths", [str(t) for t in LENGTHS], "Sequence lengths T.", **kw)
  flags.DEFINE_integer("batch_size", 1, "Training-step batch size.", **kw)
  flags.DEFINE_integer("repeats", 3, "Timed training steps per case (the median is reported).", **kw)
  flags.DEFINE_integer("decode_steps", 16, "Timed one-token decode steps per case (0 = no decode timing).", **kw)
  flags.DEFINE_float("max_case_seconds", 120.0,
                     "Skip a mixer's longer lengths once a first call (compile + run) takes longer.", **kw)
  flags.DEFINE_list("softmax_arms", ["auto"],
                    "softmax arms: model.attention_impl values (auto explicit chunked cudnn), each optionally "
                    "+packed (rows of --doc_len-token documents), e.g. explicit,chunked,explicit+packed.", **kw)
  flags.DEFINE_integer("doc_len", 512, "Document length of the packed softmax arms.", **kw)
  flags.DEFINE_integer("memory_only_from", 0,
                       "From this T on only compile the training step (its memory; no timing, no decode); 0 = never.",
                       **kw)
  flags.DEFINE_bool("tiny", False, "Smoke run: tiny model, T in {64, 128}, 1 repeat.", **kw)
  flags.DEFINE_bool("plots_only", False, "Only redraw the plots (PNG + PDF) from WORKDIR/speed.json.", **kw)
  cli.define_dry_run_flag(flag_values)

  def check_mixers(mixers):
    unknown = [m for m in mixers if m not in MIXERS]
    if unknown:
      raise flags.ValidationError(f"unknown mixer {unknown[0]!r}; valid: {', '.join(MIXERS)}")
    return True

  def check_arms(specs):
    for spec in specs:
      if spec.removesuffix("+packed") not in attn_impl.ATTENTION_IMPLS:
        raise flags.ValidationError(f"unknown softmax arm {spec!r}; valid: "
                                    f"{', '.join(attn_impl.ATTENTION_IMPLS)}, each optionally +packed")
    return True

  flags.register_validator("mixers", check_mixers, flag_values=flag_values)
  flags.register_validator("softmax_arms", check_arms, flag_values=flag_values)
  flags.register_multi_flags_validator(
      ["workdir", "decode_workdir"], lambda f: bool(f["workdir"] or f["decode_workdir"]),
      "--workdir is required (or --decode_workdir)", flag_values=flag_values)


def run_flags(flag_values: flags.FlagValues = FLAGS, argv: Sequence[str] | None = None) -> int:
  """Runs the study (or the decode timing of --decode_workdir) that the parsed flags describe."""
  f = flag_values
  if f.decode_workdir:
    print(json.dumps(decode_speed_of_workdir(f.decode_workdir, context=f.decode_context, steps=f.decode_steps)))
    return 0
  if f.plots_only:
    with open(os.path.join(f.workdir, "speed.json")) as fp:
      print("wrote " + ", ".join(draw(json.load(fp), f.workdir)))
    return 0
  lengths = [int(t) for t in f.lengths] if not f.tiny else [64, 128]
  repeats, steps = (1, 2) if f.tiny else (f.repeats, f.decode_steps)
  os.makedirs(f.workdir, exist_ok=True)
  records = run(f.mixers, lengths, batch_size=f.batch_size, repeats=repeats, decode_steps=steps, tiny=f.tiny,
                max_case_seconds=f.max_case_seconds, softmax_arms=f.softmax_arms, doc_len=f.doc_len,
                memory_only_from=f.memory_only_from)
  with open(os.path.join(f.workdir, "speed.json"), "w") as fp:
    json.dump(records, fp, indent=1)
  plots = draw(records, f.workdir)
  command = " ".join(["python -m linear_seq.studies.speed", *(argv if argv is not None else sys.argv[1:])])
  with open(os.path.join(f.workdir, "results.md"), "w") as fp:
    fp.write(markdown(records, command=command, plots=plots))
  print(f"wrote {f.workdir}/speed.json, results.md, " + ", ".join(plots))
  return 0


def main(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  cli.exit_if_dry_run(f"would measure {', '.join(FLAGS.mixers)} at T={FLAGS.lengths} into "
                      f"{FLAGS.workdir or FLAGS.decode_workdir}")
  sys.exit(run_flags())


if __name__ == "__main__":
  define_flags()
  app.run(main)
