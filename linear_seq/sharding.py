"""Data parallelism over every device: a 1-D `jax.sharding.Mesh` with axis 'data'.

The batch is sharded over 'data' (leading dim); the train state is replicated, or with `fsdp=True` each array
of at least FSDP_MIN_SIZE elements is sharded over 'data' along its largest dimension that the device count
divides (the rule depends only on the shape, so params and their Adam moments shard alike). The same code
runs on 1 CPU, N fake CPU devices, GPUs and multi-host (jax.distributed), where every process feeds its
host-local share of the batch.
"""
import os
from typing import Any, Mapping, Optional

from absl import logging
import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

DATA_AXIS = "data"
FSDP_MIN_SIZE = 2**14

# Environment variables that mean "this is one process of a multi-process job" (jax.distributed's cluster
# auto-detection reads them; a single-process job on the same cluster types counts as one process).
_MULTIPROCESS_ENV = {
    "JAX_COORDINATOR_ADDRESS": None, "COORDINATOR_ADDRESS": None,  # explicit coordinator
    "SLURM_NTASKS": int, "OMPI_COMM_WORLD_SIZE": int,  # SLURM, Open MPI
    "MEGASCALE_NUM_SLICES": int,  # multi-slice TPU
}


def maybe_initialize_distributed() -> bool:
  """Calls jax.distributed.initialize() when the environment describes a multi-process job (coordinator
  address, SLURM/MPI with more than one task, multi-host TPU). Returns whether it did. Must run before any
  other JAX call."""
  reasons = [k for k, cast in _MULTIPROCESS_ENV.items() if os.environ.get(k)
             and (cast is None or _as_int(os.environ[k]) > 1)]
  if "," in os.environ.get("TPU_WORKER_HOSTNAMES", ""):
    reasons.append("TPU_WORKER_HOSTNAMES")
  if not reasons:
    return False
  logging.info("multi-process job (%s): jax.distributed.initialize()", ", ".join(reasons))
  jax.distributed.initialize()
  logging.info("process %d of %d, %d local / %d global devices", jax.process_index(), jax.process_count(),
               jax.local_device_count(), jax.device_count())
  return True


def _as_int(s: str) -> int:
  try:
    return int(s)
  except ValueError:
    return 0


def make_mesh(devices: Optional[list] = None) -> Mesh:
  """A mesh over all (global) devices with the single axis 'data'."""
  devices = jax.devices() if devices is None else devices
  return Mesh(np.asarray(devices), (DATA_AXIS,))


def data_size(mesh: Mesh) -> int:
  return mesh.shape[DATA_AXIS]


def check_batch_size(batch_size: int, mesh: Mesh, what: str = "data.batch_size") -> None:
  """The global batch must split evenly over the devices and over the processes."""
  n, p = data_size(mesh), jax.process_count()
  if batch_size <= 0 or batch_size % n or batch_size % p:
    raise ValueError(f"{what}={batch_size} must be a positive multiple of the device count {n} "
                     f"(and of the process count {p})")


def batch_sharding(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, P(DATA_AXIS))


def array_spec(shape: tuple, num_shards: int, fsdp: bool) -> P:
  """PartitionSpec of one train-state array: replicated, or (fsdp) sharded num_shards ways along its largest
  dimension that num_shards divides, when it has at least FSDP_MIN_SIZE elements."""
  n = num_shards
  if not fsdp or n == 1 or int(np.prod(shape, dtype=np.int64)) < FSDP_MIN_SIZE:
    return P()
  dims = [d for d in np.argsort(shape)[::-1] if shape[d] % n == 0]
  if not dims:
    return P()
  spec = [None] * len(shape)
  spec[int(dims[0])] = DATA_AXIS
  return P(*spec)


def state_shardings(tree: Any, mesh: Mesh, fsdp: bool = False) -> Any:
  """NamedShardings for a pytree of arrays or ShapeDtypeStructs (see array_spec)."""
  return jax.tree.map(lambda x: NamedSharding(mesh, array_spec(tuple(np.shape(x)), data_size(mesh), fsdp)), tree)


def global_batch(local_batch: Mapping[str, np.ndarray], mesh: Mesh) -> dict[str, jax.Array]:
  """Host-local numpy batch (leading dim = global batch / process count) -> global arrays sharded over 'data'."""
  sharding = batch_sharding(mesh)
  return {k: jax.make_array_from_process_local_data(sharding, np.asarray(v)) for k, v in local_batch.items()}
