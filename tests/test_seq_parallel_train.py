"""Long-context training on the 'seq' mesh axis equals one device (4 fake CPU devices, in a subprocess).

For the linear, retention, gla, deltanet (scalar gate) and mamba2 mixers (tiny config, one layer): the loss and
every gradient on the data=1 × seq=4 and data=2 × seq=2 meshes equal the 1-device values (relative RMS ≤ 1e-5)
on packed rows whose document boundaries fall inside a shard and at a shard's first token; greedy decoding after
a sequence-parallel prefill equals the 1-device prefill + decode (each mixer on one of the two meshes, each mesh
for some mixers: DECODE); a short train_and_evaluate with mesh.seq=4 gives the 1-device losses (it also checks
that fresh parameters are the same on any mesh, so the equality cases above initialize once, on one device, and
reshard); gradient accumulation (train.grad_accum_steps=2, gla) gives the one-pass loss and gradients on both
meshes (relative 1e-6); bad meshes (T not splitting, S4 with seq > 1) fail with one clear line.
"""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from linear_seq import config_lib
from linear_seq import metrics
from linear_seq import train
from linear_seq import validation
from tests import helpers

ROOT = os.path.join(os.path.dirname(__file__), "..")
TOL = 1e-5        # loss (relative)
GRAD_TOL = 2e-5   # gradients (relative RMS per leaf; the repo's float32 gradient tolerance)
ACCUM_TOL = 1e-6  # train.grad_accum_steps=2 vs one pass on the same mesh: loss and gradients (relative)
# mamba2's smallest gradient leaves (dt_bias, A_log: sums over Δ·x with cancellation) measured 1.5e-5 and
# 2.0e-5 per leaf on seq=4 and 2×2 (float32 rounding of the per-shard sums); its loss agrees to 1e-7.
GRAD_TOL_MIXER = {"mamba2": 5e-5}
# The mesh each mixer decodes on after a sequence-parallel prefill (a covering subset: every mixer, both meshes).
DECODE = {"linear": "seq4", "retention": "data2seq2", "gla": "seq4", "deltanet": "data2seq2", "mamba2": "seq4"}

SCRIPT = textwrap.dedent("""
    import json, os, sys
    import jax, jax.numpy as jnp, numpy as np
    jax.config.update("jax_default_matmul_precision", "highest")
    jax.config.update("jax_compilation_cache_dir", os.environ["JAX_CACHE_DIR"])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    from linear_seq import config_lib, metrics, model, sharding, steps, train
    from tests.helpers import rel_rms
    assert jax.device_count() == 4, jax.devices()
    default = config_lib.load_sibling(os.path.join(os.getcwd(), "configs", "default.py"), "default")
    B, T = 4, 32
    rng = np.random.default_rng(0)
    inputs = rng.integers(0, 256, (B, T)).astype(np.int32)
    seg = np.ones((B, T), np.int32)
    seg[0, 8:], seg[1, 13:], seg[1, 24:], seg[2, 16:], seg[3, 5:] = 2, 2, 3, 2, 2   # shard starts and insides
    batch = {"inputs": inputs, "targets": np.roll(inputs, -1, 1), "weights": np.ones((B, T), np.float32),
             "segment_ids": seg}
    result = {}
    decode = json.loads(os.environ["DECODE"])
    for mixer in os.environ.get("MIXERS", "linear,retention,gla,deltanet,mamba2").split(","):
      config = default.get_config(f"mixer={mixer},tiny=True")
      config.model.num_layers = 1   # one mixer layer holds every sequence-parallel step; a second only repeats it
      if mixer == "deltanet":
        config.model.delta_gate = "scalar"   # Gated DeltaNet: resets enter its K×K transition products
      grads, fresh, accum = {}, None, {}
      for name, mesh in (("one", sharding.make_mesh(jax.devices()[:1])), ("seq4", sharding.make_mesh(seq=4)),
                         ("data2seq2", sharding.make_mesh(data=2, seq=2))):
        static, _, shardings = steps.setup(config, 258, mesh)
        if fresh is None:
          fresh = state = steps.init_state(config, 258, static, shardings)
        else:   # the same parameters, resharded (init on any mesh is checked by the trainer run below)
          state = jax.device_put(fresh, shardings)
        with jax.set_mesh(mesh):
          f = jax.jit(jax.value_and_grad(steps._loss, has_aux=True), static_argnums=3)
          (loss, _), g = f(state["params"], state["rest"], sharding.global_batch(batch, mesh), static.graphdef)
          if mixer == "gla" and name != "one":   # grad_accum_steps=2: micro-batches of 2 rows (1 per data shard on 2x2)
            fa = jax.jit(steps.loss_and_grads, static_argnums=(3, 4, 5))
            la, ga = fa(state["params"], state["rest"], sharding.global_batch(batch, mesh), static.graphdef, 0, 2)
            accum[name] = (float(la), jax.tree.leaves(jax.device_get(ga)), float(loss),
                           jax.tree.leaves(jax.device_get(g)))
          tokens = None
          if name in ("one", decode[mixer]):
            tokens = np.asarray(model.generate(steps.merge(static, state), inputs[:, :16], 6, temperature=0.0))
        grads[name] = (float(loss), jax.tree.leaves(jax.device_get(g)), tokens)
        print(mixer, name, float(loss), file=sys.stderr, flush=True)
      one = grads.pop("one")
      for name, (loss, g, loss1, g1) in accum.items():   # vs one pass on the same mesh, and vs one device
        result[f"{mixer}-{name}-accum2"] = {"loss": abs(loss - loss1) / abs(loss1),
                                             "grads": max(rel_rms(a, b) for a, b in zip(g, g1)),
                                             "grads_vs_one_device": max(rel_rms(a, b) for a, b in zip(g, one[1]))}
      for name, (loss, g, tokens) in grads.items():
        result[f"{mixer}-{name}"] = {"loss": abs(loss - one[0]) / abs(one[0]),
                                     "grads": max(rel_rms(a, b) for a, b in zip(g, one[1]))}
        if tokens is not None:
          result[f"{mixer}-{name}"]["decode_equal"] = bool(np.array_equal(tokens, one[2]))
    print(json.dumps(result), file=sys.stderr, flush=True)
    if len(sys.argv) < 2:
      sys.exit()
    # The trainer with mesh.seq=4 (packed Shakespeare rows) against the 1-device run given in argv.
    one_workdir, out = sys.argv[1], sys.argv[2]
    config = config_lib.apply_overrides(config_lib.load_config(one_workdir), {"mesh.seq": 4})
    train.train_and_evaluate(config, out)
    result["train_losses"] = [r["train_loss"] for r in metrics.read_metrics(out) if "train_loss" in r]
    errors = {}
    for key, overrides in (("seq_len", {"data.seq_len": 30}), ("s4", {"model.mixer": "s4"}),
                           ("mesh", {"mesh.data": 3})):
      try:
        train.make_mesh(config_lib.apply_overrides(config, overrides))
      except ValueError as e:
        errors[key] = str(e)
    result["errors"] = errors
    print(json.dumps(result))
""")


def test_seq_mesh_matches_one_device(tmp_path):
  one = str(tmp_path / "one")
  config = config_lib.load_sibling(os.path.join(ROOT, "configs", "default.py"), "default").get_config("tiny=True")
  config = config_lib.apply_overrides(config, {"train.log_every": 1, "train.num_steps": 3, "eval.max_batches": 1,
                                               "eval.batch_size": 8, "model.num_layers": 1})
  train.train_and_evaluate(config, one)
  env = {**helpers.fake_devices_env(4), "DECODE": json.dumps(DECODE)}
  proc = subprocess.run([sys.executable, "-c", SCRIPT, one, str(tmp_path / "seq4")], env=env, cwd=ROOT,
                        capture_output=True, text=True, timeout=1800)
  assert proc.returncode == 0, proc.stderr[-3000:]
  result = json.loads(proc.stdout.strip().splitlines()[-1])
  for mixer in ("linear", "retention", "gla", "deltanet", "mamba2"):
    for mesh in ("seq4", "data2seq2"):
      r = result[f"{mixer}-{mesh}"]
      assert r["loss"] <= TOL and r["grads"] <= GRAD_TOL_MIXER.get(mixer, GRAD_TOL), (mixer, mesh, r)
      if mesh == DECODE[mixer]:
        assert r["decode_equal"], (mixer, mesh, r)
  for mesh in ("seq4", "data2seq2"):   # gradient accumulation (2 micro-batches; one device: test_grad_accum)
    r = result[f"gla-{mesh}-accum2"]
    assert r["loss"] <= ACCUM_TOL and r["grads"] <= ACCUM_TOL and r["grads_vs_one_device"] <= GRAD_TOL, (mesh, r)
  losses = [r["train_loss"] for r in metrics.read_metrics(one) if "train_loss" in r]
  assert len(losses) == 3
  np.testing.assert_allclose(result["train_losses"], losses, rtol=TOL)
  errors = result["errors"]
  assert "data.seq_len=30 must be a multiple of mesh.seq=4" in errors["seq_len"]
  assert "s4" in errors["s4"] and "mesh.seq=4" in errors["s4"]
  assert "mesh.data=3 × mesh.seq=4 must equal the device count 4" in errors["mesh"]


def test_mesh_errors_one_device():
  config = config_lib.load_sibling(os.path.join(ROOT, "configs", "default.py"), "default").get_config("tiny=True")
  with pytest.raises(validation.ConfigError, match=r"mesh.data=0 × mesh.seq=4 must equal the device count 1"):
    train.make_mesh(config_lib.apply_overrides(config, {"mesh.seq": 4}))


# The memory budget (train.memory_budget_mib -> tuning's memory_budget, ops/group_budget.py) under sequence
# parallelism: a chunk form inside `jax.shard_map` chooses its group at its shard's shapes (the budget is per
# device) by compiling itself there. Ops: the linear chunk form and the delta rule on the seq=4 mesh (T = 1024,
# 256 a shard), with a budget equal to the fwd+bwd memory of groups of 64 at the shapes the form is traced with
# inside the shard (measured first): the choice is the largest group that fits, values and gradients equal the
# unsharded op's; the model: deltanet (one layer) on seq=4 with train.memory_budget_mib=1 applied as
# train_and_evaluate does (platform.apply): loss and gradients equal one device's, each choice made at the shard's
# T and equal to the chooser's outside any mesh.
BUDGET_SCRIPT = textwrap.dedent("""
    import json, os
    import jax, jax.numpy as jnp, numpy as np
    from jax.sharding import Mesh, PartitionSpec as P
    jax.config.update("jax_default_matmul_precision", "highest")
    jax.config.update("jax_compilation_cache_dir", os.environ["JAX_CACHE_DIR"])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    from linear_seq import config_lib, ops, platform, sharding, steps
    from linear_seq.ops import group_budget, tuning
    from tests.helpers import rel_rms
    assert jax.device_count() == 4, jax.devices()
    calls, choose = [], group_budget.group_tokens

    def spy(op, field, args, C, operand_dtype=None):
      # records each choice under a budget (the form, its shapes, the group), not the measurements' own traces
      # of the form (their tuning has no budget)
      budgeted = tuning.current().memory_budget is not None
      group = choose(op, field, args, C, operand_dtype)
      if budgeted:
        shapes = tuple(None if a is None else jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args)
        calls.append(dict(op=op, field=field, shapes=shapes, C=C, group=group))
      return group

    group_budget.group_tokens = spy
    result = {}
    B, T, H, K, V, C = 1, 1024, 2, 16, 12, 16
    rng = np.random.default_rng(0)
    q, k = (jnp.asarray(rng.normal(size=(B, T, H, K)), jnp.float32) for _ in range(2))
    k = k / jnp.linalg.norm(k, axis=-1, keepdims=True)
    v = jnp.asarray(rng.normal(size=(B, T, H, V)), jnp.float32)
    g = jnp.asarray(-rng.uniform(0.01, 0.1, size=(B, T, H)), jnp.float32).at[:, [300, 511]].set(-jnp.inf)
    beta = jnp.asarray(rng.uniform(0.0, 2.0, size=(B, T, H)), jnp.float32)
    h0 = jnp.asarray(rng.normal(size=(B, H, K, V)), jnp.float32)
    mesh, t = Mesh(np.asarray(jax.devices()).reshape(1, 4), ("data", "seq")), P("data", "seq")
    # the delta rule's form only: the linear form reaches the same chooser (group_budget.group_tokens) from its
    # chunk form inside the shard, and tests/ops/test_chunk.py checks its choice at given shapes
    forms = {
        "delta": lambda q, k, v, g, b, h0, seq_axis=None: ops.delta_rule(
            q, k, v, b, g, initial_state=h0, mode="chunk", chunk_size=C, seq_axis=seq_axis)}
    args = (q, k, v, g, beta, h0)
    cot = (jnp.asarray(rng.normal(size=(B, T, H, V)), jnp.float32), jnp.asarray(rng.normal(size=h0.shape), jnp.float32))
    for name, op in forms.items():
      sharded = jax.shard_map(lambda *a: op(*a, seq_axis="seq"), mesh=mesh, in_specs=(t,) * 5 + (P("data"),),
                              out_specs=(t, P("data")))
      vjp = lambda f: jax.jit(lambda *a: (lambda out, pull: (out, pull(cot)))(*jax.vjp(f, *a)))
      calls.clear()
      with tuning.override(memory_budget=2 ** 40):   # fits anything: records the shapes the shard's form sees
        vjp(sharded).trace(*args)
      c = calls[-1]
      memory = lambda L: group_budget.group_memory(c["op"], c["field"], c["shapes"], c["C"], L)
      budget = memory(64)   # of the candidates 128, 64, 32, 16 at the shard's T = 256 (C = 16)
      one_group_fits = memory(None) <= budget
      calls.clear()
      with tuning.override(memory_budget=budget):
        (o, s), grads = vjp(sharded)(*args)
      made = list(calls)
      (o_ref, s_ref), grads_ref = vjp(op)(*args)   # unsharded, the table's groups
      c, T_shard = made[-1], made[-1]["shapes"][0].shape[1]
      group = c["group"]
      larger = None if group is None or 2 * group >= T_shard else 2 * group
      result[name] = {"T_shard": T_shard, "group": group, "fields": sorted({x["field"] for x in made}),
                      "one_group_fits": one_group_fits,
                      "same_choice": all(x["group"] == group for x in made),
                      "fits": memory(group) <= budget, "larger_fits": memory(larger) <= budget,
                      "o": rel_rms(o, o_ref), "state": rel_rms(s, s_ref),
                      "grads": max(rel_rms(a, b) for a, b in zip(grads, grads_ref))}

    default = config_lib.load_sibling(os.path.join(os.getcwd(), "configs", "default.py"), "default")
    B, T = 4, 128
    inputs = rng.integers(0, 256, (B, T)).astype(np.int32)
    seg = np.ones((B, T), np.int32)
    seg[0, 32:], seg[1, 45:], seg[2, 64:] = 2, 2, 2   # document starts at a shard's first token and inside one
    batch = {"inputs": inputs, "targets": np.roll(inputs, -1, 1), "weights": np.ones((B, T), np.float32),
             "segment_ids": seg}
    # one mixer, deltanet: the trainer's budget reaches the chooser the same way for every chunk form (a gla
    # model, or a gla + deltanet hybrid, costs one more model compile per mesh)
    config = default.get_config("mixer=deltanet,tiny=True")
    config.model.num_layers = 1
    config.train.memory_budget_mib = 1   # MiB (an int field)
    out = {}
    for name, mesh in (("one", sharding.make_mesh(jax.devices()[:1])), ("seq4", sharding.make_mesh(seq=4))):
      platform.apply(config.train) if name == "seq4" else tuning.set_overrides()
      static, _, shardings = steps.setup(config, 258, mesh)
      state = steps.init_state(config, 258, static, shardings)
      calls.clear()
      with jax.set_mesh(mesh):
        f = jax.jit(jax.value_and_grad(steps._loss, has_aux=True), static_argnums=3)
        (loss, _), gr = f(state["params"], state["rest"], sharding.global_batch(batch, mesh), static.graphdef)
      # each choice as made inside the shard, and as the chooser makes it outside any mesh at those shapes
      chosen = [(x["field"], x["shapes"][0].shape[1], x["group"], choose(x["op"], x["field"], x["shapes"], x["C"]))
                for x in calls]
      out[name] = (float(loss), jax.tree.leaves(jax.device_get(gr)), chosen)
    tuning.set_overrides()
    (l1, g1, _), (l4, g4, chosen) = out["one"], out["seq4"]
    result["deltanet"] = {"loss": abs(l4 - l1) / abs(l1), "grads": max(rel_rms(a, b) for a, b in zip(g4, g1)),
                          "chosen": chosen}
    print(json.dumps(result))
""")


def test_memory_budget_under_seq_parallelism():
  proc = subprocess.run([sys.executable, "-c", BUDGET_SCRIPT], env=helpers.fake_devices_env(4), cwd=ROOT,
                        capture_output=True, text=True, timeout=1800)
  assert proc.returncode == 0, proc.stderr[-3000:]
  result = json.loads(proc.stdout.strip().splitlines()[-1])
  for name, field in (("delta", "delta_group_tokens"),):
    r = result[name]
    assert r["fields"] == [field] and r["same_choice"], r
    assert r["T_shard"] == 1024 // 4, r   # chosen at the shard's shapes, the budget per device
    assert not r["one_group_fits"], r   # grouping saves memory at the shard's size
    assert r["group"] is not None and r["group"] < r["T_shard"], r   # the grouped path runs inside the shard
    assert r["fits"] and not r["larger_fits"], r
    assert r["o"] <= 1e-5 and r["state"] <= 1e-5 and r["grads"] <= GRAD_TOL, r
  r = result["deltanet"]
  assert r["chosen"] and all(f == "delta_group_tokens" and t == 128 // 4 and got == want
                             for f, t, got, want in r["chosen"]), r
  assert r["loss"] <= TOL and r["grads"] <= GRAD_TOL, r
