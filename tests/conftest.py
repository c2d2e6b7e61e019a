"""Test-wide JAX settings: exact matmuls (no TF32 on GPUs), a persistent compilation cache, and LLVM at -O0.

The suite compiles hundreds of small programs and runs each a few times, so compile time is most of its time:
XLA_FLAGS gets FAST_COMPILE_XLA_FLAG (tests/helpers.py) before the backend starts (XLA reads the flags then,
not at import), and CLI subprocesses inherit it through the environment. Measured on test_delta.py +
test_mixers.py with a cold cache: 357 s -> 171 s on one core, the same tests passing.
"""
import os

from tests.helpers import FAST_COMPILE_XLA_FLAG

# pytest-xdist workers share an accelerator when there is one: none preallocates 75% of its memory.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
if FAST_COMPILE_XLA_FLAG not in os.environ.get("XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = " ".join(filter(None, [os.environ.get("XLA_FLAGS", ""), FAST_COMPILE_XLA_FLAG]))

import jax  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_default_matmul_precision", "highest")
jax.config.update("jax_compilation_cache_dir",
                  os.environ.get("JAX_CACHE_DIR", os.path.join(os.path.dirname(__file__), "..", ".jax_cache")))
# Every program is cached, the tiny ones too: an op called outside jit compiles each of its primitives on its own
# (~0.05-0.1 s apiece), which a cache read replaces. Measured on the fast tier of test_ssm, test_signed_decay,
# test_resets and test_precision, warm cache, one process, load average ~7: 203 s -> 56 s of pytest. CLI
# subprocesses keep 0.5 (cli_env): their time is imports.
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


# The test tiers. `scripts/test.sh` (and CI) runs every test; `scripts/test.sh --fast` (pytest -m "not slow")
# skips the tests marked `slow`: minutes of CPU that an edit loop should not wait for — 2-process runs,
# subprocesses with fake-device meshes, fault injection with real kills, end-to-end CLI runs and sweeps,
# float64 and extreme-input sweeps over every case of an op form. The fast tier keeps at least one case per op
# form, per mixer, per data source and per CLI entry point. Slow tests are marked here, in one place (or with
# @pytest.mark.slow in the test file); a new test lands in the fast tier unless its file or test is listed in
# SLOW, and a new case of a sweep in SWEEPS lands in the slow tier. tests/test_tiers.py checks these lists.

# Node-id prefixes (a file, or file::test) whose tests are all slow.
SLOW = (
    "tests/ops/test_seq_parallel.py",  # every case in one 4-fake-device subprocess
    "tests/test_multiprocess.py",  # 2 processes × 2 fake devices
    "tests/test_seq_parallel_train.py",  # fake-device meshes in a subprocess
    "tests/test_faults.py",  # SIGKILLs, damaged checkpoints, interrupted runs
    "tests/test_sharding.py::test_four_devices_match_one_and_restore_across_device_counts",
    "tests/test_plugins.py::test_cli_trains_with_a_plugin_mixer_dataset_and_tokenizer",
    "tests/test_finetune.py::test_command_line_error",  # a `linear_seq.main` subprocess (the in-process cases stay fast)
    "tests/studies/test_sweep.py::test_sweep_runs_both_points_and_writes_report",  # the 2-point sweep CLI run
    "tests/studies/test_sweep.py::test_interrupted_point_resumes_from_its_checkpoint",
    "tests/studies/test_sweep.py::test_rerun_skips_finished_points",
    "tests/studies/test_sweep.py::test_a_fresh_workdir_continues_from_the_archive",
    "tests/studies/test_bench.py::test_tiny_run_prints_table_and_ratios",
    "tests/studies/test_speed.py::test_tiny_run_writes_table_and_plots",
    "tests/studies/test_speed.py::test_tiny_run_of_the_mixers_with_their_own_short_conv",
    "tests/experiments/test_configs.py::test_lm_study_tiny_sweep_end_to_end",
    "tests/experiments/test_example_study.py::test_the_example_runs_in_tiny_mode",  # a 2-point sweep CLI run
    "tests/experiments/test_state_tracking_study.py::test_the_study_runs_in_tiny_mode",  # a 2-point sweep CLI run
    # the full sweeps with the most points (each point's model is built): the tiny sweeps stay fast
    "tests/experiments/test_configs.py::test_full_sweep_points_are_valid[hybrids:task=mqar]",
    "tests/experiments/test_configs.py::test_full_sweep_points_are_valid[hybrids:task=lm]",
    "tests/experiments/test_configs.py::test_full_sweep_points_are_valid[lm:]",
    "tests/experiments/test_configs.py::test_full_sweep_points_are_valid[mqar/ablation:]",
    "tests/experiments/test_sweep_points.py::test_points_are_unchanged[experiments/hybrids/config.py:task=mqar]",
    "tests/experiments/test_sweep_points.py::test_points_are_unchanged[experiments/hybrids/config.py:task=lm]",
    "tests/experiments/test_lm_table.py::test_tables_from_a_sweep_directory",
    # equivalences of whole models and runs beyond the one case per feature kept fast
    "tests/test_model.py::test_layer_mixers_listing_one_mixer_is_the_same_model",
    "tests/test_model.py::test_delta_hybrid_generate_equals_full_forwards_and_labels",
    "tests/test_loss_positions.py::test_terms_and_gradients_match_the_head_at_every_position",
    "tests/test_train.py::test_random_features_are_checkpointed_and_redrawn_in_bfloat16",
    "tests/ops/test_linear_attention.py::test_bfloat16_in_bfloat16_out",
    "tests/ops/test_ssm.py::test_channels_long_sequence_and_gradients",
    "tests/ops/test_recurrence.py::test_float64_recurrent_gradients_check_numerically",
    "tests/ops/test_delta.py::test_float64_recurrent_gradients_check_numerically",
    "tests/ops/test_delta.py::test_grouped_chunk_matches_reference",
    "tests/ops/test_linear_attention.py::test_prefill_then_continue_normalized_state",
    "tests/ops/test_linear_attention.py::test_exp_stabilization_is_exact_and_survives_extreme_inputs",
    "tests/ops/test_linear_attention.py::test_reset_restarts_documents_and_the_key_stabilizer",
    "tests/ops/test_linear_attention.py::test_constant_decay_normalized_equals_decay_without_one_minus_a",
    "tests/ops/test_discretize.py::test_tiny_dt_lambda_is_exact_in_value_and_gradient",
    "tests/ops/test_discretize.py::test_per_state_dt_and_batched_diagonal",
    "tests/ops/test_discretize.py::test_phi1_accurate_across_its_branches",
    # subprocesses and whole-program compiles for other platforms and meshes
    "tests/test_docs.py::test_every_readme_command_runs",  # one --dry_run subprocess per README command
    "tests/test_docs.py::test_a_broken_command_fails",
    "tests/test_data_parallel_collectives.py",  # 22 compiled train steps on a 4-fake-device mesh
    "tests/test_accel_check.py",  # the accelerator check's tiny mode, end to end
    # the heaviest of the merged features' tests beyond one case each (measured with --durations, warm cache)
    "tests/test_api.py::test_profile_trace_files_appear",
    "tests/ops/test_signed_decay.py::test_wrappers_with_signs_match_reference",
    "tests/experiments/test_sweep_points.py::test_points_are_unchanged[experiments/hybrids/config.py:task=mqar,edge=False]",
    "tests/experiments/test_sweep_points.py::test_points_are_unchanged[experiments/lm/config.py:]",
    "tests/test_grad_accum.py::test_micro_batches_give_the_one_pass_step",
    "tests/mixers/test_attention_impl.py::test_lm_paths_agree",
    "tests/mixers/test_parity.py::test_one_conv_over_the_concatenation_is_one_conv_per_projection",
    "tests/studies/test_bench.py::test_bfloat16_inputs_and_shape_flags",
)

# Parametrized sweeps: node-id prefix -> the case ids kept in the fast tier (every other case there is slow).
SWEEPS = {
    # layer parity: one reference in the fast tier (all six in the full suite)
    "tests/mixers/test_parity.py::test_mixer_matches_reference": ("llama_gqa",),
    "tests/mixers/test_parity.py::test_default_convention_breaks_parity": ("llama_mha_theta",),
    # cross-platform lowering: one op form in each dtype, one mixer's training step
    "tests/test_export.py::test_op_forms_export_for_gpu_and_tpu": (
        "delta-chunk-channel-float32", "attention-xla-bfloat16"),
    "tests/test_export.py::test_training_step_of_every_mixer_exports": ("gla-float32",),
    "tests/test_state_tracking.py::test_tiny_config_trains_and_reports_each_length": ("parity",),
    # every mode of linear_recurrence / delta_rule in each case: one case with gates, resets and all modes
    "tests/ops/test_recurrence.py::test_modes_match_reference": ("7-24-20-64-scalar-strong-True-False",),
    "tests/ops/test_recurrence.py::test_prefill_then_continue_equals_one_pass": ("chunk",),
    "tests/ops/test_delta.py::test_modes_match_reference": ("7-24-20-3-scalar-strong-True-False-high",),
    "tests/ops/test_delta.py::test_prefill_then_continue_equals_one_pass": ("recurrent",),
    "tests/ops/test_delta.py::test_overwrite_property": ("recurrent",),
    "tests/ops/test_delta.py::test_chunk_form_is_exact_in_float64": ("scalar-mixed",),
    "tests/ops/test_chunk.py::test_grouped_chunk_matches_reference": ("75-16-16-3-None-None-False-True",),
    # one case per mode: chunk, recurrent, assoc, parallel
    "tests/ops/test_linear_attention.py::test_linear_attention_matches_reference": (
        "elu1-True-None-chunk-8-False-20", "identity-False-H-recurrent-64-False-1",
        "relu-False-None-assoc-64-True-7", "elu1-False-BTH-parallel-64-False-11"),
    "tests/ops/test_linear_attention.py::test_gla_matches_reference": ("True-chunk",),
    "tests/ops/test_attention.py::test_matches_reference": (
        "False-4-13-None-pair-True", "False-13-13-0.3-None-True", "True-13-13-None-single-False"),
    "tests/ops/test_feature_maps.py::test_random_features_converge_to_their_kernel": ("rbf-False",),
    "tests/ops/test_discretize.py::test_complex_diagonal_matches_dense_and_reference": ("bilinear",),
    "tests/ops/test_discretize.py::test_gradients_diagonal_path_match_dense_path": ("zoh",),
    # every SSM mode in each case: a dense and a diagonal system
    "tests/ops/test_ssm.py::test_modes_match_float64_loop": ("dense-7-False", "diag-100-True"),
    "tests/ops/test_ssm.py::test_gradients_agree_across_modes": ("diag-100-modes0",),
    "tests/ops/test_resets.py::test_ssm_diag_channels_reset_equals_separate_documents": ("assoc", "chunk"),
    "tests/ops/test_recurrence.py::test_bfloat16_inputs": ("chunk",),
    "tests/ops/test_ssm.py::test_channels_chunk_form_matches_scan_with_resets": (
        "complex-37-8-True-True", "real-16-16-True-False"),
    "tests/studies/test_sweep.py::test_bad_global_override_fails_before_any_point": (  # a sweep CLI subprocess each
        "--parallel=0-error: --parallel must be >= 1, got 0",),
    # one case per mixer (all five tests of test_mixers.py run on each kept case)
    "tests/mixers/test_mixers.py": ("softmax-rope", "linear-elu1-qkvconv", "retention-rope", "gla-vector",
                                    "s4-lin-zoh", "deltanet", "mamba2", "deltaproduct-3steps-2sigmoid"),
    "tests/mixers/test_delta_mamba.py": ("deltanet", "mamba2"),
}


def pytest_configure(config):
  config.addinivalue_line("markers", "slow: minutes of CPU; scripts/test.sh --fast (-m 'not slow') skips it "
                                     "(tests/conftest.py lists the slow tests)")


def is_slow(nodeid: str, case_id: str | None) -> bool:
  """Whether a test (its node id, and its parametrization id or None) is in the slow tier by SLOW / SWEEPS."""
  if any(nodeid == p or nodeid.startswith(p + "::") or nodeid.startswith(p + "[") for p in SLOW):
    return True
  return case_id is not None and any(
      (nodeid.startswith(p + "::") or nodeid.startswith(p + "[")) and case_id not in kept
      for p, kept in SWEEPS.items())


def pytest_collection_modifyitems(config, items):
  """Marks the slow tests; when whole files were collected, a case id in SWEEPS that no longer exists (a renamed
  case would silently move a form's only fast case to the slow tier) is a usage error."""
  cases = {}
  for item in items:
    callspec = getattr(item, "callspec", None)
    if is_slow(item.nodeid, callspec.id if callspec else None):
      item.add_marker("slow")
    for prefix in SWEEPS:
      if callspec is not None and (item.nodeid.startswith(prefix + "::") or item.nodeid.startswith(prefix + "[")):
        cases.setdefault(prefix, set()).add(callspec.id)
  if any("::" in str(a) for a in config.args):
    return
  for prefix, found in cases.items():
    missing = sorted(set(SWEEPS[prefix]) - found)
    if missing:
      raise pytest.UsageError(f"tests/conftest.py SWEEPS[{prefix!r}] keeps cases that do not exist: "
                              f"{', '.join(missing)}; the cases are: {', '.join(sorted(found))}")
