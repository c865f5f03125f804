"""A Keras 3 model's own training step, as `planc cost examples/aot.kd --step
examples.keras_step:build` (and `planc aot`) costs and compiles it.

`build()` returns `(model, batch)`: the model compiled with its optimizer and loss, and
the global batch `(x, y)` as shapes and dtypes (`jax.ShapeDtypeStruct`). planc calls it
under `jax.eval_shape`, so neither the weights nor Adam's slots are ever allocated. The
layers are named as `examples/aot.kd`'s rules name the JAX MLP's (`dense_0/kernel`): a
functional model's variable paths are its layers' names.
"""

import os

os.environ.setdefault("KERAS_BACKEND", "jax")  # planc compiles Keras's JAX training step

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import keras  # noqa: E402

WIDTH, HIDDEN, BATCH = 256, 1024, 64


def build():
    inputs = keras.Input((WIDTH,))
    hidden = keras.layers.Dense(HIDDEN, activation="tanh", name="dense_0")(inputs)
    model = keras.Model(inputs, keras.layers.Dense(WIDTH, name="dense_1")(hidden))
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="mean_squared_error")
    batch = (jax.ShapeDtypeStruct((BATCH, WIDTH), jnp.float32),
             jax.ShapeDtypeStruct((BATCH, WIDTH), jnp.float32))
    return model, batch
