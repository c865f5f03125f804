"""The `axes` table resolves exactly as Flax's own `logical_to_mesh_axes` does with the
same rules: checked against Flax itself, on tables and names drawn at random and on
MaxText-style fallbacks."""

import flax.linen as nn
import pytest
from hypothesis import given, settings, strategies as st

import planc
from planc.ir import LogicalAxis, assign_logical

AXES = ("data", "fsdp", "tp", "ep")
NAMES = ("batch", "embed", "mlp", "heads", "kv", "vocab")

entry = st.tuples(st.sampled_from(NAMES),
                  st.lists(st.sampled_from(AXES), unique=True, max_size=3).map(tuple))


def flax_rule(name, axes):
    return (name, None if not axes else axes[0] if len(axes) == 1 else axes)


def normal(spec):
    return tuple(None if not e else (e,) if isinstance(e, str) else tuple(e) for e in spec)


@settings(max_examples=300, deadline=None)
@given(st.lists(entry, max_size=8),
       st.lists(st.sampled_from(NAMES + (None,)), max_size=4).filter(
           lambda ns: len([n for n in ns if n]) == len({n for n in ns if n})))
def test_assign_logical_is_flax_logical_to_mesh_axes(table, names):
    ours = assign_logical(tuple(LogicalAxis(n, a) for n, a in table), names)
    theirs = nn.logical_to_mesh_axes(names, tuple(flax_rule(n, a) for n, a in table))
    assert normal(a or () for a in ours) == normal(theirs)


def test_a_written_layout_gets_flaxs_partition_spec():
    rules = (("mlp", ("fsdp", "tp")), ("embed", ("fsdp", "tp")), ("embed", "fsdp"),
             ("heads", "tp"), ("kv", None))
    table = "\n".join(f"  {n} -> {a if isinstance(a, str) else '_' if a is None else '(' + ', '.join(a) + ')'}"
                      for n, a in rules)
    plan = planc.loads(f"mesh(fsdp = 2, tp = 4)\nmodel_parallel(batch = fsdp)\naxes {{\n{table}\n}}\n"
                       'layout {\n  "q" -> (embed, heads, kv)\n  "w" -> (embed, mlp)\n}\n')
    for path, names, shape in (("q", ("embed", "heads", "kv"), (8, 8, 8)),
                               ("w", ("embed", "mlp"), (8, 8))):
        want = nn.logical_to_mesh_axes(names, rules)
        assert normal(plan.partition_spec(path, shape)) == normal(want)


@pytest.mark.parametrize("names", [("embed", "mlp"), ("mlp", "embed"), ("vocab", "embed")])
def test_maxtext_style_fallbacks_match_flax(names):
    rules = (("mlp", ("fsdp_transpose", "tensor")), ("vocab", ("tensor",)),
             ("embed", ("fsdp", "fsdp_transpose", "sequence")),
             ("embed", ("fsdp", "sequence")))
    table = tuple(LogicalAxis(n, a) for n, a in rules)
    assert normal(a or () for a in assign_logical(table, names)) == normal(
        nn.logical_to_mesh_axes(names, rules))
