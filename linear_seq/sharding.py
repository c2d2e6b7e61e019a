"""Data parallelism over every device: a 1-D `jax.sharding.Mesh` with axis 'data' (or data × seq, below).

The batch is sharded over 'data' (leading dim); the train state is replicated, or with `fsdp=True` each array
of at least FSDP_MIN_SIZE elements is sharded over 'data' along its largest dimension that the device count
divides (the rule depends only on the shape, so params and their Adam moments shard alike). The same code
runs on 1 CPU, N fake CPU devices, GPUs and multi-host (jax.distributed), where every process feeds its
host-local share of the batch.

Long context: `make_mesh(seq=n)` gives the mesh data × seq with seq the inner axis (n consecutive devices of one
host); batches are sharded P('data', 'seq') (T split over seq) and the linear mixers run their op per shard
(mixers/seq_shard.py). Parameters (FSDP too) stay over 'data' only.
"""
import os
from typing import Any, Mapping, Optional

from absl import logging
import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

DATA_AXIS = "data"
SEQ_AXIS = "seq"
FSDP_MIN_SIZE = 2**14

# Environment variables that mean "this is one process of a multi-process job" (jax.distributed's cluster
# auto-detection reads them; a single-process job on the same cluster types counts as one process).
_MULTIPROCESS_ENV = {
    "JAX_COORDINATOR_ADDRESS": None, "COORDINATOR_ADDRESS": None,  # explicit coordinator
    "SLURM_NTASKS": int, "OMPI_COMM_WORLD_SIZE": int,  # SLURM, Open MPI
    "MEGASCALE_NUM_SLICES": int,  # multi-slice TPU
}


def maybe_initialize_distributed(coordinator_address: str = "", num_processes: int = 0, process_id: int = -1,
                                 timeout_s: int = 0) -> bool:
  """Calls jax.distributed.initialize() when the arguments or the environment describe a multi-process job
  (coordinator address, SLURM/MPI with more than one task, multi-host TPU). Returns whether it did. Must run
  before any other JAX call.

  Explicit arguments (the trainer's --coordinator_address, --num_processes, --process_id flags) win over
  JAX's cluster auto-detection; timeout_s > 0 bounds initialization, the heartbeat (a process that died is
  noticed within it and the others exit with an error instead of hanging) and the shutdown barrier.
  """
  reasons = [k for k, cast in _MULTIPROCESS_ENV.items() if os.environ.get(k)
             and (cast is None or _as_int(os.environ[k]) > 1)]
  if "," in os.environ.get("TPU_WORKER_HOSTNAMES", ""):
    reasons.append("TPU_WORKER_HOSTNAMES")
  if num_processes > 1:
    reasons.append(f"--num_processes={num_processes}")
  if not reasons:
    return False
  kwargs = {}
  if coordinator_address:
    kwargs["coordinator_address"] = coordinator_address
  if num_processes > 0:
    kwargs["num_processes"] = num_processes
  if process_id >= 0:
    kwargs["process_id"] = process_id
  if timeout_s > 0:
    kwargs.update(initialization_timeout=timeout_s, heartbeat_timeout_seconds=timeout_s,
                  shutdown_timeout_seconds=timeout_s)
  logging.info("multi-process job (%s): jax.distributed.initialize(%s)", ", ".join(reasons), kwargs)
  jax.distributed.initialize(**kwargs)
  logging.info("process %d of %d, %d local / %d global devices", jax.process_index(), jax.process_count(),
               jax.local_device_count(), jax.device_count())
  return True


def _as_int(s: str) -> int:
  try:
    return int(s)
  except ValueError:
    return 0


def make_mesh(devices: Optional[list] = None, *, data: int = 0, seq: int = 1) -> Mesh:
  """A mesh over all (global) devices: the single axis 'data' (seq=1), else data × seq with seq inner.

  data=0 means all devices not used by seq. Devices are ordered by (process, id) so a seq group lies
  within one host; ValueError when data × seq is not the device count.
  """
  devices = jax.devices() if devices is None else devices
  n = len(devices)
  if seq < 1 or data < 0 or n % seq or (data and data * seq != n):
    raise ValueError(f"mesh.data={data} × mesh.seq={seq} must equal the device count {n} "
                     f"(mesh.data=0: all devices not used by seq)")
  if seq == 1:
    return Mesh(np.asarray(devices), (DATA_AXIS,))
  if jax.process_count() > 1 and jax.local_device_count() % seq:
    raise ValueError(f"mesh.seq={seq} must divide the devices per process ({jax.local_device_count()}): a "
                     "sequence is split within one host")
  ordered = sorted(devices, key=lambda d: (d.process_index, d.id))
  return Mesh(np.asarray(ordered).reshape(n // seq, seq), (DATA_AXIS, SEQ_AXIS))


def seq_size(mesh: Mesh) -> int:
  return mesh.shape.get(SEQ_AXIS, 1)


def check_seq_len(seq_len: int, mesh: Mesh, what: str = "data.seq_len") -> None:
  """T must split evenly over the seq axis."""
  if seq_len % seq_size(mesh):
    raise ValueError(f"{what}={seq_len} must be a multiple of mesh.seq={seq_size(mesh)}")


def data_size(mesh: Mesh) -> int:
  return mesh.shape[DATA_AXIS]


def check_batch_size(batch_size: int, mesh: Mesh, what: str = "data.batch_size") -> None:
  """The global batch must split evenly over the devices and over the processes."""
  n, p = data_size(mesh), jax.process_count()
  if batch_size <= 0 or batch_size % n or batch_size % p:
    devices = f"the device count {n}" if n == mesh.size else f"mesh.data={n}"
    raise ValueError(f"{what}={batch_size} must be a positive multiple of {devices} "
                     f"(and of the process count {p})")


def batch_sharding(mesh: Mesh) -> NamedSharding:
  """[B, T, ...] arrays: B over 'data', and T over 'seq' when the mesh has it."""
  return NamedSharding(mesh, P(DATA_AXIS, SEQ_AXIS) if SEQ_AXIS in mesh.shape else P(DATA_AXIS))


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
  p = jax.process_count()
  return {k: jax.make_array_from_process_local_data(sharding, np.asarray(v), (p * len(v), *np.shape(v)[1:]))
          for k, v in local_batch.items()}
