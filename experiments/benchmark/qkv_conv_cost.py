"""What the q/k/v short convs cost in an MQAR train step, and whether another form of the same conv is cheaper.

  taskset -c 1 env XLA_FLAGS=--xla_cpu_multi_thread_eigen=false python experiments/benchmark/qkv_conv_cost.py gla

configs/mqar.py (setup 2026-12: convs of width 4 on q, k and v) with model.mixer=ARGV[1], one jitted train
step (B=64, T=64, d=64) per variant: the layer as it is (shifted slices of [q ‖ k ‖ v]); the same conv as a
stacked window and an einsum; as three separate convs; after one fused [W_q ‖ W_k ‖ W_v] projection; and no
conv at all (model.conv_width=0). A variant is swapped in by replacing ShortConv.__call__ / qkv_conv.project in
this process while its step is traced. Timing: 5 interleaved rounds, each a median of 3 calls per variant (the
machine is shared); the median of the rounds.
"""
import functools
import statistics
import sys

import jax
import jax.numpy as jnp
import numpy as np

from timing import median_ms  # experiments/benchmark/timing.py

from linear_seq import config_lib, steps
from linear_seq.mixers import qkv_conv, short_conv

SLICES, PROJECT = short_conv.ShortConv.__call__, qkv_conv.project


def conv_window(self, x_BTD, *, state=None, segment_ids=None):
  """The same conv as [B, T, W, D] windows contracted with the kernel (training path only)."""
  assert state is None and segment_ids is None
  _, T, _ = x_BTD.shape
  W = self.width
  xp = jnp.pad(x_BTD, ((0, 0), (W - 1, 0), (0, 0)))
  win = jnp.stack([xp[:, W - 1 - lag: W - 1 - lag + T] for lag in range(W)], axis=2)
  return jnp.einsum("btwd,wd->btd", win, self.kernel[...]) + self.bias[...], xp[:, T:]


def project_split(x_BTD, projections, num_heads, conv, *, state=None, segment_ids=None):
  """Three convs, one per projection (the kernel's q, k and v thirds), no concatenation."""
  assert conv is not None and state is None and segment_ids is None
  B, T, D = x_BTD.shape
  W, out = conv.conv.width, []
  for i, p in enumerate(projections):
    a = jnp.pad(p(x_BTD), ((0, 0), (W - 1, 0), (0, 0)))
    k, b = conv.conv.kernel[...][:, i * D:(i + 1) * D], conv.conv.bias[...][i * D:(i + 1) * D]
    y = b + sum(k[lag] * a[:, W - 1 - lag: W - 1 - lag + T] for lag in range(W))
    out.append(y.reshape(B, T, num_heads, -1))
  return tuple(out), None


def project_fused(x_BTD, projections, num_heads, conv, *, state=None, segment_ids=None):
  """One matmul with [W_q ‖ W_k ‖ W_v] (the projections have no bias), then the layer's conv."""
  assert conv is not None and state is None and segment_ids is None
  B, T, _ = x_BTD.shape
  y, _ = conv.conv(x_BTD @ jnp.concatenate([p.kernel[...] for p in projections], axis=1))
  return tuple(a.reshape(B, T, num_heads, -1) for a in jnp.split(y, 3, axis=-1)), None


VARIANTS = {  # name: (config overrides, ShortConv.__call__, qkv_conv.project)
    "q/k/v conv as is (slices)": ({}, SLICES, PROJECT),
    "window + einsum": ({}, conv_window, PROJECT),
    "three separate convs": ({}, SLICES, project_split),
    "fused projection + conv": ({}, SLICES, project_fused),
    "no conv": ({"model.conv_width": 0}, SLICES, PROJECT),
}


def main():
  mixer = sys.argv[1] if len(sys.argv) > 1 else "gla"
  cfg = config_lib.apply_overrides(config_lib.load_config("configs/mqar.py"), {"model.mixer": mixer})
  V, B, T = cfg.data.vocab_size, cfg.data.batch_size, cfg.data.seq_len
  rng = np.random.default_rng(0)
  batch = {"inputs": jnp.asarray(rng.integers(0, V, (B, T)), jnp.int32),
           "targets": jnp.asarray(rng.integers(0, V, (B, T)), jnp.int32), "weights": jnp.ones((B, T))}
  runs = {}
  for name, (over, call, project) in VARIANTS.items():
    short_conv.ShortConv.__call__, qkv_conv.project = call, project
    c = config_lib.apply_overrides(cfg, over)
    static, _, shardings = steps.setup(c, V, jax.make_mesh((1,), ("data",)))
    state = steps.init_state(c, V, static, shardings)
    train = jax.jit(functools.partial(steps.train_step, graphdef=static.graphdef, tx=static.tx))
    f = lambda s, train=train: train(s, batch)[1]["loss"]  # noqa: E731
    jax.block_until_ready(f(state))  # traced and compiled with this variant swapped in
    runs[name] = (f, state, [])
  short_conv.ShortConv.__call__, qkv_conv.project = SLICES, PROJECT
  for _ in range(5):
    for f, state, times in runs.values():
      times.append(median_ms(f, state, n=3, warmup=False))
  base = statistics.median(runs["no conv"][2])
  for name, (_, _, times) in runs.items():
    m = statistics.median(times)
    print(f"{mixer} {name:26s} " + " ".join(f"{t:6.1f}" for t in times) +
          f"   median {m:6.1f} ms  ({m / base:.2f}x no conv)", flush=True)


if __name__ == "__main__":
  main()
