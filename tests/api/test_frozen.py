"""`planc.frozen.Frozen`, what AST nodes and IR objects are made of, behaves as the frozen
dataclasses it replaced: equality and hashing over the compared fields and the class,
no assignment, a `repr` of the shown fields, pickling and copying, and the
`dataclasses` view (fields with their `compare` and `repr`, `replace`)."""

import copy
import dataclasses
import pickle

import pytest

import planc
from planc.diagnostics import Span
from planc.ir import Dim, Mesh, MeshAxis, PlanIR, Rule
from planc.syntax import ast

S1 = Span("a.kd", 1, 1, 1, 4)
S2 = Span("a.kd", 2, 1, 2, 4)


def test_nodes_compare_by_class_and_every_field():
    assert ast.Name(S1, "x") == ast.Name(S1, "x")
    assert hash(ast.Name(S1, "x")) == hash(ast.Name(S1, "x"))
    assert ast.Name(S1, "x") != ast.Name(S1, "y")
    assert ast.Name(S1, "x") != ast.Name(S2, "x")  # the span is part of an AST node
    assert ast.Unsplit(S1) != ast.Ellipsis(S1) != ast.Replicated(S1)
    assert ast.Name(S1, "x") != ("x",) and ast.Name(S1, "x") != ast.StrLit(S1, "x", "x")


def test_ir_objects_compare_by_meaning_not_place():
    assert Dim(("model",), 1, S1) == Dim(("model",), 1, S2)
    assert hash(Dim(("model",), 1, S1)) == hash(Dim(("model",), 1, S2))
    assert Dim(("model",), 1, S1) != Dim(("model",), 2, S1)
    assert MeshAxis("x", 2, S1) == MeshAxis("x", 2, None)
    assert MeshAxis("x", 2, S1, slices=2) != MeshAxis("x", 2, S1)


def test_fields_cannot_be_assigned_or_deleted():
    name = ast.Name(S1, "x")
    with pytest.raises(AttributeError):
        name.text = "y"
    with pytest.raises(AttributeError):
        del name.span
    with pytest.raises(AttributeError):
        name.other = 1  # slots: no attribute beyond the fields
    assert name.text == "x"


def test_repr_shows_the_shown_fields_in_order():
    assert (repr(ast.Split(S1, (), None))
            == f"Split(span={S1!r}, axes=(), block=None, grouped=False)")
    plan = planc.loads("mesh(batch = auto)\ndata_parallel")
    assert "sources=" not in repr(plan.ir) and "diagnostics=" not in repr(plan.ir)
    assert repr(plan.ir).startswith("PlanIR(name=")


def test_pickle_and_copy_give_equal_objects():
    plan = planc.loads('mesh(batch = 4)\nmodel_parallel(batch = batch)\n'
                       'layout {\n    "a" -> (batch, _)\n    default -> replicated\n}')
    for value in (plan.ir, plan.ir.rules[0], ast.Split(S1, (ast.Name(S1, "x"),), None, True)):
        for again in (pickle.loads(pickle.dumps(value)), copy.copy(value), copy.deepcopy(value)):
            assert again == value and type(again) is type(value)
    assert pickle.loads(pickle.dumps(plan.ir)).mesh.names == ("batch",)


def test_the_dataclasses_view_matches_the_fields():
    split = ast.Split(S1, (ast.Name(S1, "x"),))
    assert dataclasses.is_dataclass(split) and dataclasses.is_dataclass(ast.Split)
    assert [f.name for f in dataclasses.fields(split)] == ["span", "axes", "block", "grouped"]
    assert dataclasses.replace(split, grouped=True) == ast.Split(S1, split.axes, None, True)
    assert [(f.name, f.compare) for f in dataclasses.fields(Rule)] == [
        ("index", True), ("pattern", True), ("layout", True), ("span", False),
        ("pattern_span", False), ("raw", True)]
    assert {f.name for f in dataclasses.fields(PlanIR) if not f.repr} == {"sources",
                                                                         "diagnostics"}


def test_replace_builds_the_record_anew():
    mesh = Mesh((MeshAxis("a", None), MeshAxis("b", 2)), S1)
    bound = dataclasses.replace(mesh, axes=(MeshAxis("c", 4),))
    assert bound.names == ("c",) and bound.span == S1 and mesh.names == ("a", "b")
    assert mesh._replace(span=None) == mesh and mesh._replace(span=None).span is None


def test_records_can_be_weakly_referenced():
    import weakref

    plan = planc.loads("mesh(batch = auto)\ndata_parallel")
    node = ast.Auto(S1)
    assert weakref.ref(plan.ir)() is plan.ir and weakref.ref(node)() is node


def test_a_record_is_of_its_class_once_built():
    # Built as its class's open twin, every record ends up an instance of the class itself.
    plan = planc.loads('mesh(batch = 4)\nmodel_parallel(batch = batch)\n'
                       'layout {\n    "a" -> (batch, _)\n}')
    rule = plan.ir.rules[0]
    assert type(rule) is Rule and type(rule.layout.alternatives[0].head[0]) is Dim
    assert type(dataclasses.replace(rule, index=3)) is Rule
    assert type(pickle.loads(pickle.dumps(rule))) is Rule
    with pytest.raises(AttributeError):
        rule.layout.alternatives[0].head[0].block = 2
