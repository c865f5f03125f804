"""`planc.frozen.Frozen`, what AST nodes and IR objects are made of, behaves as the frozen
dataclasses it replaced: equality and hashing over the compared fields and the class,
no assignment, a `repr` of the shown fields, pickling and copying, and the
`dataclasses` view (fields with their `compare` and `repr`, `replace`); its one
constructor takes the declared fields as a dataclass's `__init__` does."""

import copy
import dataclasses
import pickle

import pytest

import planc
from planc.frozen import Frozen, _RecordClass
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
        ("pattern_span", False), ("raw", True), ("names", True)]
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


class _Point(Frozen):
    """A record declared as the package's are: annotated fields, defaults after them."""

    x: int
    y: int = 0
    label: str = ""


class _Labelled(_Point):
    colour: str = "red"


def test_the_constructor_takes_the_fields_by_position_or_by_name():
    assert _Point(1, 2, "p") == _Point(x=1, y=2, label="p") == _Point(1, label="p", y=2)
    assert (_Point(1).y, _Point(1).label) == (0, "")
    assert _Labelled(1, 2).colour == "red" and _Labelled(1, colour="blue").colour == "blue"
    assert _Labelled._fields == ("x", "y", "label", "colour")  # a base's fields first
    assert ast.Split(S1, ()) == ast.Split(span=S1, axes=(), block=None, grouped=False)


def test_missing_extra_or_unknown_arguments_are_refused_as_a_dataclass_refuses_them():
    with pytest.raises(TypeError, match=r"^_Point.__new__\(\) missing 1 required positional "
                                        r"argument: 'x'$"):
        _Point()
    with pytest.raises(TypeError, match=r"^Name.__new__\(\) missing 1 required positional "
                                        r"argument: 'text'$"):
        ast.Name(S1)
    with pytest.raises(TypeError, match=r"^_Point.__new__\(\) takes from 2 to 4 positional "
                                        r"arguments but 5 were given$"):
        _Point(1, 2, "p", 4)
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'z'$"):
        _Point(1, z=3)
    with pytest.raises(TypeError, match=r"multiple values for argument 'x'$"):
        _Point(1, x=2)
    # Refused on a class's first construction as on every later one.
    with pytest.raises(TypeError, match=r"^_Labelled.__new__\(\) missing"):
        _Labelled()
    assert _Labelled(5).x == 5


def test_the_declaration_is_checked_when_the_class_is_made():
    with pytest.raises(TypeError, match="'y' without a default follows a field with one"):
        class _Bad(Frozen):
            x: int = 0
            y: int
    with pytest.raises(TypeError, match="private state goes in __slots__"):
        class _Private(Frozen):
            _x: int


def test_fields_are_slots_and_private_state_is_not_a_field():
    assert _Point.__slots__ == ("x", "y", "label") and not hasattr(_Point(1), "__dict__")
    assert Mesh._fields == ("axes", "span", "slices_span") and "_names" in Mesh.__slots__
    assert [f.name for f in dataclasses.fields(Mesh)] == ["axes", "span", "slices_span"]


def test_post_init_derives_state_on_every_construction():
    mesh = Mesh((MeshAxis("a", 2), MeshAxis("b", 4)))
    assert mesh.names == ("a", "b")
    assert pickle.loads(pickle.dumps(mesh)).names == ("a", "b")
    assert copy.deepcopy(mesh).names == ("a", "b")
    with pytest.raises(AttributeError):
        mesh._names = ()  # written while built, refused after


def test_a_default_made_afresh_is_a_new_object_for_each_record():
    from planc.resolve.memory import MemorySummary
    from planc.resolve.report import Report

    memory = MemorySummary(0, 0, 8, 0, 0.0, 1.0)
    first, second = (Report("p", "p.kd", (), (), 8, {}, memory) for _ in range(2))
    assert first.sources == {} and first.sources is not second.sources
    assert Report("p", "p.kd", (), (), 8, {}, memory, sources=None).sources is None


def test_each_class_builds_records_of_its_own_whichever_is_built_first():
    # A subclass's constructor is its own, with its own fields, made on its first use.
    class _Base(Frozen):
        a: int

    class _Sub(_Base):
        b: int = 2

    assert type(_Sub(1)) is _Sub and _Sub(1).b == 2
    assert type(_Base(1)) is _Base and _Base._fields == ("a",)
    assert _Sub(1) != _Base(1) and _Sub(1, 3) == _Sub(a=1, b=3)


def test_written_templates_module_is_what_template_source_writes():
    from pathlib import Path

    import planc._frozen_templates
    from planc.frozen import templates_module

    assert Path(planc._frozen_templates.__file__).read_text(encoding="utf-8") == \
        templates_module()


@pytest.mark.parametrize("arity", [0, 1, 2, 5, 16])
def test_written_template_is_the_code_the_template_source_compiles_to(arity):
    import planc._frozen_templates
    from planc.frozen import template_source

    written = getattr(planc._frozen_templates, f"new_{arity}").__code__
    namespace: dict = {}
    exec(compile(template_source(arity), "<test>", "exec", dont_inherit=True), namespace)
    compiled = namespace["__new__"].__code__
    for attr in ("co_code", "co_consts", "co_names", "co_varnames", "co_argcount",
                 "co_flags", "co_stacksize"):
        assert getattr(written, attr) == getattr(compiled, attr), attr


def test_records_past_the_written_templates_are_built_by_a_compiled_one():
    from planc.frozen import WRITTEN

    fields = [f"f{i}" for i in range(WRITTEN + 2)]
    Wide = _RecordClass("Wide", (Frozen,), {"__annotations__": dict.fromkeys(fields, "int")})
    record = Wide(*range(len(fields)))
    assert record._values(record) == tuple(range(len(fields)))
    assert Wide(*range(len(fields))) == record
