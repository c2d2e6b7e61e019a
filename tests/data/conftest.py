"""Fixtures: the default config's data section (tests.helpers.default_data_config) with a temporary data_dir."""
import pytest

from tests.helpers import default_data_config


@pytest.fixture
def data_config(tmp_path):
  c = default_data_config()
  c.data_dir = str(tmp_path / "tfds")
  return c
