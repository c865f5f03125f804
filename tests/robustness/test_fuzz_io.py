"""Fuzzing checkpoint headers and the language server's framing (`tests/fuzzing_io.py`):
a few hundred cases here, more under `make fuzz`."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fuzzing_io as fuzz

from .cases import fixed_cases

CASES = fixed_cases(300)


@CASES
@given(data=st.data())
def test_a_checkpoint_header_opens_or_is_one_checkpoint_error_and_reads_as_it_said(
        directory, data):
    path = data.draw(fuzz.checkpoints(directory))
    assert fuzz.check_checkpoint(path) == []


@CASES
@given(stream=fuzz.streams())
def test_the_server_frames_any_input_and_finds_the_last_message(stream):
    assert fuzz.check_stream(stream) == []


@pytest.mark.parametrize("name", ["safetensors", "npz", "h5"])
def test_the_generators_reach_every_format(directory, name):
    seen = set()

    @settings(CASES, max_examples=60)
    @given(data=st.data())
    def draw(data):
        seen.add(data.draw(fuzz.checkpoints(directory)).rsplit(".", 1)[-1])

    draw()
    assert name in seen
