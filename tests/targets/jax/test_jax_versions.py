"""The JAX versions planc supports: what pyproject.toml states, what `make test-oldest`
runs against, and the one error a JAX without a needed feature gives."""

import os
import re
import tomllib
from types import SimpleNamespace

import jax
import pytest

import planc
from conftest import ROOT
from planc.targets.jax.compat import FEATURES, MIN_JAX, axis_type, require


def version(text):
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


def pyproject():
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_pyproject_states_the_oldest_jax_planc_supports():
    assert f"jax>={MIN_JAX}" in pyproject()["project"]["dependencies"]


def test_the_oldest_supported_jax_has_every_feature_planc_uses():
    assert max(version(since) for _, since in FEATURES.values()) <= version(MIN_JAX)


def test_the_makefile_tests_against_the_stated_oldest_versions():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    pins = re.search(r"^OLDEST\s*:=\s*(.*)$", makefile, re.M).group(1).split()
    assert f"jax=={MIN_JAX}" in pins and f"jaxlib=={MIN_JAX}" in pins
    keras = next(p for p in pins if p.startswith("keras=="))
    floor = next(d for d in pyproject()["project"]["optional-dependencies"]["keras"])
    assert version(keras) == version(floor) + (0,) * (3 - len(version(floor)))


@pytest.mark.skipif("PLANC_EXPECT_JAX" not in os.environ,
                    reason="set by `make test-oldest`, which runs the oldest versions")
def test_make_test_oldest_runs_the_oldest_jax():
    assert jax.__version__ == os.environ["PLANC_EXPECT_JAX"]


def test_the_installed_jax_has_every_feature():
    for feature in FEATURES:
        assert require(feature, needed_for="this test") is not None


def old_jax(**present):
    """A stand-in for an older JAX release: only the attributes given."""
    return SimpleNamespace(__version__="0.4.35", **present)


def test_a_missing_feature_is_one_p316_naming_the_version_that_has_it():
    plan = planc.loads("mesh(batch = auto)\ndata_parallel\naxis_types explicit", file="p.kd")
    with pytest.raises(planc.PlanError) as info:
        require("set_mesh", plan.ir, needed_for="`plan.use()`", module=old_jax())
    (d,) = info.value.diagnostics
    assert d.code == "P316" and (d.span.file, d.span.line) == ("p.kd", 3)
    assert "0.4.35" in d.message and "jax.set_mesh" in d.message and "0.7.1" in d.message
    assert f"jax>={MIN_JAX}" in d.help[0]


def test_an_axis_type_the_installed_jax_does_not_know_is_p316_at_axis_types():
    plan = planc.loads("mesh(batch = auto)\ndata_parallel\naxis_types explicit", file="p.kd")
    only_auto = SimpleNamespace(Auto=object())
    module = old_jax(sharding=SimpleNamespace(AxisType=only_auto))
    with pytest.raises(planc.PlanError) as info:
        axis_type(plan.ir, "explicit", module=module)
    (d,) = info.value.diagnostics
    assert d.code == "P316" and d.span.line == 3 and "`explicit`" in d.message


def test_the_emitted_module_names_the_oldest_jax_when_a_feature_is_missing():
    from planc.targets.emit.jax_module import module_text
    text = module_text(planc.loads("mesh(batch = auto)\ndata_parallel").ir)
    assert "jax.set_mesh" in text and "jax.sharding.reshard" in text
    assert text.count(f"this module needs jax>={MIN_JAX}") == 3
