"""Every study config produces exactly the sweep points of the committed golden file (sweep_points.json)."""
import json

import pytest

from tests.studies import sweep_points

with open(sweep_points.GOLDEN) as f:
  GOLDEN = json.load(f)


@pytest.fixture(scope="module")
def now():
  return sweep_points.dump()


def test_golden_file_covers_every_variant():
  assert sorted(GOLDEN) == sorted(f"{p}:{a}" for p, args in sweep_points.VARIANTS.items() for a in args)


@pytest.mark.parametrize("variant", sorted(GOLDEN))
def test_points_are_unchanged(now, variant):
  assert now[variant] == GOLDEN[variant], (
      f"{variant}: the sweep points changed; if that is intended, rerun `python -m tests.studies.sweep_points`")
