"""Data parallelism moves no activations: the compiled train step of every mixer on 4 fake CPU devices with the
batch sharded holds no all-gather, all-to-all or collective-permute, and every all-reduce's operand is
parameter-shaped or scalar (the gradient and loss reductions).

T = 1,100 so that the chunk forms' rematerialized groups (512 / 256 tokens) run; with and without packed
documents (segment_ids); GLA's vector and scalar gates, the delta rule's three gates. Compile only (nothing
runs), in one subprocess (XLA_FLAGS must be set before jax starts).
"""
import json
import subprocess
import sys
import textwrap

from tests import helpers

CASES = {
    "softmax": {"model.mixer": "softmax"},
    "linear": {"model.mixer": "linear"},
    "retention": {"model.mixer": "retention"},
    "gla-vector": {"model.mixer": "gla"},
    "gla-scalar": {"model.mixer": "gla", "model.vector_gate": False},
    "s4": {"model.mixer": "s4"},
    "deltanet": {"model.mixer": "deltanet", "model.conv_width": 0},
    "deltanet-scalar": {"model.mixer": "deltanet", "model.conv_width": 0, "model.delta_gate": "scalar"},
    "deltanet-channel": {"model.mixer": "deltanet", "model.conv_width": 0, "model.delta_gate": "channel"},
    "deltaproduct": {"model.mixer": "deltaproduct", "model.conv_width": 0},
    "mamba2": {"model.mixer": "mamba2", "model.conv_width": 0},
}

SCRIPT = textwrap.dedent("""
    import json, re, sys
    import jax, numpy as np
    from linear_seq import config_lib, sharding, steps
    from tests.helpers import DEFAULT_CONFIG
    assert jax.device_count() == 4, jax.devices()
    cases = json.loads(sys.argv[1])
    B, T, VOCAB = 4, 1100, 258
    COLLECTIVE = re.compile(r"= (\\S+) (all-gather|all-to-all|collective-permute|all-reduce|reduce-scatter)"
                            r"(?:-start)?\\(")
    out = {}
    mesh = sharding.make_mesh(jax.devices())
    for name, overrides in cases.items():
      config = config_lib.apply_overrides(config_lib.load_config(DEFAULT_CONFIG + ":tiny=True"), {
          **overrides, "model.num_layers": 1, "data.seq_len": T, "data.batch_size": B})
      static, abstract, shardings = steps.setup(config, VOCAB, mesh)
      state = jax.tree.map(lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), abstract, shardings)
      params = {tuple(a.shape) for a in jax.tree.leaves(abstract)}
      spec = sharding.batch_sharding(mesh)
      for packed in (False, True):
        keys = [("inputs", np.int32), ("targets", np.int32), ("weights", np.float32)]
        keys += [("segment_ids", np.int32)] if packed else []
        batch = {k: jax.ShapeDtypeStruct((B, T), dt, sharding=spec) for k, dt in keys}
        with jax.set_mesh(mesh):
          hlo = static.train_step.lower(state, batch).compile().as_text()
        bad = []
        for shape, op in COLLECTIVE.findall(hlo):
          dims = [tuple(int(d) for d in m.split(",") if d) for m in re.findall(r"\\[([\\d,]*)\\]", shape)]
          if op != "all-reduce" or not all(d == () or d in params for d in dims):
            bad.append(f"{op} {shape}")
        out[f"{name}{'-packed' if packed else ''}"] = bad
    print(json.dumps(out))
""")


def test_data_parallel_train_step_moves_no_activations():
  proc = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(CASES)], env=helpers.fake_devices_env(4),
                        cwd=helpers.REPO, capture_output=True, text=True, timeout=900, check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  result = json.loads(proc.stdout.strip().splitlines()[-1])
  assert set(result) == {f"{n}{p}" for n in CASES for p in ("", "-packed")}
  offending = {case: ops for case, ops in result.items() if ops}
  assert not offending, f"activation collectives under data parallelism: {offending}"
