"""Flax models as model sources: NNX modules and Linen variables, read under
`jax.eval_shape` (nothing allocated), each variable with the logical names it gives its
dimensions."""

import jax
from flax import nnx

from planc.sources import load_variables


def by_path(source):
    return {v.path: v for v in load_variables(source)}


def test_an_nnx_module_gives_its_variables_paths_and_names():
    found = by_path("models_flax:nnx_decoder")
    assert found["layers/1/wi/kernel"].shape == (32, 64)
    assert found["layers/1/wi/kernel"].names == ("embed", "mlp")
    assert found["embedding/embedding"].names == ("vocab", "embed")
    assert found["layers/0/query"].names == ("embed", "q_heads", "kv")


def test_an_nnx_module_is_built_with_no_mesh_and_nothing_allocated():
    # Flax 0.12 shards a named variable as it is made, which needs a mesh: planc builds
    # the module abstractly with that off, so no array is ever created.
    before = len(jax.live_arrays())
    load_variables("models_flax:nnx_decoder")
    assert len(jax.live_arrays()) == before


def test_an_nnx_state_reads_as_its_module():
    import models_flax

    with nnx.use_eager_sharding(False):
        module = nnx.eval_shape(models_flax.nnx_decoder)
    assert by_path(nnx.state(module)) == by_path(module)


def test_linen_boxes_are_the_variables_they_hold_at_their_own_path():
    found = by_path("models_flax:linen_variables")
    assert set(found) == {"params/Dense_0/kernel", "params/Dense_1/kernel",
                          "params/Dense_1/bias", "params/scale"}
    assert found["params/Dense_1/kernel"].names == ("mlp", "embed")
    assert found["params/Dense_1/bias"].names is None


def test_a_plain_pytree_leaf_has_no_names():
    plain = by_path({"w": jax.ShapeDtypeStruct((2, 2), "float32")})
    assert plain["w"].names is None


def test_a_manifest_keeps_the_names_and_reads_them_back(tmp_path):
    from planc.sources import read_manifest, write_manifest

    variables = load_variables("models_flax:nnx_decoder")
    path = tmp_path / "m.json"
    write_manifest(variables, str(path), source="models_flax:nnx_decoder")
    assert '"names": ["embed", "mlp"]' in path.read_text()
    assert read_manifest(str(path)) == variables


def test_a_manifest_without_names_is_written_as_before(tmp_path):
    from planc.sources import manifest_text
    from planc.variables import Variable

    assert "names" not in manifest_text([Variable("w", (2, 2))])
