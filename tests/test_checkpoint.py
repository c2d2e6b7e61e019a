"""Checkpointer: save / keep K / restore latest or a step; missing and corrupt checkpoints."""
import glob
import os
import shutil

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from linear_seq import checkpoint
from linear_seq import sharding


def make_state(step: int):
  return {"step": jnp.int32(step), "params": nnx.State({"w": nnx.Param(jnp.arange(6.0).reshape(2, 3) * step)}),
          "opt_state": (jnp.ones(3) * step,)}


def target():
  mesh = sharding.make_mesh()
  state = make_state(0)
  return checkpoint.abstract_like(state, sharding.state_shardings(state, mesh))


@pytest.fixture
def saved(tmp_path):
  ckpt = checkpoint.Checkpointer(str(tmp_path), keep=2)
  for step in (1, 2, 3):
    ckpt.save(step, make_state(step), {"position": step})
  ckpt.wait()
  return str(tmp_path), ckpt


def test_keep_and_restore(saved):
  workdir, ckpt = saved
  assert ckpt.all_steps() == [2, 3] and ckpt.latest_step() == 3
  step, state, data_state = ckpt.restore(target())
  assert step == 3 and data_state == {"position": 3} and int(state["step"]) == 3
  np.testing.assert_array_equal(state["params"]["w"][...], np.arange(6.0).reshape(2, 3) * 3)
  assert state["params"]["w"][...].sharding.is_fully_replicated
  step, state, _ = ckpt.restore(target(), step=2)
  assert step == 2 and float(state["opt_state"][0][0]) == 2.0
  with pytest.raises(checkpoint.CheckpointError, match=r"no checkpoint for step 1 .*available steps: 2, 3"):
    ckpt.restore(target(), step=1)
  ckpt.close()


# orbax's parallel reads of the other arrays of a corrupt checkpoint fail after the first error, in the background.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_corrupt_latest_falls_back_with_warning(saved, caplog):
  workdir, ckpt = saved
  for f in glob.glob(os.path.join(workdir, "checkpoints", "3", "state", "**", "d", "*"), recursive=True):
    open(f, "w").close()  # truncate the array data
  with pytest.raises(checkpoint.CheckpointError, match=r"step 3 is damaged: .*checkpoints/3/state/.* has 0 bytes"):
    ckpt.restore(target(), step=3)
  with caplog.at_level("WARNING"):
    step, _, data_state = ckpt.restore(target(), quarantine=True)
  assert step == 2 and data_state == {"position": 2}
  assert "step 3 is damaged" in caplog.text and "restored the older checkpoint of step 2" in caplog.text
  assert ckpt.all_steps() == [2] and os.path.isdir(os.path.join(workdir, "checkpoints", "3.corrupt"))
  ckpt.save(3, make_state(3), {})  # the step can be written again
  ckpt.close()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_without_manifest_orbax_errors_still_fall_back(saved, caplog):
  """A step saved before manifests existed restores unverified (warning); orbax's own read error still counts."""
  workdir, ckpt = saved
  os.remove(os.path.join(workdir, "checkpoints", "2", "manifest.json"))
  with caplog.at_level("WARNING"):
    assert ckpt.restore(target(), step=2)[0] == 2
  assert "checkpoints/2 has no integrity manifest" in caplog.text
  os.remove(os.path.join(workdir, "checkpoints", "3", "manifest.json"))
  for f in glob.glob(os.path.join(workdir, "checkpoints", "3", "state", "**", "d", "*"), recursive=True):
    open(f, "w").close()
  with pytest.raises(checkpoint.CheckpointError, match=r"checkpoints/3 is unreadable \(it has no manifest to check its files\): \w+: [^<]*$"):
    ckpt.restore(target(), step=3)
  assert ckpt.restore(target())[0] == 2
  ckpt.close()


def test_a_flipped_bit_is_detected(saved):
  """One bit anywhere in any file of the step (here: the middle of each data file in turn)."""
  workdir, ckpt = saved
  step_dir = os.path.join(workdir, "checkpoints", "3")
  files = [f for f in glob.glob(os.path.join(step_dir, "**", "*"), recursive=True)
           if os.path.isfile(f) and not f.endswith("manifest.json")]
  assert len(files) > 5
  for f in files:
    data = bytearray(open(f, "rb").read())
    if not data:
      continue
    data[len(data) // 2] ^= 0x04
    open(f, "wb").write(bytes(data))
    with pytest.raises(checkpoint.CheckpointError, match="step 3 is damaged: .* does not match its sha256"):
      ckpt.restore(target(), step=3)
    data[len(data) // 2] ^= 0x04
    open(f, "wb").write(bytes(data))
  assert ckpt.restore(target(), step=3)[0] == 3  # restored: intact again
  ckpt.close()


def test_all_corrupt_or_missing(saved, tmp_path):
  workdir, ckpt = saved
  for step in (2, 3):
    shutil.rmtree(os.path.join(workdir, "checkpoints", str(step), "state"))
  with pytest.raises(checkpoint.CheckpointError, match="no readable checkpoint in .*tried 2.*\n  .*step 3 is damaged"
                     ".*missing\n  .*step 2 is damaged"):
    ckpt.restore(target())
  # Nothing restores: nothing is quarantined, so rerunning training cannot start a fresh model there.
  with pytest.raises(checkpoint.CheckpointError, match="no readable checkpoint in"):
    ckpt.restore(target(), quarantine=True)
  assert ckpt.all_steps() == [2, 3] and not glob.glob(os.path.join(workdir, "checkpoints", "*.corrupt"))
  ckpt.close()
  with pytest.raises(checkpoint.CheckpointError, match="no checkpoints in"):
    checkpoint.Checkpointer(str(tmp_path / "empty"), read_only=True)
  with pytest.raises(checkpoint.CheckpointError, match="no checkpoints in"):
    checkpoint.Checkpointer(str(tmp_path / "empty2")).restore(target())


def test_a_renamed_folder_is_damaged_not_that_step(saved, caplog):
  """checkpoints/3 renamed to 5: not restored as step 5 (the state's own step is 3); the trainer's restore falls
  back to step 2 and moves 5 aside."""
  workdir, ckpt = saved
  os.rename(os.path.join(workdir, "checkpoints", "3"), os.path.join(workdir, "checkpoints", "5"))
  ckpt.reload()
  with pytest.raises(checkpoint.CheckpointError, match=r"step 5 is damaged: .*checkpoints/5 holds the state of "
                     r"step 3, not 5 \(the folder was renamed or copied\)"):
    ckpt.restore(target(), step=5)
  with caplog.at_level("WARNING"):
    assert ckpt.restore(target(), quarantine=True)[0] == 2
  assert ckpt.all_steps() == [2] and os.path.isdir(os.path.join(workdir, "checkpoints", "5.corrupt"))
  ckpt.close()


def test_the_manifest_is_written_before_the_commit(tmp_path, monkeypatch):
  """Every committed step has its manifest: it is written into orbax's temporary folder, before the rename that
  makes the step visible (so a kill at any moment leaves either no step or a step with its manifest)."""
  from linear_seq import integrity  # pylint: disable=g-import-not-at-top
  real, seen = integrity.write_manifest, []
  def recording(step_dir):
    seen.append((os.path.basename(step_dir), os.path.exists(os.path.join(str(tmp_path), "checkpoints", "1"))))
    return real(step_dir)
  monkeypatch.setattr(integrity, "write_manifest", recording)
  ckpt = checkpoint.Checkpointer(str(tmp_path), keep=2)
  ckpt.save(1, make_state(1), {"position": 1})
  ckpt.wait()
  assert len(seen) == 1 and seen[0][0].startswith("1.orbax-checkpoint-tmp") and seen[0][1] is False, seen
  assert integrity.verify_manifest(os.path.join(str(tmp_path), "checkpoints", "1"))
  assert open(tmp_path / "checkpointed.json").read().strip() == '{"step": 1}'
  assert ckpt.restore(target())[0] == 1
  ckpt.close()


def test_a_failed_background_commit_is_one_error_naming_the_step_and_the_free_space(tmp_path, monkeypatch):
  """ENOSPC while step 2 commits: check() (polled by the trainer every step) raises it, naming step 2, its path
  and the free space; step 1 is kept; closing does not raise it again."""
  import errno  # pylint: disable=g-import-not-at-top
  import time  # pylint: disable=g-import-not-at-top
  from linear_seq import integrity  # pylint: disable=g-import-not-at-top
  ckpt = checkpoint.Checkpointer(str(tmp_path), keep=3)
  ckpt.save(1, make_state(1), {})
  ckpt.wait()
  real = integrity.write_manifest
  def full(step_dir):
    if "/2.orbax-checkpoint-tmp" in step_dir:
      raise OSError(errno.ENOSPC, "No space left on device", step_dir)
    return real(step_dir)
  monkeypatch.setattr(integrity, "write_manifest", full)
  ckpt.save(2, make_state(2), {})
  with pytest.raises(checkpoint.CheckpointError, match=r"^saving the checkpoint of step 2 to .*checkpoints/2 failed: "
                     r"no space left on device \([\d.]+ \w+ free there\); the previous checkpoint \(step 1\) is kept"):
    for _ in range(600):
      ckpt.check()
      time.sleep(0.05)
  ckpt.close()
  assert ckpt.all_steps() == [1]


def test_unknown_extra_files_are_not_damage(saved):
  """.DS_Store, .nfs* and the like in an intact step: it restores (the manifest's files are what is verified)."""
  workdir, ckpt = saved
  step_dir = os.path.join(workdir, "checkpoints", "3")
  for name in (".DS_Store", os.path.join("state", ".nfs000000000123abcd"), os.path.join("state", "d", "._x")):
    with open(os.path.join(step_dir, name), "w") as f:
      f.write("junk")
  assert ckpt.restore(target(), step=3, quarantine=True)[0] == 3
  assert ckpt.all_steps() == [2, 3]
  ckpt.close()


def test_a_checkpoint_rotated_away_while_read_is_retried_on_the_newest_not_called_corrupt(saved, caplog):
  """A reader (evaluate, linear_seq.load) while a trainer saves with keep=2: the step being read vanishes.
  The latest is retried on the newest one; an explicit step says it was removed; neither says corrupt/damaged."""
  workdir, writer = saved  # keep=2: steps 2, 3
  reader = checkpoint.Checkpointer(workdir, read_only=True)
  real, next_step = reader._manager.restore, [4]  # pylint: disable=protected-access
  def rotating_restore(*args, **kwargs):  # the trainer saves two more steps while the reader reads
    for _ in range(2):
      writer.save(next_step[0], make_state(next_step[0]), {"position": next_step[0]})
      next_step[0] += 1
    writer.wait()
    reader._manager.restore = real  # pylint: disable=protected-access
    return real(*args, **kwargs)
  reader._manager.restore = rotating_restore  # pylint: disable=protected-access
  with caplog.at_level("WARNING"):
    step, state, data_state = reader.restore(target(), fallback=False)
  assert step == 5 and data_state == {"position": 5} and int(state["step"]) == 5
  assert "checkpoints/3 was removed while it was read" in caplog.text and "reading the newest, step 5" in caplog.text
  assert "corrupt" not in caplog.text and "damaged" not in caplog.text
  reader.reload()
  reader._manager.restore = rotating_restore  # pylint: disable=protected-access
  with pytest.raises(checkpoint.CheckpointError, match=r"checkpoints/4 was removed while it was read \(a trainer "
                     r"running in this workdir keeps only its newest checkpoints\); available now: 6, 7"):
    reader.restore(target(), step=4)
  reader.close()
  writer.close()
