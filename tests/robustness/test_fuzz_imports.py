"""Fuzzing the import grammars (`tests/fuzzing_imports.py`): Megatron layout strings and
MaxText YAML configs, a few hundred cases here, more under `make fuzz`."""

from hypothesis import given

import fuzzing_imports as fuzz

from .cases import fixed_cases

CASES = fixed_cases(150)


@CASES
@given(case=fuzz.megatron_layouts())
def test_a_megatron_layout_is_a_plan_that_compiles_back_or_one_located_error(directory, case):
    text, layers = case
    assert fuzz.check_megatron(text, layers, directory) == []


@CASES
@given(data=fuzz.maxtext_configs())
def test_a_maxtext_config_is_a_plan_that_loads_or_one_located_error(directory, data):
    assert fuzz.check_maxtext(data, directory) == []
