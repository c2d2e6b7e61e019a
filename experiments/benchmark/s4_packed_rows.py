"""S4D on packed rows (document resets): the chunkwise form against the scan it replaced, side by side.

  taskset -c 0 env XLA_FLAGS=--xla_cpu_multi_thread_eigen=false python experiments/benchmark/s4_packed_rows.py

One S4D layer's gradient at the LM's shapes (B=32, T=128, D=128, N=64; ~2% of positions start a document)
by `ops.ssm_diag_channels` mode 'scan' / 'chunk' (L = 8, 16, 32) with resets, and 'fft' without them; then a
whole train step of configs/default.py with mixer=s4 on packed rows: model.mode '' (packed rows -> 'chunk')
against 'scan'. Median of 5 calls after a warm-up call, in one process.
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from timing import median_ms  # experiments/benchmark/timing.py

from linear_seq import config_lib, ops, steps
from linear_seq.mixers import segments
from linear_seq.mixers.s4 import S4D


def main():
  B, T, D = 32, 128, 128
  rng = np.random.default_rng(0)
  seg = jnp.asarray(np.cumsum(rng.random((B, T)) < 0.02, axis=1) + 1, jnp.int32)
  reset = segments.boundaries(seg)
  x = jax.random.normal(jax.random.key(0), (B, T, D))
  Ab, Bb, C = S4D(D, state_size=64, rngs=nnx.Rngs(0)).discrete_system()
  Dd = jnp.ones((D,))
  layer = {}
  for name, mode, L, rs in (("scan", "scan", 16, reset), ("chunk L=8", "chunk", 8, reset),
                            ("chunk L=16", "chunk", 16, reset), ("chunk L=32", "chunk", 32, reset),
                            ("fft (no resets)", "fft", 16, None)):
    loss = lambda u, Ab, Bb, C, mode=mode, L=L, rs=rs: jnp.sum(  # noqa: E731
        ops.ssm_diag_channels(u, Ab, Bb, C, Dd, mode=mode, reset=rs, chunk_size=L)[0] ** 2)
    layer[name] = median_ms(jax.jit(jax.grad(loss, argnums=(0, 1, 2, 3))), x, Ab, Bb, C)
    print(f"layer gradient, {name:16s} {layer[name]:8.1f} ms", flush=True)
  print(f"layer: scan / chunk L=16 = {layer['scan'] / layer['chunk L=16']:.2f}x")
  cfg = config_lib.apply_overrides(config_lib.load_config("configs/default.py"), {"model.mixer": "s4"})
  V, Bt, Tt = 256, cfg.data.batch_size, cfg.data.seq_len
  seg = jnp.asarray(np.cumsum(rng.random((Bt, Tt)) < 0.02, axis=1) + 1, jnp.int32)
  batch = {"inputs": jnp.asarray(rng.integers(0, V, (Bt, Tt)), jnp.int32), "segment_ids": seg,
           "targets": jnp.asarray(rng.integers(0, V, (Bt, Tt)), jnp.int32), "weights": jnp.ones((Bt, Tt))}
  step = {}
  for mode in ("", "scan"):
    c = config_lib.apply_overrides(cfg, {"model.mode": mode})
    static, _, shardings = steps.setup(c, V, jax.make_mesh((1,), ("data",)))
    state = steps.init_state(c, V, static, shardings)
    train = jax.jit(functools.partial(steps.train_step, graphdef=static.graphdef, tx=static.tx))
    step[mode] = median_ms(lambda s: train(s, batch)[1]["loss"], state)
    print(f"LM train step (B={Bt}, T={Tt}, d={c.model.d_model}), model.mode={mode or chr(39) * 2:6s} "
          f"{step[mode]:8.1f} ms", flush=True)
  print(f"LM step: scan / chunk = {step['scan'] / step['']:.2f}x")


if __name__ == "__main__":
  main()
