"""Model sources: every kind of source reduced to Variable(path, shape, dtype).

Everything here is real: numpy and jax pytrees, Keras models on the JAX backend,
safetensors files written by the safetensors library, npz archives written by numpy.
"""

import os

os.environ.setdefault("KERAS_BACKEND", "jax")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import dataclasses
import json
import stat
import struct
import subprocess
import sys
import textwrap
import uuid
import zipfile
from typing import NamedTuple

import jax
import jax.numpy as jnp
import keras
import ml_dtypes
import numpy as np
import pytest
import safetensors.flax
import safetensors.numpy

from planc.fileio import atomic_write, track_reads
from planc.sources import (
    SourceError, load_variables, manifest_text, normalize_dtype, read_manifest,
    write_manifest,
)
from planc.variables import Variable


def V(path, shape, dtype="float32"):
    return Variable(path, tuple(shape), dtype)


def paths(variables):
    return [v.path for v in variables]


def unique_module_name():
    # Modules written in one test must not be found in sys.modules by another.
    return f"sources_mod_{uuid.uuid4().hex[:12]}"


def write_module(tmp_path, source):
    name = unique_module_name()
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    return name


# ---------------------------------------------------------------------------- pytrees

class AdamState(NamedTuple):
    count: object
    mu: object
    nu: object


@dataclasses.dataclass
class Block:
    kernel: object
    bias: object
    activation: object = dataclasses.field(default="relu", metadata={"pytree_node": False})


def test_dict_keys_are_joined_with_slash_in_insertion_order():
    tree = {"dense_1": {"kernel": np.zeros((3, 4), np.float32)},
            "dense": {"kernel": np.zeros((4, 2), np.float32), "bias": np.zeros(2, np.float32)}}
    assert load_variables(tree) == (
        V("dense_1/kernel", (3, 4)), V("dense/kernel", (4, 2)), V("dense/bias", (2,)))


def test_list_and_tuple_items_are_named_by_decimal_index():
    tree = {"layers": [np.zeros(1, np.int8)] * 11, "pair": (np.zeros(2), np.zeros(3))}
    got = load_variables(tree)
    assert paths(got)[:2] == ["layers/0", "layers/1"]
    assert paths(got)[10:] == ["layers/10", "pair/0", "pair/1"]
    assert got[-1] == V("pair/1", (3,), "float64")


def test_namedtuple_fields_name_the_path():
    state = AdamState(count=np.zeros((), np.int32),
                      mu={"w": np.zeros((2, 2), np.float32)},
                      nu={"w": np.zeros((2, 2), np.float32)})
    assert load_variables({"opt": state}) == (
        V("opt/count", (), "int32"), V("opt/mu/w", (2, 2)), V("opt/nu/w", (2, 2)))


def test_dataclass_fields_in_declaration_order_and_static_fields_skipped():
    tree = [Block(bias=np.zeros(4, np.float16), kernel=np.zeros((2, 4), np.float16))]
    assert load_variables(tree) == (V("0/kernel", (2, 4), "float16"), V("0/bias", (4,), "float16"))


def test_none_python_numbers_strings_and_functions_are_skipped():
    tree = {"w": np.zeros(3, np.float32), "b": None, "lr": 1e-3, "step": 7, "flag": True,
            "name": "mlp", "act": np.tanh, "cls": dict}
    assert load_variables(tree) == (V("w", (3,)),)


def test_numpy_scalar_is_a_rank_0_variable():
    assert load_variables({"scale": np.float32(2.0)}) == (V("scale", ()),)


def test_shape_dtype_struct_leaves():
    tree = {"embed": jax.ShapeDtypeStruct((32_000, 4096), jnp.bfloat16),
            "norm": jax.ShapeDtypeStruct((4096,), jnp.float32)}
    assert load_variables(tree) == (V("embed", (32_000, 4096), "bfloat16"), V("norm", (4096,)))


def test_jax_arrays_are_leaves():
    tree = {"w": jnp.zeros((8, 2), jnp.bfloat16), "q": jnp.zeros((3,), jnp.int8)}
    assert load_variables(tree) == (V("w", (8, 2), "bfloat16"), V("q", (3,), "int8"))


def test_custom_pytree_node_is_read_through_jax_tree_util():
    @jax.tree_util.register_pytree_with_keys_class
    class Pair:
        def __init__(self, a, b):
            self.a, self.b = a, b

        def tree_flatten_with_keys(self):
            return ((jax.tree_util.GetAttrKey("a"), self.a),
                    (jax.tree_util.GetAttrKey("b"), self.b)), None

        @classmethod
        def tree_unflatten(cls, aux, children):
            return cls(*children)

    assert paths(load_variables({"p": Pair(np.zeros(1), np.zeros(2))})) == ["p/a", "p/b"]


def test_typed_prng_key_is_read_as_its_key_data():
    got = load_variables({"w": np.zeros(2, np.float32), "rng": jax.random.key(0)})
    assert got[1] == V("rng", (2,), "uint32")


def test_list_of_variables_is_taken_as_given():
    given = [V("a/kernel", (2, 2), "bfloat16"), V("b", (3,))]
    assert load_variables(given) == tuple(given)


def test_plain_pytree_does_not_import_jax_or_keras(tmp_path):
    code = textwrap.dedent("""
        import sys
        import numpy as np
        from planc.sources import load_variables
        got = load_variables({"w": np.zeros((2, 3), np.float32), "b": [np.zeros(3)]})
        print([v.path for v in got], "jax" in sys.modules, "keras" in sys.modules)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["['w',", "'b/0']", "False", "False"]


# ------------------------------------------------------------------------ pytree errors

def test_leaf_that_is_not_an_array_is_an_error_naming_its_path():
    with pytest.raises(SourceError, match=r"leaf at `layers/1` is a set, not an array"):
        load_variables({"layers": [np.zeros(2), {1, 2}]})


def test_two_variables_with_one_path_is_an_error_naming_the_path():
    with pytest.raises(SourceError, match=r"two variables have the path `a/0`"):
        load_variables({"a": [np.zeros(2)], "a/0": np.zeros(3)})


def test_source_without_variables_is_an_error():
    with pytest.raises(SourceError, match="no variables found"):
        load_variables({"lr": 0.1, "b": None})


class _Spec:
    """Anything with .shape and .dtype is a leaf, checked like any other."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype = shape, dtype


def test_unknown_dimension_is_an_error():
    with pytest.raises(SourceError, match=r"`w` has shape \(None, 3\): dimension 0 is None, "
                                          r"not an integer"):
        load_variables({"w": _Spec((None, 3), "float32")})


def test_negative_dimension_is_an_error():
    with pytest.raises(SourceError, match=r"`w` has shape \(2, -1\): dimension 1 is negative"):
        load_variables({"w": _Spec((2, -1), "float32")})


def test_unknown_dtype_is_an_error():
    with pytest.raises(SourceError, match=r"`w` has an unknown dtype 'float7'"):
        load_variables({"w": _Spec((2,), "float7")})


def test_pytree_that_contains_itself_is_an_error():
    loop = {"w": np.zeros(1)}
    loop["again"] = [loop]
    with pytest.raises(SourceError, match="contains itself"):
        load_variables(loop)


# ----------------------------------------------------------------------------- dtypes

@pytest.mark.parametrize("given, name", [
    (np.float32, "float32"),
    (np.dtype(">f4"), "float32"),
    ("<f2", "float16"),
    (jnp.bfloat16, "bfloat16"),
    (jnp.dtype("int4"), "int4"),
    (ml_dtypes.float8_e4m3fn, "float8_e4m3fn"),
    ("bfloat16", "bfloat16"),
    ("BF16", "bfloat16"),
    ("F8_E4M3", "float8_e4m3fn"),
    ("F8_E5M2", "float8_e5m2"),
    ("U8", "uint8"),
    ("u8", "uint64"),
    ("BOOL", "bool"),
    ("F4", "float4_e2m1fn"),
    ("torch.bfloat16", "bfloat16"),
])
def test_normalize_dtype_spellings(given, name):
    assert normalize_dtype(given) == name


def test_normalize_dtype_refuses_non_numeric_dtypes():
    with pytest.raises(ValueError, match="unsupported dtype"):
        normalize_dtype(np.dtype("U8"))


# ------------------------------------------------------------------------------ keras

def test_keras_functional_model_paths_have_no_model_prefix():
    keras.backend.clear_session()
    inputs = keras.Input((8,))
    model = keras.Model(inputs, keras.layers.Dense(4)(inputs))
    assert load_variables(model) == (V("dense/kernel", (8, 4)), V("dense/bias", (4,)))


def test_keras_sequential_model_paths_have_the_model_prefix():
    keras.backend.clear_session()
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4), keras.layers.Dense(2)])
    assert paths(load_variables(model)) == [
        "sequential/dense/kernel", "sequential/dense/bias",
        "sequential/dense_1/kernel", "sequential/dense_1/bias"]


class _Block(keras.layers.Layer):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.ffw = keras.layers.Dense(6, name="ffw")
        self.ln = keras.layers.LayerNormalization(name="ln")

    def call(self, x):
        return self.ln(self.ffw(x))


class _Sub(keras.Model):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.block = _Block(name="block_0")
        self.head = keras.layers.Dense(3, name="head", dtype="bfloat16")

    def call(self, x):
        return self.head(self.block(x))


def test_keras_subclassed_model_paths_nest_under_the_model_name():
    model = _Sub(name="sub")
    model(np.ones((1, 5), np.float32))
    assert load_variables(model) == (
        V("sub/block_0/ffw/kernel", (5, 6)), V("sub/block_0/ffw/bias", (6,)),
        V("sub/block_0/ln/gamma", (6,)), V("sub/block_0/ln/beta", (6,)),
        V("sub/head/kernel", (6, 3), "bfloat16"), V("sub/head/bias", (3,), "bfloat16"))


def test_unbuilt_keras_model_is_an_error_that_says_build_it():
    with pytest.raises(SourceError, match=r"Keras model 'lazy': the model has no variables "
                                          r"yet; build it first"):
        load_variables(_Sub(name="lazy"))


# ------------------------------------------------------------------------ module:attr

def test_module_attr_init_function_is_evaluated_without_allocating(tmp_path, monkeypatch):
    # Run for real, init would allocate 64 GiB; it refuses instead, so the test fails
    # loudly (not by exhausting memory) if planc ever calls it outside jax.eval_shape.
    name = write_module(tmp_path, """
        import jax, jax.numpy as jnp

        def init():
            embed = jnp.zeros((1 << 17, 1 << 17), jnp.float32)
            if not isinstance(embed, jax.core.Tracer):
                raise RuntimeError("init ran for real and allocated 64 GiB")
            return {"embed": embed, "head": {"kernel": jnp.ones((1 << 17, 8), jnp.bfloat16)}}
    """)
    monkeypatch.chdir(tmp_path)
    got = load_variables(f"{name}:init")
    assert got == (V("embed", (1 << 17, 1 << 17)), V("head/kernel", (1 << 17, 8), "bfloat16"))
    assert got[0].nbytes == 64 * 2**30


def test_module_attr_reads_a_module_level_pytree(tmp_path, monkeypatch):
    name = write_module(tmp_path, """
        import numpy as np
        PARAMS = {"w": np.zeros((2, 3), np.float32)}
    """)
    monkeypatch.chdir(tmp_path)
    assert load_variables(f"{name}:PARAMS") == (V("w", (2, 3)),)


@pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")
def test_module_attr_keras_builder_gives_the_paths_of_a_fresh_run(tmp_path, monkeypatch):
    # get_weights needs concrete values, so the abstract attempt fails and planc calls
    # the builder plainly; the failed attempt must not shift Keras's auto names.
    name = write_module(tmp_path, """
        import keras

        def build():
            inputs = keras.Input((4,))
            model = keras.Model(inputs, keras.layers.Dense(3)(inputs))
            model.set_weights(model.get_weights())
            return model
    """)
    monkeypatch.chdir(tmp_path)
    keras.backend.clear_session()
    assert paths(load_variables(f"{name}:build")) == ["dense/kernel", "dense/bias"]


def test_module_attr_sequential_builder_is_read_abstractly(tmp_path, monkeypatch):
    name = write_module(tmp_path, """
        import keras

        def build():
            return keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    """)
    monkeypatch.chdir(tmp_path)
    keras.backend.clear_session()
    assert load_variables(f"{name}:build") == (
        V("sequential/dense/kernel", (4, 3)), V("sequential/dense/bias", (3,)))


def test_function_object_is_evaluated_like_module_attr():
    def init():
        return {"w": jnp.zeros((1 << 20, 1 << 14), jnp.float32)}
    assert load_variables(init) == (V("w", (1 << 20, 1 << 14)),)


@pytest.mark.parametrize("source, attr, message", [
    ("", "sources_absent_mod:f", r"cannot import module 'sources_absent_mod'"),
    ("X = 1\n", ":nothing", r"has no attribute 'nothing'"),
    ("import sources_no_such_dependency\n", ":f",
     r"importing '.*' raised ModuleNotFoundError: No module named 'sources_no_such_dependency'"),
    ("def f(:\n", ":f", r"importing '.*' raised SyntaxError"),
    ("def f(a, b):\n    return {}\n", ":f", r"a callable that needs arguments \(a, b\)"),
    ("def f():\n    raise ValueError('no weights here')\n", ":f",
     r"raised ValueError: no weights here"),
])
def test_module_attr_failures_are_source_errors(tmp_path, monkeypatch, source, attr, message):
    monkeypatch.chdir(tmp_path)
    if attr.startswith(":"):
        attr = write_module(tmp_path, source) + attr
    with pytest.raises(SourceError, match=message) as info:
        load_variables(attr)
    assert str(info.value).startswith(attr.split(":")[0])
    assert "\n" not in str(info.value)


def test_string_that_is_neither_file_nor_module_attr_is_a_missing_file():
    with pytest.raises(SourceError, match=r"^no/such/model\.safetensors: no such file$"):
        load_variables("no/such/model.safetensors")


# ------------------------------------------------------------------------ safetensors

LLAMA = {
    "model.embed_tokens.weight": (128, 64),
    "model.layers.0.self_attn.q_proj.weight": (64, 64),
    "model.layers.0.self_attn.k_proj.weight": (16, 64),
    "model.layers.0.self_attn.v_proj.weight": (16, 64),
    "model.layers.0.self_attn.o_proj.weight": (64, 64),
    "model.layers.0.mlp.gate_proj.weight": (172, 64),
    "model.layers.0.mlp.up_proj.weight": (172, 64),
    "model.layers.0.mlp.down_proj.weight": (64, 172),
    "model.layers.0.input_layernorm.weight": (64,),
    "model.norm.weight": (64,),
    "lm_head.weight": (128, 64),
}


def header_order(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return [k for k in json.loads(f.read(n)) if k != "__metadata__"]


def test_safetensors_llama_checkpoint_in_header_order(tmp_path):
    path = tmp_path / "model.safetensors"
    safetensors.numpy.save_file({k: np.zeros(s, np.float16) for k, s in LLAMA.items()},
                                str(path), metadata={"format": "pt"})
    got = load_variables(path)
    assert paths(got) == header_order(path)
    assert set(got) == {V(k, s, "float16") for k, s in LLAMA.items()}


def test_safetensors_bfloat16_and_int8(tmp_path):
    path = tmp_path / "q.safetensors"
    safetensors.flax.save_file({"w": jnp.zeros((4, 2), jnp.bfloat16),
                                "w_scale": jnp.zeros((4,), jnp.int8)}, str(path))
    assert load_variables(str(path)) == (V("w", (4, 2), "bfloat16"), V("w_scale", (4,), "int8"))


def write_sparse_safetensors(path, tensors):
    """A valid safetensors file whose data region is a hole: GBs that take no disk."""
    header, offset = {}, 0
    for name, (dtype, shape, nbytes) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        f.truncate(8 + len(raw) + offset)
    return 8 + len(raw) + offset


def thread_bytes_read():
    """Bytes this thread has pulled through read(2) so far (Linux), or None."""
    try:
        with open("/proc/thread-self/io") as f:
            return int(next(l for l in f if l.startswith("rchar:")).split()[1])
    except (OSError, StopIteration):
        return None


def test_multi_gb_checkpoint_is_validated_from_its_header_alone(tmp_path):
    tensors = {"model.embed_tokens.weight": ("BF16", (128_256, 4096), 128_256 * 4096 * 2),
               "lm_head.weight": ("BF16", (128_256, 4096), 128_256 * 4096 * 2)}
    for i in range(16):
        for proj in ("gate_proj", "up_proj"):
            tensors[f"model.layers.{i}.mlp.{proj}.weight"] = ("BF16", (14_336, 4096), 14_336 * 4096 * 2)
    path = tmp_path / "big.safetensors"
    size = write_sparse_safetensors(path, tensors)
    assert size > 4 * 2**30
    assert os.stat(path).st_blocks * 512 < 2**20  # the data really is a hole

    before = thread_bytes_read()
    with track_reads() as log:
        got = load_variables(path)
    after = thread_bytes_read()

    assert len(got) == 34
    assert got[0] == V("model.embed_tokens.weight", (128_256, 4096), "bfloat16")
    assert sum(v.nbytes for v in got) == sum(n for _, _, n in tensors.values())
    assert log.files == [str(path)]
    assert log.bytes_read < 64 * 1024
    if before is not None:
        assert after - before < 2**20


def st_bytes(header, data=b""):
    """A safetensors file from a literal header, length prefix computed."""
    return struct.pack("<Q", len(header)) + header + data


@pytest.mark.parametrize("content, message", [
    pytest.param(b"\x01\x00", r"not a safetensors file: 2 bytes is too short", id="tiny"),
    pytest.param(struct.pack("<Q", 200 * 2**20) + b"{}",
                 r"header length 209715200 is over the 100 MB limit", id="huge-header"),
    pytest.param(struct.pack("<Q", 500) + b'{"a": {}}',
                 r"truncated safetensors header: it claims 500 bytes but only 9 follow",
                 id="truncated-header"),
    pytest.param(st_bytes(b"{abc}"), r"safetensors header is not valid JSON", id="bad-json"),
    pytest.param(st_bytes(b"[]"), r"safetensors header is a JSON list, not an object",
                 id="not-object"),
    pytest.param(st_bytes(b'{"w": {"dtype": "F7", "shape": [2], "data_offsets": [0, 2]}}', b"\0\0"),
                 r"`w` has an unknown dtype 'F7'", id="unknown-dtype"),
    pytest.param(st_bytes(b'{"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}'),
                 r"truncated file: `w` ends at data byte 8 but the file holds only 0 data bytes",
                 id="truncated-data"),
    pytest.param(st_bytes(b'{"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}', b"\0" * 4),
                 r"`w` has 4 data bytes but F32 \[2\] needs 8", id="size-mismatch"),
    pytest.param(st_bytes(b'{"w": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 0]}}'),
                 r"dimension 0 is negative", id="negative-dim"),
    pytest.param(st_bytes(b'{"w": {"dtype": "F32", "shape": []}}'),
                 r"header entry `w` lacks 'data_offsets'", id="no-offsets"),
    pytest.param(st_bytes(b'{"w": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]}, '
                          b'"w": {"dtype": "F32", "shape": [], "data_offsets": [4, 8]}}', b"\0" * 8),
                 r"the JSON names `w` twice", id="duplicate-name"),
])
def test_damaged_safetensors_is_a_source_error(tmp_path, content, message):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(content)
    with pytest.raises(SourceError, match=message) as info:
        load_variables(path)
    assert str(info.value).startswith(str(path) + ": ")


def test_sharded_index_reads_every_shard_in_weight_map_order(tmp_path):
    names = list(LLAMA)
    first, second = names[:5], names[5:]
    safetensors.numpy.save_file({k: np.zeros(LLAMA[k], np.float32) for k in first},
                                str(tmp_path / "model-00001-of-00002.safetensors"))
    safetensors.numpy.save_file({k: np.zeros(LLAMA[k], np.float32) for k in second},
                                str(tmp_path / "model-00002-of-00002.safetensors"))
    weight_map = {k: "model-00001-of-00002.safetensors" for k in first}
    weight_map.update({k: "model-00002-of-00002.safetensors" for k in second})
    weight_map = dict(sorted(weight_map.items()))
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map}))

    got = load_variables(str(index))
    assert paths(got) == sorted(LLAMA)
    assert got == tuple(V(k, LLAMA[k]) for k in sorted(LLAMA))
    assert load_variables(tmp_path) == got  # a Hugging Face model directory


def test_index_naming_a_missing_shard_is_an_error(tmp_path):
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"weight_map": {"lm_head.weight": "model-00009.safetensors"}}))
    with pytest.raises(SourceError, match=r"shard 'model-00009.safetensors' \(holding "
                                          r"`lm_head.weight`\) does not exist"):
        load_variables(index)


def test_index_naming_a_tensor_its_shard_lacks_is_an_error(tmp_path):
    safetensors.numpy.save_file({"a": np.zeros(2, np.float32)}, str(tmp_path / "s1.safetensors"))
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"weight_map": {"a": "s1.safetensors", "b": "s1.safetensors"}}))
    with pytest.raises(SourceError, match=r"puts `b` in shard 's1.safetensors', but that "
                                          r"shard has no such tensor"):
        load_variables(index)


# -------------------------------------------------------------------------------- npz

def test_npz_member_names_become_paths(tmp_path):
    path = tmp_path / "params.npz"
    np.savez(path, **{"dense/kernel": np.zeros((3, 4), np.float32),
                      "dense/bias": np.zeros(4, np.float32), "step": np.int64(3)})
    assert load_variables(path) == (
        V("dense/kernel", (3, 4)), V("dense/bias", (4,)), V("step", (), "int64"))


def test_compressed_npz_is_read_from_headers(tmp_path):
    path = tmp_path / "params.npz"
    np.savez_compressed(path, w=np.zeros((1024, 1024), np.float64), b=np.zeros(2, np.float16))
    with track_reads() as log:
        got = load_variables(path)
    assert got == (V("w", (1024, 1024), "float64"), V("b", (2,), "float16"))
    assert log.bytes_read < 64 * 1024


def test_npz_reads_headers_not_array_data(tmp_path):
    path = tmp_path / "params.npz"
    np.savez(path, w=np.ones((2048, 1024), np.float32))  # 8 MiB stored uncompressed
    before = thread_bytes_read()
    with track_reads() as log:
        assert load_variables(path) == (V("w", (2048, 1024)),)
    after = thread_bytes_read()
    assert log.bytes_read < 64 * 1024
    if before is not None:
        assert after - before < 2**20


def test_npz_of_bfloat16_is_an_error_that_says_the_type_was_lost(tmp_path):
    path = tmp_path / "bf16.npz"
    np.savez(path, w=np.zeros(4, ml_dtypes.bfloat16))
    with pytest.raises(SourceError, match=r"`w` has raw-bytes dtype '<V2'"):
        load_variables(path)


def test_npz_that_is_not_a_zip_is_an_error(tmp_path):
    path = tmp_path / "fake.npz"
    path.write_bytes(b"not a zip at all")
    with pytest.raises(SourceError, match=r"fake.npz: not an npz archive"):
        load_variables(path)


def test_npz_member_that_is_not_npy_is_an_error(tmp_path):
    path = tmp_path / "odd.npz"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("readme.txt", "hello")
    with pytest.raises(SourceError, match=r"member 'readme.txt' is not a .npy array"):
        load_variables(path)


# -------------------------------------------------------------------------- manifests

def test_manifest_round_trips_through_load_variables(tmp_path):
    variables = (V("model.embed_tokens.weight", (128, 64), "bfloat16"),
                 V("model.norm.weight", (64,)), V("step", (), "int32"),
                 V("q", (2, 2), "float8_e4m3fn"))
    path = tmp_path / "model.json"
    write_manifest(variables, path, source="model.safetensors")
    assert load_variables(path) == variables
    assert read_manifest(str(path)) == variables


def test_manifest_text_is_deterministic_and_documented_shape():
    text = manifest_text([V("dense/kernel", (784, 128)), V("dense/bias", (128,))], source="m.npz")
    assert text == (
        '{\n'
        '  "planc_manifest": 1,\n'
        '  "source": "m.npz",\n'
        '  "variables": [\n'
        '    {"dtype": "float32", "path": "dense/kernel", "shape": [784, 128]},\n'
        '    {"dtype": "float32", "path": "dense/bias", "shape": [128]}\n'
        '  ]\n'
        '}\n')
    assert json.loads(text)["variables"][1] == {"dtype": "float32", "path": "dense/bias",
                                                "shape": [128]}


def test_manifest_can_be_written_to_an_open_file(tmp_path):
    path = tmp_path / "m.json"
    with open(path, "w") as f:
        write_manifest([V("w", (1,))], f)
    assert path.read_text() == manifest_text([V("w", (1,))])


def test_manifest_from_keras_model_matches_the_model(tmp_path):
    keras.backend.clear_session()
    inputs = keras.Input((8,))
    model = keras.Model(inputs, keras.layers.Dense(4)(inputs))
    write_manifest(load_variables(model), tmp_path / "m.json")
    assert load_variables(tmp_path / "m.json") == load_variables(model)


@pytest.mark.parametrize("data, message", [
    ({"planc_manifest": 2, "variables": []}, r"manifest version 2 is not supported"),
    ({"planc_manifest": "1", "variables": []}, r"must be an integer version"),
    ({"planc_manifest": 1}, r"'variables' must be a list"),
    ({"planc_manifest": 1, "variables": [{"path": "w", "shape": [2]}]}, r"variables\[0\] lacks 'dtype'"),
    ({"planc_manifest": 1, "variables": [{"path": "w", "shape": [2.5], "dtype": "float32"}]},
     r"variables\[0\]: `w` has shape \(2.5,\): dimension 0 is 2.5, not an integer"),
    ({"planc_manifest": 1, "variables": [{"path": "", "shape": [], "dtype": "float32"}]},
     r"path must be a non-empty string"),
    ({"planc_manifest": 1, "variables": [{"path": "w", "shape": [], "dtype": "float32"}] * 2},
     r"two variables have the path `w`"),
    ({"weights": []}, r"neither a planc manifest .* nor a safetensors index"),
])
def test_bad_manifest_is_a_source_error(tmp_path, data, message):
    path = tmp_path / "m.json"
    path.write_text(json.dumps(data))
    with pytest.raises(SourceError, match=message):
        load_variables(path)


def test_manifest_that_is_not_json_is_an_error(tmp_path):
    path = tmp_path / "m.json"
    path.write_text('{"planc_manifest": 1,')
    with pytest.raises(SourceError, match=r"m.json: file is not valid JSON: .* line 1 column 22"):
        load_variables(path)


def test_unsupported_file_type_is_an_error(tmp_path):
    path = tmp_path / "pytorch_model.bin"
    path.write_bytes(b"\0" * 16)
    with pytest.raises(SourceError, match=r"unsupported file type \.bin"):
        load_variables(path)


# ---------------------------------------------------------------------- atomic writes

def test_atomic_write_replaces_the_file_and_keeps_its_mode(tmp_path):
    path = tmp_path / "out.json"
    path.write_text("old")
    os.chmod(path, 0o640)
    atomic_write(path, "new\n")
    assert path.read_text() == "new\n"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
    assert os.listdir(tmp_path) == ["out.json"]


def test_atomic_write_of_a_new_file_gets_umask_permissions(tmp_path):
    atomic_write(tmp_path / "fresh.bin", b"\x00\x01")
    mask = os.umask(0)
    os.umask(mask)
    assert (tmp_path / "fresh.bin").read_bytes() == b"\x00\x01"
    assert stat.S_IMODE(os.stat(tmp_path / "fresh.bin").st_mode) == 0o666 & ~mask


def test_failed_atomic_write_leaves_the_old_file_and_no_temp_file(tmp_path):
    # The rename fails because the target is a non-empty directory: after the temp
    # file was fully written, the latest point a write can fail.
    target = tmp_path / "model.json"
    target.mkdir()
    (target / "keep").write_text("old")
    with pytest.raises(OSError):
        atomic_write(target, "new")
    assert (target / "keep").read_text() == "old"
    assert sorted(os.listdir(tmp_path)) == ["model.json"]


def test_failed_manifest_write_keeps_the_old_manifest(tmp_path):
    path = tmp_path / "m.json"
    write_manifest([V("w", (1,))], path)
    before = path.read_bytes()
    with pytest.raises(SourceError, match="two variables have the path `w`"):
        write_manifest([V("w", (1,)), V("w", (2,))], path)
    assert path.read_bytes() == before


def test_reading_a_manifest_imports_neither_the_preset_nor_the_object_reader(tmp_path):
    import subprocess
    import sys

    m = tmp_path / "m.json"
    m.write_text('{"planc_manifest": 1, "variables": '
                 '[{"path": "a", "shape": [2], "dtype": "float32"}]}')
    code = ("import sys; from planc.sources import load_variables; "
            f"print(len(load_variables({str(m)!r}))); "
            "print(sorted(n for n in ('planc.sources.preset', 'planc.sources.objects') "
            "if n in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.split("\n")[:2] == ["1", "[]"]


def test_the_lazily_read_names_are_still_the_packages():
    import planc.sources
    from planc.sources import objects, preset

    assert planc.sources.variables_of_object is objects.variables_of_object
    assert planc.sources.is_preset is preset.is_preset
