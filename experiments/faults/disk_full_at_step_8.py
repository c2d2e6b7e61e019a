"""The trainer (linear_seq.main, the same flags) with a full disk from the commit of step 8's checkpoint on:
ENOSPC raised where the commit writes its manifest (integrity.write_manifest of 8.orbax-checkpoint-tmp).

  PYTHONPATH=$PWD python experiments/faults/disk_full_at_step_8.py --config=configs/mqar.py:tiny=True \
      --config.train.checkpoint_every=4 --workdir=/tmp/full

The one copy of this fault: measure.py's diskfull case and tests/test_faults.py both run this file.
"""
import errno

from absl import app

from linear_seq import cli
from linear_seq import integrity
from linear_seq import main

_write_manifest = integrity.write_manifest


def write_manifest(step_dir):
  if "/8.orbax-checkpoint-tmp" in step_dir:
    raise OSError(errno.ENOSPC, "No space left on device", step_dir)
  return _write_manifest(step_dir)


if __name__ == "__main__":
  integrity.write_manifest = write_manifest
  app.run(main.main, flags_parser=cli.parse_flags)
