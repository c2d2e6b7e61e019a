"""How far back does a trained S4D layer look? Its convolution kernel's mass past the training length.

  python experiments/lm/s4_memory.py --workdir=SUB [--train_len=128] [--max_lag=8192]   # writes SUB/s4_memory.json

Per S4D layer of the workdir's final checkpoint, per channel h: the kernel of the discretized system
K_h[l] = Re(Σ_n C[h,n] Bb[h,n] Ab[h,n]^l), l = 0 .. max_lag-1 (the impulse response; the D skip left out), and
  tail_h = Σ_{l ≥ train_len} |K_h[l]| / Σ_l |K_h[l]|,
the share of the channel's kernel (L1) that lies at lags the model never saw in training (rows of train_len
tokens). Also the modes' e-folding horizons 1 / (−log |Ab|) in tokens. Written: mean / median / max of tail_h
over channels, the share of channels with tail_h > 0.1, the share of modes whose horizon exceeds train_len and
2,048 tokens, per layer and over all layers (keys `s4_*`). A model without S4D layers writes {"s4_layers": 0},
so the script can run as an extra command on every point of a study. The kernel is checked against the op's
impulse response (ops.ssm_diag_channels, FFT form) on the first 256 lags before anything is written.
"""
import json
import os

from absl import app
from absl import flags
from flax import nnx
import jax.numpy as jnp
import numpy as np

import linear_seq
from linear_seq import ops
from linear_seq.mixers import s4

OUTPUT = "s4_memory.json"
CHANNELS_PER_BATCH = 16   # channels whose [N, max_lag] powers are held at once (memory)


def kernel_tail(Ab: np.ndarray, CB: np.ndarray, train_len: int, max_lag: int) -> np.ndarray:
  """tail_h [H] for Ab, CB [H, N] complex: the share of Σ_l |K_h[l]| at lags ≥ train_len (l < max_lag)."""
  lags = np.arange(max_lag)
  tails = []
  for start in range(0, Ab.shape[0], CHANNELS_PER_BATCH):
    a, cb = Ab[start:start + CHANNELS_PER_BATCH], CB[start:start + CHANNELS_PER_BATCH]
    # a^l via exp(l log a): [h, n, l]
    K = np.real(np.einsum("hn,hnl->hl", cb, np.exp(np.log(a)[..., None] * lags)))
    mass = np.abs(K)
    tails.append(mass[:, train_len:].sum(-1) / mass.sum(-1))
  return np.concatenate(tails)


def _check_kernel(Ab, Bb, C) -> None:
  """Our K against the op's response to an impulse in every channel (D = 0), 256 lags."""
  T = 256
  u = jnp.zeros((1, T, Ab.shape[0]), jnp.float32).at[0, 0].set(1.0)
  y, _ = ops.ssm_diag_channels(u, Ab, Bb, C, jnp.zeros(Ab.shape[0], jnp.float32), mode="fft")
  lags = np.arange(T)
  a, cb = np.asarray(Ab, np.complex128), np.asarray(C * Bb, np.complex128)
  K = np.real(np.einsum("hn,hnl->lh", cb, np.exp(np.log(a)[..., None] * lags)))
  err = np.max(np.abs(K - np.asarray(y[0], np.float64))) / max(np.max(np.abs(K)), 1e-30)
  if err > 1e-4:
    raise AssertionError(f"S4D kernel disagrees with ops.ssm_diag_channels' impulse response: rel. error {err:.2e}")


def summarize(tail: np.ndarray, horizon: np.ndarray, train_len: int, prefix: str) -> dict:
  return {f"{prefix}tail_mean": float(tail.mean()), f"{prefix}tail_median": float(np.median(tail)),
          f"{prefix}tail_max": float(tail.max()), f"{prefix}channels_tail_gt_0.1": float((tail > 0.1).mean()),
          f"{prefix}modes_horizon_gt_{train_len}": float((horizon > train_len).mean()),
          f"{prefix}modes_horizon_gt_2048": float((horizon > 2048).mean()),
          f"{prefix}horizon_median": float(np.median(horizon))}


def s4_memory(workdir: str, train_len: int, max_lag: int) -> dict:
  run = linear_seq.load(workdir)
  layers = [m for _, m in nnx.iter_graph(run.model) if isinstance(m, s4.S4D)]
  out = {"s4_layers": len(layers), "train_len": train_len, "max_lag": max_lag, "step": run.step}
  tails, horizons = [], []
  for i, layer in enumerate(layers):
    Ab, Bb, C = layer.discrete_system()
    _check_kernel(Ab, Bb, C)
    a = np.asarray(Ab, np.complex128)
    tail = kernel_tail(a, np.asarray(C * Bb, np.complex128), train_len, max_lag)
    horizon = 1.0 / -np.log(np.abs(a)).ravel()
    out.update(summarize(tail, horizon, train_len, f"s4_layer{i}_"))
    tails.append(tail)
    horizons.append(horizon)
  if layers:
    out.update(summarize(np.concatenate(tails), np.concatenate(horizons), train_len, "s4_"))
  return out


def main(argv):
  del argv
  f = flags.FLAGS
  result = s4_memory(f.workdir, f.train_len, f.max_lag)
  with open(os.path.join(f.workdir, OUTPUT), "w") as fh:
    json.dump(result, fh, indent=1)
  print(json.dumps(result, indent=1))


if __name__ == "__main__":   # flags defined here only (a process may load several study scripts)
  flags.DEFINE_string("workdir", None, "A trained workdir (config.json + checkpoints/).")
  flags.DEFINE_integer("train_len", 128, "The training length: lags from here on were never seen.")
  flags.DEFINE_integer("max_lag", 8192, "Kernel lags computed (the longest evaluation length).")
  flags.mark_flag_as_required("workdir")
  app.run(main)
