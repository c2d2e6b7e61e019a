#!/usr/bin/env python
"""Benchmark of the mixer ops; see linear_seq/studies/bench.py. Same flags, e.g.

  .venv/bin/python scripts/benchmark.py --markdown --json=bench.json
"""
from absl import app

from linear_seq.studies import bench

if __name__ == "__main__":
  bench.define_flags()
  app.run(bench.main)
