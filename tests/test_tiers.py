"""The test tiers (tests/conftest.py SLOW and SWEEPS): every entry names an existing test, and the fast tier keeps
a case of every mixer and every mode of the ops' reference sweeps (conftest checks that kept case ids exist)."""
import ast
import os

from linear_seq import mixers
from linear_seq import ops
from tests.conftest import SLOW
from tests.conftest import SWEEPS
from tests.conftest import is_slow
from tests.helpers import REPO


def _defined_tests(path: str) -> set[str]:
  with open(os.path.join(REPO, path)) as f:
    return {n.name for n in ast.parse(f.read()).body if isinstance(n, ast.FunctionDef)}


def test_every_entry_names_an_existing_file_and_test():
  for prefix in (*SLOW, *SWEEPS):
    path, _, name = prefix.partition("::")
    assert os.path.isfile(os.path.join(REPO, path)), prefix
    assert not name or name.partition("[")[0] in _defined_tests(path), prefix


def test_slow_and_fast_by_prefix_and_case():
  assert is_slow("tests/test_multiprocess.py::test_anything_new", None)
  assert is_slow("tests/ops/test_seq_parallel.py::test_sharded_equals_unsharded[any-case]", "any-case")
  assert not is_slow("tests/test_multiprocess_other.py::test_x", None)  # a prefix of a file name is not a match
  assert not is_slow("tests/ops/test_new_op.py::test_modes_match_reference[case]", "case")  # new files: fast
  sweep = "tests/ops/test_recurrence.py::test_modes_match_reference"
  assert not is_slow(f"{sweep}[{SWEEPS[sweep][0]}]", SWEEPS[sweep][0])
  assert is_slow(f"{sweep}[a-new-case]", "a-new-case")  # a new case of a sweep: slow
  assert not is_slow("tests/mixers/test_mixers.py::test_new[mamba2]", "mamba2")
  assert is_slow("tests/mixers/test_mixers.py::test_new[mamba2-assoc]", "mamba2-assoc")


def test_fast_tier_keeps_a_case_of_every_mixer():
  built_in = {n for n, cls in mixers.MIXERS.items() if cls.__module__.startswith("linear_seq.mixers.")}
  assert built_in <= {case.split("-")[0] for case in SWEEPS["tests/mixers/test_mixers.py"]}
  assert {"deltanet", "mamba2"} <= set(SWEEPS["tests/mixers/test_delta_mamba.py"])


def test_fast_tier_keeps_every_mode_of_linear_attention():
  kept = SWEEPS["tests/ops/test_linear_attention.py::test_linear_attention_matches_reference"]
  assert {case.split("-")[3] for case in kept} == set(ops.MODES)  # ids: fmap-normalize-decay-MODE-chunk-init-T
