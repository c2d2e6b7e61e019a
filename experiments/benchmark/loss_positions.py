"""The head at every position against only at the answers (train.loss_positions), in an MQAR train step.

  taskset -c 0 env XLA_FLAGS=--xla_cpu_multi_thread_eigen=false python experiments/benchmark/loss_positions.py gla softmax

configs/mqar.py (B=64, T=64, d=64, vocab 1024, 4 answers a row) per mixer, one jitted train step with
train.loss_positions = 0 (logits at all 64 positions) and = 4 (at the answers only; the same loss and
gradients, tests/test_loss_positions.py), on a batch of the task's own training data. Timing: 5 interleaved
rounds, each a median of 3 calls per variant (the machine may be shared); the median of the rounds.
"""
import functools
import statistics
import sys

import jax
import numpy as np

from timing import median_ms  # experiments/benchmark/timing.py

from linear_seq import config_lib, data, sharding, steps


def main():
  mixers = sys.argv[1:] or ["gla"]
  mesh = sharding.make_mesh()
  runs = {}
  for mixer in mixers:
    for n in (0, 4):
      config = config_lib.apply_overrides(config_lib.load_config("configs/mqar.py"),
                                          {"model.mixer": mixer, "train.loss_positions": n})
      info = data.dataset_info(config.data)
      local = next(data.make_iterator(config.data, "train", batch_size=int(config.data.batch_size),
                                      seq_len=int(config.data.seq_len), seed=0, repeat=True))
      batch = sharding.global_batch(local, mesh)
      static, _, shardings = steps.setup(config, info.vocab_size, mesh)
      state = steps.init_state(config, info.vocab_size, static, shardings)
      train = jax.jit(functools.partial(steps.train_step, graphdef=static.graphdef, tx=static.tx,
                                        loss_positions=n))   # as setup's, without donating the state

      def f(s, train=train, batch=batch):
        with jax.set_mesh(mesh):
          return train(s, batch)[1]["loss"]

      loss = float(f(state))
      runs[(mixer, n)] = (f, state, [], loss)
  for _ in range(5):
    for f, state, times, _ in runs.values():
      times.append(median_ms(f, state, n=3, warmup=False))
  for mixer in mixers:
    full = statistics.median(runs[(mixer, 0)][2])
    for n in (0, 4):
      _, _, times, loss = runs[(mixer, n)]
      m = statistics.median(times)
      print(f"{mixer:8s} loss_positions={n}  first loss {loss:.6f}  " + " ".join(f"{t:6.1f}" for t in times) +
            f"   median {m:6.1f} ms  ({full / m:.2f}x faster than 0)", flush=True)


if __name__ == "__main__":
  main()
