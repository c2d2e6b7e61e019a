"""Every study config produces exactly the sweep points of the committed golden file (sweep_points.json)."""
import json

import pytest

from tests.experiments import sweep_points

with open(sweep_points.GOLDEN) as f:
  GOLDEN = json.load(f)


def test_golden_file_covers_every_variant():
  assert sorted(GOLDEN) == sorted(f"{p}:{a}" for p, args in sweep_points.VARIANTS.items() for a in args)


@pytest.mark.parametrize("variant", sorted(GOLDEN))
def test_points_are_unchanged(variant):
  """Per variant, not one module fixture: under xdist each worker would rebuild all of them."""
  path, arg = variant.split(":", 1)
  got = sweep_points.dump_one(path, arg)
  assert got == GOLDEN[variant], (
      f"{variant}: the sweep points changed; if that is intended, rerun `python -m tests.experiments.sweep_points`")
  # the same overrides in another order name other sub-workdirs and archive records: the sweep would rerun them
  assert json.dumps(got) == json.dumps(GOLDEN[variant]), f"{variant}: a point's overrides changed order"
