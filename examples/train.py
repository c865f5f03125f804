import numpy as np
import planc

plan = planc.load_plan("examples/mlp_tp.kd")
plan.initialize()                  # first, before any JAX call; a no-op on one process

import jax                         # from here on, jax.devices() is every process's devices
import jax.numpy as jnp


def init_fn(key):                  # a two-layer MLP: 16 -> 32 -> 8
    k0, k1 = jax.random.split(key)
    return {"dense_0": {"kernel": jax.random.normal(k0, (16, 32)) / 4, "bias": jnp.zeros(32)},
            "dense_1": {"kernel": jax.random.normal(k1, (32, 8)) / 4, "bias": jnp.zeros(8)}}


@jax.jit
def train_step(params, batch):
    def loss_fn(p):
        h = jnp.tanh(batch["x"] @ p["dense_0"]["kernel"] + p["dense_0"]["bias"])
        return jnp.mean((h @ p["dense_1"]["kernel"] + p["dense_1"]["bias"] - batch["y"]) ** 2)
    loss, grads = jax.value_and_grad(loss_fn)(params)
    return loss, jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)


params = plan.init(init_fn, jax.random.key(0))     # born sharded over the global mesh
x = np.random.default_rng(0).normal(size=(64, 16)).astype(np.float32)   # the global batch
y = np.random.default_rng(1).normal(size=(64, 8)).astype(np.float32)
# This process's rows of the global batch, as each host's data loader would read them.
held = plan.data_sharding(rank=2).addressable_devices_indices_map(x.shape).values()
rows = sorted({r for index in held for r in range(*index[0].indices(len(x)))})
batch = plan.shard_batch({"x": x[rows], "y": y[rows]})
for step in range(3):
    loss, params = train_step(params, batch)       # jax.jit, as on one machine
    if jax.process_index() == 0:
        print(f"step {step}: loss {float(loss):.4f}")
