"""The `axes` table at check time: what it maps, what it refuses, and how a layout that
writes logical names resolves, without any model."""

import pytest

import planc
from planc.diagnostics import PlanError

MESH = "mesh(data = 2, fsdp = 2, tp = 2)\nmodel_parallel(batch = data)\n"


def loads(body: str):
    return planc.loads(MESH + body)


def refused(body: str):
    """The diagnostics of a plan `loads` must refuse."""
    with pytest.raises(PlanError) as caught:
        loads(body)
    return caught.value.diagnostics


def errors(body: str) -> list[tuple[str, int, int]]:
    return [(d.code, d.span.line, d.span.column) for d in refused(body) if d.is_error]


def codes(body: str) -> list[str]:
    return [d.code for d in loads(body).ir.diagnostics]


def dims(plan, k: int = 0):
    return [d.axes for d in plan.ir.rules[k].layout.alternatives[0].head]


def test_a_logical_name_in_a_layout_takes_its_mesh_axes():
    plan = loads('axes {\n  embed -> fsdp\n  mlp -> tp\n}\nlayout {\n  "w" -> (embed, mlp)\n}\n')
    assert dims(plan) == [("fsdp",), ("tp",)]
    assert plan.partition_spec("w", (4, 4)) == planc.loads(
        MESH + 'layout { "w" -> (fsdp, tp) }').partition_spec("w", (4, 4))


def test_a_name_may_map_to_several_axes_or_to_none():
    plan = loads('axes {\n  batch -> (data, fsdp)\n  kv -> _\n}\n'
                 'layout {\n  "x" -> (batch, kv)\n}\n')
    assert dims(plan) == [("data", "fsdp"), ()]


def test_a_later_entry_is_the_fallback_when_the_first_axes_are_taken():
    plan = loads('axes {\n  mlp -> fsdp\n  embed -> fsdp\n  embed -> tp\n}\n'
                 'layout {\n  "w" -> (embed, mlp)\n}\n')
    # Table order, not dimension order: `mlp` takes fsdp first, so `embed` falls back.
    assert dims(plan) == [("tp",), ("fsdp",)]


def test_mesh_axes_and_logical_names_mix_in_one_layout():
    plan = loads('axes {\n  embed -> fsdp\n  embed -> tp\n}\nlayout {\n  "w" -> (fsdp, embed)\n}\n')
    assert dims(plan) == [("fsdp",), ("tp",)]


def test_the_layout_text_keeps_the_names_as_written():
    plan = loads('axes {\n  embed -> fsdp\n}\nlayout {\n  "w" -> (embed, ...)\n}\n')
    assert plan.ir.rules[0].layout.text == "(embed, ...)"


def test_a_name_whose_axes_are_all_taken_is_not_split_with_a_warning_naming_the_taker():
    plan = loads('axes {\n  embed -> fsdp\n  mlp -> fsdp\n}\nlayout {\n  "w" -> (embed, mlp)\n}\n')
    assert dims(plan) == [("fsdp",), ()]
    [d] = [d for d in plan.ir.diagnostics if d.code == "P155"]
    assert "`mlp`" in d.message and "taken by `embed`" in d.message
    assert (d.span.line, d.span.column) == (8, 18)


def test_a_logical_name_that_is_also_a_mesh_axis_is_refused():
    assert errors("axes {\n  tp -> fsdp\n}\n") == [("P150", 4, 3)]


def test_a_name_mapped_to_a_name_is_refused_so_no_cycle_can_be_written():
    assert errors("axes {\n  embed -> fsdp\n  hidden -> embed\n}\n") == [("P151", 5, 13)]


def test_an_entry_naming_an_unknown_mesh_axis_suggests_the_near_one():
    [d] = refused("axes {\n  embed -> fsdq\n}\n")
    assert d.code == "P101" and "did you mean `fsdp`?" in d.help[0]


def test_an_entry_naming_one_axis_twice_is_refused():
    assert errors("axes {\n  embed -> (fsdp, fsdp)\n}\n") == [("P104", 4, 19)]


def test_an_unknown_name_in_a_layout_suggests_a_logical_name():
    [d] = refused('axes {\n  embed -> fsdp\n}\nlayout {\n  "w" -> (embd, _)\n}\n')
    assert d.code == "P101" and "logical name `embd`" in d.message
    assert "did you mean `embed`?" in d.help[0]


def test_one_logical_name_twice_in_a_layout_is_refused():
    assert errors('axes {\n  embed -> fsdp\n}\nlayout {\n  "w" -> (embed, embed)\n}\n') == [
        ("P154", 7, 18)]


@pytest.mark.parametrize("table", ["embed -> fsdp\n  embed -> fsdp",
                                   "embed -> fsdp\n  embed -> (fsdp, tp)",
                                   "embed -> _\n  embed -> tp"])
def test_an_entry_an_earlier_one_always_preempts_is_a_warning(table):
    assert codes(f"axes {{\n  {table}\n}}\n") == ["P152"]


def test_a_narrower_fallback_after_a_wider_entry_is_kept():
    plan = loads("axes {\n  embed -> (fsdp, tp)\n  embed -> fsdp\n}\n")
    assert codes("axes {\n  embed -> (fsdp, tp)\n  embed -> fsdp\n}\n") == []
    assert [e.axes for e in plan.ir.logical_axes] == [("fsdp", "tp"), ("fsdp",)]


def test_the_table_is_part_of_the_fingerprint():
    fsdp = loads('axes {\n  embed -> fsdp\n}\nlayout {\n  "w" -> (fsdp, _)\n}\n')
    tp = loads('axes {\n  embed -> tp\n}\nlayout {\n  "w" -> (fsdp, _)\n}\n')
    assert fsdp.fingerprint != tp.fingerprint


def test_two_axes_tables_are_P114_as_two_stages_statements_are():
    with pytest.raises(PlanError) as caught:
        planc.loads("mesh(fsdp = 2, tp = 2)\nmodel_parallel(batch = fsdp)\n"
                    "axes {\n  embed -> fsdp\n}\naxes {\n  mlp -> tp\n}\n")
    [d] = caught.value.diagnostics
    assert d.code == "P114" and d.span.line == 6 and "`axes` table" in d.message
