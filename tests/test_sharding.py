"""Data parallelism: 4 fake CPU devices give the losses of 1 device; checkpoints restore onto another device
count; FSDP-style parameter sharding gives the same losses too."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from linear_seq import config_lib
from linear_seq import metrics
from linear_seq import sharding
from linear_seq import train
from tests import helpers

ROOT = os.path.join(os.path.dirname(__file__), "..")

# Runs with 4 fake CPU devices (XLA_FLAGS must be set before jax is imported, hence a subprocess).
FOUR_DEVICES = textwrap.dedent("""
    import json, os, sys
    import jax
    jax.config.update("jax_default_matmul_precision", "highest")
    jax.config.update("jax_compilation_cache_dir", os.environ["JAX_CACHE_DIR"])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    from linear_seq import config_lib, metrics, restored, sharding, steps, train, validation
    assert jax.device_count() == 4, jax.devices()
    one_device_workdir, out_dir = sys.argv[1], sys.argv[2]
    config = config_lib.load_config(one_device_workdir)
    losses = lambda w: [r["train_loss"] for r in metrics.read_metrics(w) if "train_loss" in r]
    result = {}
    train.train_and_evaluate(config, os.path.join(out_dir, "dp"))
    result["dp"] = losses(os.path.join(out_dir, "dp"))
    sharding.FSDP_MIN_SIZE = 0  # shard every array with a divisible dimension (the tiny model has small ones)
    fsdp = config_lib.apply_overrides(config, {"train.fsdp": True, "train.eval_every": 100})
    fsdp_state = steps.setup(fsdp, validation.check_config(fsdp).vocab_size, sharding.make_mesh())[2]
    result["fsdp_sharded"] = sum(not s.is_fully_replicated for s in jax.tree.leaves(fsdp_state))
    train.train_and_evaluate(fsdp, os.path.join(out_dir, "fsdp"))
    result["fsdp"] = losses(os.path.join(out_dir, "fsdp"))
    result["restored_eval_loss"] = restored.evaluate(one_device_workdir)["eval_loss"]
    try:
      train.train_and_evaluate(config_lib.apply_overrides(config, {"data.batch_size": 6}), os.path.join(out_dir, "x"))
    except ValueError as e:
      result["batch_error"] = str(e)
    print(json.dumps(result))
""")


def test_array_spec_rules():
  assert sharding.array_spec((1024, 64), 4, fsdp=False) == P()
  assert sharding.array_spec((64, 1024), 1, fsdp=True) == P()
  assert sharding.array_spec((64, 1024), 4, fsdp=True) == P(None, "data")  # largest divisible dimension
  assert sharding.array_spec((1026, 64), 4, fsdp=True) == P(None, "data")  # 1026 does not divide by 4
  assert sharding.array_spec((1026, 63), 4, fsdp=True) == P()
  assert sharding.array_spec((8,), 4, fsdp=True) == P()  # below FSDP_MIN_SIZE: replicated


def test_no_distributed_init_without_env(monkeypatch):
  for k in ("JAX_COORDINATOR_ADDRESS", "COORDINATOR_ADDRESS", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE",
            "MEGASCALE_NUM_SLICES", "TPU_WORKER_HOSTNAMES"):
    monkeypatch.delenv(k, raising=False)
  monkeypatch.setenv("SLURM_NTASKS", "1")  # a single-task job is not multi-process
  assert sharding.maybe_initialize_distributed() is False


def test_four_devices_match_one_and_restore_across_device_counts(tmp_path):
  one = str(tmp_path / "one")
  config = config_lib.load_sibling(os.path.join(ROOT, "configs", "mqar.py"), "mqar").get_config("tiny=True")
  config = config_lib.apply_overrides(config, {"train.log_every": 1})
  final = train.train_and_evaluate(config, one)
  env = helpers.fake_devices_env(4)
  proc = subprocess.run([sys.executable, "-c", FOUR_DEVICES, one, str(tmp_path)], env=env, cwd=ROOT,
                        capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  result = json.loads(proc.stdout.strip().splitlines()[-1])
  losses = [r["train_loss"] for r in metrics.read_metrics(one) if "train_loss" in r]
  assert len(losses) == 4 and len(result["dp"]) == 4
  np.testing.assert_allclose(result["dp"], losses, rtol=1e-5)
  np.testing.assert_allclose(result["fsdp"], losses, rtol=1e-5)
  assert result["fsdp_sharded"] > 0
  assert result["restored_eval_loss"] == pytest.approx(final["eval_loss"], rel=1e-5)
  assert "data.batch_size=6 must be a positive multiple of the device count 4" in result["batch_error"]
