"""Shared fixtures: the default config's data section (so field names stay in sync) with a temporary data_dir."""
import importlib.util
import os

import pytest

_CONFIG_FILE = os.path.join(os.path.dirname(__file__), "..", "..", "configs", "default.py")


def default_data_config():
  spec = importlib.util.spec_from_file_location("linear_seq_default_config", _CONFIG_FILE)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config().data


@pytest.fixture
def data_config(tmp_path):
  c = default_data_config()
  c.data_dir = str(tmp_path / "tfds")
  return c


def write_files(folder, contents: dict) -> str:
  """Writes {relative name: str or bytes} under folder; returns the folder path."""
  for name, content in contents.items():
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
  return str(folder)
