r"""Checkpoint tensors renamed by a plan and paired with a model's variables, every problem
found from the headers alone (`planc.checkpoints.renaming`, `planc.checkpoints.binding`)."""

import dataclasses


import planc
from planc.checkpoints.binding import MAX_EACH, Source, bind_checkpoint
from planc.checkpoints.renaming import Renamer
from planc.checkpoints.tensors import Tensor
from planc.diagnostics import Severity
from planc.ir import Rename
from planc.variables import Variable

DP = "mesh(batch = auto)\ndata_parallel\n"

# A small PyTorch-style checkpoint and the JAX-style model it fills.
LLAMA = DP + r'''rename {
    "model\.layers\.(\d+)\.mlp\.up_proj\.weight" -> "layers/\1/mlp/up/kernel" transpose
    "model\.layers\.(?P<i>\d+)\.input_layernorm\.weight" -> "layers/\g<i>/norm/scale"
    "model\.embed_tokens\.weight" -> "embedding/embeddings"
}
'''
TENSORS = [
    Tensor("model.embed_tokens.weight", (32, 8), "float32", "model.safetensors"),
    Tensor("model.layers.0.mlp.up_proj.weight", (16, 8), "float32", "model.safetensors"),
    Tensor("model.layers.0.input_layernorm.weight", (8,), "float32", "model.safetensors"),
    Tensor("model.layers.1.mlp.up_proj.weight", (16, 8), "float32", "model.safetensors"),
    Tensor("model.layers.1.input_layernorm.weight", (8,), "float32", "model.safetensors"),
]
VARIABLES = [
    Variable("embedding/embeddings", (32, 8)),
    Variable("layers/0/mlp/up/kernel", (8, 16)),
    Variable("layers/0/norm/scale", (8,)),
    Variable("layers/1/mlp/up/kernel", (8, 16)),
    Variable("layers/1/norm/scale", (8,)),
]


def ir_of(text):
    return planc.loads(text).ir


def bind(text, tensors, variables=None, **kw):
    return bind_checkpoint(ir_of(text), tensors, variables, **kw)


def t(name, shape=(4, 4), dtype="float32"):
    return Tensor(name, tuple(shape), dtype, "ckpt.safetensors")


def v(path, shape=(4, 4), dtype="float32"):
    return Variable(path, tuple(shape), dtype)


def only(diags, code):
    found = [d for d in diags if d.code == code]
    assert len(found) == 1, [(d.code, d.message) for d in diags]
    return found[0]


# -- renaming -----------------------------------------------------------------------------------

def test_a_matching_name_is_renamed_by_its_template():
    r = Renamer(ir_of(LLAMA).renames)
    assert r.rename("model.layers.12.input_layernorm.weight")[0] == "layers/12/norm/scale"


def test_names_fullmatch_so_a_prefix_or_suffix_is_not_renamed():
    r = Renamer(ir_of(DP + r'rename { "layers\.(\d+)" -> "l/\1" }').renames)
    assert r.rename("model.layers.0") == ("model.layers.0", None)
    assert r.rename("layers.0.weight") == ("layers.0.weight", None)


def test_fullmatch_holds_under_match_search_too():
    r = Renamer(ir_of(DP + 'match search\nrename { "w" -> "x" }').renames)
    assert r.rename("w.bias") == ("w.bias", None)


def test_the_first_rule_in_file_order_wins():
    ir = ir_of(DP + r'rename { "a\.(\d+)" -> "first/\1" } rename { "a\..*" -> "second" }')
    path, rule = Renamer(ir.renames).rename("a.3")
    assert (path, rule.index) == ("first/3", 0)
    assert Renamer(ir.renames).rename("a.x")[0] == "second"


def test_a_group_that_took_no_part_gives_the_empty_text():
    r = Renamer(ir_of(DP + r'rename { "w(_\d)?" -> "k\1" }').renames)
    assert r.rename("w")[0] == "k" and r.rename("w_2")[0] == "k_2"


def test_a_double_backslash_in_a_template_is_one_backslash():
    r = Renamer(ir_of(DP + r'rename { "w" -> "a\\b" }').renames)
    assert r.rename("w")[0] == "a\\b"


def test_a_non_ascii_name_is_matched_as_the_layout_matcher_matches_it():
    # `\w` is ASCII-only in planc's matcher; group extraction agrees, so the name is kept.
    r = Renamer(ir_of(DP + r'rename { "(\w+)" -> "x/\1" }').renames)
    assert r.rename("caf\u00e9") == ("caf\u00e9", None)
    assert r.rename("cafe")[0] == "x/cafe"


def test_a_hundred_thousand_names_rename_in_one_pass():
    ir = ir_of(LLAMA)
    names = [f"model.layers.{i}.mlp.up_proj.weight" for i in range(100_000)]
    out = Renamer(ir.renames).rename_many(names)
    assert out[99_999][0] == "layers/99999/mlp/up/kernel"
    assert all(rule is ir.renames[0] for _, rule in out)


# -- binding: what fills each variable --------------------------------------------------------

def test_a_matching_checkpoint_binds_every_variable_without_a_problem():
    sources, diags = bind(LLAMA, TENSORS, VARIABLES)
    assert diags == ()
    assert [s.variable.path for s in sources] == [x.path for x in VARIABLES]
    assert [s.transpose for s in sources] == [False, True, False, True, False]
    assert sources[1] == Source(VARIABLES[1], TENSORS[1], True, ir_of(LLAMA).renames[0])


def test_sources_follow_the_order_of_the_variables():
    sources, _ = bind(LLAMA, TENSORS, VARIABLES[::-1])
    assert [s.variable.path for s in sources] == [x.path for x in VARIABLES[::-1]]


def test_without_variables_each_tensor_makes_its_own_transposed_variable():
    sources, diags = bind(LLAMA, TENSORS)
    assert diags == ()
    assert [s.variable for s in sources] == VARIABLES


def test_without_variables_dtype_gives_every_variable_that_dtype():
    sources, _ = bind(LLAMA, TENSORS, dtype="bfloat16")
    assert {s.variable.dtype for s in sources} == {"bfloat16"}


def test_a_name_no_rule_matches_keeps_its_name_as_the_path():
    sources, diags = bind(DP, [t("dense/kernel")], [v("dense/kernel")])
    assert diags == () and sources[0].rule is None and not sources[0].transpose


# -- binding: every problem, before any data ------------------------------------------------

def test_p401_a_variable_no_tensor_fills_names_it_and_suggests_the_spare_tensor():
    sources, diags = bind(DP, [t("dense/kernal")], [v("dense/kernel")])
    d = only(diags, "P401")
    assert d.severity is Severity.ERROR and d.variable == "dense/kernel"
    assert "`dense/kernel` (4, 4) float32 gets no tensor" in d.message
    assert any("dense/kernal" in h for h in d.help)
    assert sources == ()


def test_p401_without_a_rename_block_points_at_the_start_of_the_plan():
    _, diags = bind(DP, [], [v("x")])
    d = only(diags, "P401")
    assert (d.span.line, d.span.column) == (1, 1)


def test_p401_points_at_the_rename_block_when_the_plan_has_one():
    _, diags = bind(DP + '\nrename { "q" -> "r" }', [t("q")], [v("r"), v("x")])
    d = only(diags, "P401")
    assert (d.span.line, d.span.column, d.span.end_column) == (4, 1, 7)


def test_p402_a_tensor_no_variable_takes_is_a_warning():
    _, diags = bind(DP, [t("a"), t("optimizer/m")], [v("a")])
    d = only(diags, "P402")
    assert d.severity is Severity.WARNING and "`optimizer/m`" in d.message


def test_p402_is_an_error_when_strict():
    _, diags = bind(DP, [t("a"), t("optimizer/m")], [v("a")], strict=True)
    assert only(diags, "P402").severity is Severity.ERROR


def test_p403_two_tensors_renamed_onto_one_path_names_both_and_the_rule():
    text = DP + r'rename { "a\.(\d+)" -> "x" }'
    _, diags = bind(text, [t("a.0"), t("a.1")], [v("x")])
    d = only(diags, "P403")
    assert "`a.0` and `a.1` are both renamed onto `x`" in d.message
    assert (d.span.line, d.span.column) == (3, 10)
    assert not [x for x in diags if x.code == "P401"]  # the clash says it already


def test_p403_is_found_from_the_checkpoint_alone():
    text = DP + r'rename { "a\.(\d+)" -> "x" }'
    _, diags = bind(text, [t("a.0"), t("a.1"), t("a.2")])
    assert "(and 1 more)" in only(diags, "P403").message


def test_p404_shape_mismatch_names_both_shapes_the_tensor_the_path_and_the_rule_line():
    text = DP + r'rename {' + '\n' + r'  "w\.(\d+)" -> "dense_\1/kernel"' + '\n}'
    _, diags = bind(text, [t("w.0", (8, 5))], [v("dense_0/kernel", (8, 6))])
    d = only(diags, "P404")
    assert d.message == ("tensor `w.0` has shape (8, 5), but variable `dense_0/kernel` "
                         "has shape (8, 6)")
    assert (d.span.line, d.label) == (4, "renamed by this rule")


def test_p404_on_a_transposed_pytorch_weight_says_add_transpose():
    text = DP + r'rename { "w" -> "k" }'
    _, diags = bind(text, [t("w", (16, 8))], [v("k", (8, 16))])
    assert only(diags, "P404").help == ("add `transpose` to this rename rule",)


def test_p404_without_a_rule_suggests_a_rename_rule_with_transpose():
    _, diags = bind(DP, [t("up.weight", (16, 8))], [v("up.weight", (8, 16))])
    assert 'add a rename rule with `transpose`: `"up\\.weight" -> "up.weight" transpose`' in \
        only(diags, "P404").help[0]


def test_p404_under_transpose_compares_the_transposed_shape():
    text = DP + r'rename { "w" -> "k" transpose }'
    _, diags = bind(text, [t("w", (16, 8))], [v("k", (16, 8))])
    d = only(diags, "P404")
    assert "(16, 8) (read transposed: (8, 16))" in d.message
    assert d.help[0].startswith("remove `transpose`")


def test_p405_dtype_mismatch_is_never_cast_silently():
    sources, diags = bind(DP, [t("w", dtype="bfloat16")], [v("w", dtype="float32")])
    d = only(diags, "P405")
    assert "`w` is bfloat16, but variable `w` is float32" in d.message
    assert d.help == ('pass dtype="float32" to plan.load to cast it while loading',)
    assert sources == ()


def test_dtype_equal_to_the_variables_allows_the_cast():
    sources, diags = bind(DP, [t("w", dtype="bfloat16")], [v("w", dtype="float32")],
                          dtype="float32")
    assert diags == () and sources[0].tensor.dtype == "bfloat16"


def test_p405_a_cast_to_another_dtype_than_the_variables_is_refused():
    _, diags = bind(DP, [t("w", dtype="bfloat16")], [v("w", dtype="float32")],
                    dtype="float16")
    assert "dtype=float16 asks to cast" in only(diags, "P405").message


def test_a_numpy_dtype_is_read_as_its_name():
    import numpy as np

    sources, diags = bind(DP, [t("w", dtype="float16")], [v("w")], dtype=np.float32)
    assert diags == () and len(sources) == 1


def test_p406_transpose_on_a_tensor_that_is_not_2d():
    text = DP + r'rename { "(.*)\.weight" -> "\1/w" transpose }'
    _, diags = bind(text, [t("norm.weight", (8,))], [v("norm/w", (8,))])
    d = only(diags, "P406")
    assert "tensor `norm.weight` of shape (8,)" in d.message
    assert (d.span.line, d.span.column) == (3, 10)


def test_p407_a_rule_that_renames_no_tensor_is_a_warning():
    text = DP + 'rename {\n "a" -> "x"\n "typo" -> "y"\n}'
    _, diags = bind(text, [t("a")])
    d = only(diags, "P407")
    assert d.severity is Severity.WARNING and d.span.line == 5


def test_every_problem_is_reported_at_once():
    text = DP + r'rename { "w" -> "k" }'
    _, diags = bind(text, [t("w", (3, 3)), t("extra")], [v("k"), v("missing")])
    assert sorted(d.code for d in diags) == ["P401", "P402", "P404"]


def test_many_problems_of_one_kind_are_listed_up_to_a_limit_and_counted():
    n = MAX_EACH + 7
    _, diags = bind(DP, [], [v(f"x{i}") for i in range(n)])
    assert len(diags) == MAX_EACH + 1
    assert diags[-1].message == "... and 7 more variables that get no tensor"


def test_a_hundred_thousand_tensors_bind_to_their_variables():
    text = DP + r'rename { "model\.layers\.(\d+)\.w" -> "layers/\1/kernel" transpose }'
    n = 100_000
    tensors = [t(f"model.layers.{i}.w", (2, 3)) for i in range(n)]
    variables = [v(f"layers/{i}/kernel", (3, 2)) for i in range(n)]
    sources, diags = bind(text, tensors, variables)
    assert diags == () and len(sources) == n
    assert sources[-1].tensor.name == "model.layers.99999.w" and sources[-1].transpose


def test_renames_made_by_hand_work_as_the_checkers():
    ir = ir_of(DP)
    ir = dataclasses.replace(ir, renames=(Rename(0, r"a(\d)", r"b\1"),))
    sources, diags = bind_checkpoint(ir, [t("a1")], [v("b1")])
    assert diags == () and sources[0].rule.template == r"b\1"


def test_a_variable_whose_tensor_is_refused_is_not_reported_twice():
    text = DP + r'rename { "(.*)\.weight" -> "\1/w" transpose }'
    _, diags = bind(text, [t("norm.weight", (8,))], [v("norm/w", (8,))])
    assert [d.code for d in diags] == ["P406"]
