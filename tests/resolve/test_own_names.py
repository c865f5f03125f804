"""Variables that name their own dimensions (Flax) are laid out by those names through the
plan's `axes` table where no path rule matches them; a path rule still wins, and what
Flax would leave unsplit in silence is said."""

import planc
from planc import Variable
from planc.resolve.resolution import Reason

TABLE = ("mesh(fsdp = 4, tp = 2)\nmodel_parallel(batch = fsdp)\n"
         "axes {\n  embed -> fsdp\n  mlp -> tp\n  vocab -> tp\n  q_heads -> tp\n"
         "  heads -> tp\n  kv -> _\n  norm -> _\n}\n")


def report(text: str, model="models_flax:nnx_decoder", devices=8):
    return planc.loads(text).validate(model, devices)


def layouts(rep) -> dict:
    return {a.variable.path: a.layout.axes for a in rep.assignments}


def test_a_plan_of_only_a_table_lays_out_a_flax_model():
    rep = report(TABLE)
    assert not rep.diagnostics
    got = layouts(rep)
    assert got["layers/0/wi/kernel"] == ("fsdp", "tp")
    assert got["layers/1/wo/kernel"] == ("tp", "fsdp")
    assert got["layers/0/query"] == ("fsdp", "tp", None)
    assert got["layers/0/norm/scale"] == (None,)


def test_a_path_rule_overrides_the_variables_own_names():
    rep = report(TABLE + 'layout {\n  "head/kernel" -> (tp, fsdp)\n}\n')
    [head] = [a for a in rep.assignments if a.variable.path == "head/kernel"]
    assert head.layout.axes == ("tp", "fsdp") and head.rule.pattern == "head/kernel"
    [wi] = [a for a in rep.assignments if a.variable.path == "layers/0/wi/kernel"]
    assert wi.rule.is_own_names and wi.rule.names == ("embed", "mlp")


def test_own_names_come_before_default():
    rep = report(TABLE + "layout {\n  default -> replicated\n}\n")
    assert layouts(rep)["layers/0/wi/kernel"] == ("fsdp", "tp")


def test_explain_says_which_decided_and_shows_each_name_beside_its_axes():
    plan = planc.loads(TABLE + 'layout {\n  "head/kernel" -> (tp, fsdp)\n}\n')
    rows = {r["path"]: r for r in plan.validate("models_flax:nnx_decoder", 8).to_dict()["variables"]}
    assert rows["layers/0/wi/kernel"]["logical"] == ["embed", "mlp"]
    assert rows["layers/0/wi/kernel"]["rule"]["own_names"] is True
    assert "logical" not in rows["head/kernel"] and "own_names" not in rows["head/kernel"]["rule"]


def test_the_explain_table_shows_logical_names_and_own_names(capsys, tmp_path):
    from planc.cli import main

    path = tmp_path / "p.kd"
    path.write_text(TABLE)
    assert main(["explain", str(path), "--model", "models_flax:nnx_decoder", "--devices",
                 "8"]) == 0
    out = capsys.readouterr().out
    assert "(embed:fsdp, mlp:tp)" in out and "own names" in out


def test_a_name_the_table_lacks_is_a_warning_with_its_bytes():
    rep = report(TABLE.replace("  q_heads -> tp\n", ""))
    found = [d for d in rep.diagnostics if d.code == "P343"]
    assert found and "`q_heads`" in found[0].message and "KiB whole" in found[0].message
    assert layouts(rep)["layers/0/query"] == ("fsdp", None, None)


def test_names_that_do_not_fit_the_rank_are_an_error_naming_the_variable():
    model = [Variable("w", (4, 4), "float32", ("embed",))]
    rep = report(TABLE, model)
    [d] = [d for d in rep.diagnostics if d.code == "P344"]
    assert d.is_error and d.variable == "w" and "names 1 dimension" in d.message


def test_the_names_of_a_misfit_are_written_in_one_pair_of_parentheses():
    rep = report(TABLE, [Variable("w", (4, 4), "float32", ("embed",)),
                         Variable("v", (4, 4), "float32", ("embed", "embed"))])
    messages = [d.message for d in rep.diagnostics if d.code == "P344"]
    assert sorted(messages) == ["`v` names two dimensions `embed` (embed, embed)",
                                "`w` [4, 4] names 1 dimension (embed) but has 2"]


def test_one_name_on_two_dimensions_is_an_error():
    rep = report(TABLE, [Variable("w", (4, 4), "float32", ("embed", "embed"))])
    assert [d.code for d in rep.diagnostics if d.is_error] == ["P344"]


def test_a_taken_name_of_a_variable_warns_with_the_entries_that_were_taken():
    rep = report(TABLE, [Variable("w", (4, 4), "float32", ("mlp", "heads"))])
    [d] = [d for d in rep.diagnostics if d.code == "P155"]
    assert "`heads`" in d.message and d.variable == "w"
    assert layouts(rep)["w"] == ("tp", None)


def test_an_unused_name_is_a_note():
    rep = report(TABLE.replace("  norm -> _\n", "  norm -> _\n  experts -> tp\n"))
    [d] = [d for d in rep.diagnostics if d.code == "P345"]
    assert d.severity.value == "note" and "`experts`" in d.message


def test_ten_thousand_unused_names_are_one_note_naming_the_first_few():
    unused = "".join(f"  unused_{i} -> tp\n" for i in range(10_000))
    rep = report(TABLE.replace("  norm -> _\n", "  norm -> _\n" + unused))
    [d] = [d for d in rep.diagnostics if d.code == "P345"]
    assert d.message.startswith("10,000 logical names, `unused_0`, `unused_1`, `unused_2`, "
                                "`unused_3`, `unused_4` and 9995 more, are written in no layout")
    assert len(d.secondary) == 4


def test_a_variable_indivisible_by_its_names_axes_is_P303():
    rep = report(TABLE, [Variable("w", (6, 4), "float32", ("embed", "mlp"))])
    [d] = [d for d in rep.diagnostics if d.is_error]
    assert d.code == "P303" and "`w`" in d.message


def test_the_resolver_says_own_names_decided():
    plan = planc.loads(TABLE)
    from planc.resolve import Resolver

    rule, reason = Resolver(plan.ir).decide("w", (), ("embed", "mlp"))
    assert reason is Reason.OWN_NAMES and rule.names == ("embed", "mlp")
    assert "own logical names" in reason.sentence(rule, (), 2)


def test_two_resolvers_of_one_plan_do_not_share_a_rule_made_of_other_names():
    plan = planc.loads(TABLE)
    a = plan.validate([Variable("w", (8, 8), "float32", ("embed", "mlp"))], 8)
    b = plan.validate([Variable("w", (8, 8), "float32", ("mlp", "embed"))], 8)
    assert layouts(a)["w"] == ("fsdp", "tp") and layouts(b)["w"] == ("tp", "fsdp")


def test_an_indivisible_dimension_names_the_logical_name_that_took_the_axis():
    plan = planc.loads("mesh(fsdp = 4, tp = 2)\nmodel_parallel(batch = fsdp)\n"
                       'axes {\n  embed -> fsdp\n}\nlayout {\n  "w" -> (embed, _)\n}\n')
    [d] = plan.validate([Variable("w", (6, 4))], 8).diagnostics
    assert d.code == "P303" and d.message.endswith(
        "not divisible by `fsdp` (size 4) (what `embed` maps to)")
