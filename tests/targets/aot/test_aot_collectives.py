"""The collectives of compiled HLO, by kind and mesh axes (`planc.targets.aot.collectives`).

The snippets are in the forms XLA writes (explicit, iota and mesh replica groups; TPU's
reduce-scatter fusion and cloned asynchronous collectives); `test_aot_cpu.py` reads the
HLO of real compiles.
"""

import pytest

from planc.targets.aot.collectives import collectives

MESH, NAMES = (4, 2), ("fsdp", "model")


def module(*entry_lines, extra=""):
    body = "\n".join(f"  {line}" for line in entry_lines)
    return (f"HloModule m\n\n{extra}\nENTRY %main (p: f32[8]) -> f32[8] {{\n{body}\n"
            f"  ROOT %r = f32[8]{{0}} copy(%p)\n}}\n")


def found(hlo, shape=MESH, names=NAMES):
    return [(c.kind, c.axes, c.count, c.bytes, c.group_size) for c in
            collectives(hlo, shape, names)]


@pytest.mark.parametrize("groups, axes", [
    ("{{0,2,4,6},{1,3,5,7}}", ("fsdp",)),
    ("{{0,1},{2,3},{4,5},{6,7}}", ("model",)),
    ("[2,4]<=[4,2]T(1,0)", ("fsdp",)),
    ("[4,2]<=[8]", ("model",)),
    ("[1,8]<=[8]", ("fsdp", "model")),
    ("{}", ("fsdp", "model")),
    ("mesh['a'=4,'b'=1,'c'=2] {'a'}", ("fsdp",)),
    ("mesh['a'=2,'b'=4], device_ids=([4,2]T(1,0)) {'a'}", ("model",)),
    ("mesh[a=4,b=2] {b}", ("model",)),
])
def test_replica_groups_in_every_form_name_the_mesh_axes(groups, axes):
    hlo = module(f"%ag = f32[16,8]{{1,0}} all-gather(%p), channel_id=1, "
                 f"replica_groups={groups}, dimensions={{0}}, use_global_device_ids=true")
    size = {"fsdp": 4, "model": 2}
    assert found(hlo) == [("all-gather", axes, 1, 512, 8 if len(axes) == 2 else size[axes[0]])]


def test_a_sub_axis_is_part_of_its_axis():
    hlo = module("%ar = f32[4]{0} all-reduce(%p), channel_id=1, "
                 "replica_groups=mesh['a'=4,'b'=2] {'a':(1)2}, to_apply=%add")
    (c,) = collectives(hlo, MESH, NAMES)
    assert (c.axes, c.group_size, c.partial) == (("fsdp",), 2, True)


def test_a_tuple_result_counts_every_element():
    hlo = module("%ar = (f32[16,8]{1,0}, bf16[4]{0}, f32[]) all-reduce(%a, %b, %c), "
                 "channel_id=5, replica_groups=[2,4]<=[4,2]T(1,0), to_apply=%add")
    assert found(hlo) == [("all-reduce", ("fsdp",), 1, 16 * 8 * 4 + 4 * 2 + 4, 4)]


def test_an_asynchronous_start_counts_its_result_not_its_operand():
    hlo = module("%ags = (f32[2,8]{1,0}, f32[8,8]{1,0}) all-gather-start(%p), channel_id=2, "
                 "replica_groups={{0,2,4,6},{1,3,5,7}}, dimensions={0}",
                 "%agd = f32[8,8]{1,0} all-gather-done(%ags)",
                 "%cps = (f32[48,4]{1,0}, f32[48,4]{1,0}, u32[], u32[]) "
                 "collective-permute-start(%x), channel_id=3, "
                 "source_target_pairs={{0,2},{2,4},{4,6},{1,3},{3,5},{5,7}}")
    assert found(hlo) == [("all-gather", ("fsdp",), 1, 256, 4),
                          ("collective-permute", ("fsdp",), 1, 48 * 4 * 4, None)]


def test_clones_of_one_asynchronous_collective_count_once():
    extra = ("%start (a: bf16[8,4]) -> bf16[8,16] {\n"
             "  %a = bf16[8,4]{1,0} parameter(0)\n"
             "  %ag.1 = bf16[8,16]{1,0:T(8,128)(2,1)} all-gather(%a), channel_id=3, "
             "replica_groups=[2,4]<=[4,2]T(1,0), dimensions={1}, use_global_device_ids=true\n"
             "  ROOT %cc = bf16[8,16]{1,0} custom-call(%ag.1), "
             "custom_call_target=\"AsyncCollectiveStart\"\n}\n\n"
             "%done (a: bf16[8,4]) -> bf16[8,16] {\n"
             "  %a = bf16[8,4]{1,0} parameter(0)\n"
             "  %ag.2 = bf16[8,16]{1,0} all-gather(%a), channel_id=3, "
             "replica_groups=[2,4]<=[4,2]T(1,0), dimensions={1}, use_global_device_ids=true\n"
             "  ROOT %cc = bf16[8,16]{1,0} custom-call(%ag.2), "
             "custom_call_target=\"AsyncCollectiveDone\"\n}\n")
    hlo = module("%s = bf16[8,16]{1,0} fusion(%p), kind=kCustom, calls=%start",
                 "%d = bf16[8,16]{1,0} fusion(%p), kind=kCustom, calls=%done", extra=extra)
    assert found(hlo) == [("all-gather", ("fsdp",), 1, 8 * 16 * 2, 4)]


def test_tpu_reduce_scatter_fusion_is_a_reduce_scatter_of_its_result():
    extra = ("%all-reduce-scatter (input: f32[4096,2048]) -> f32[1024,2048] {\n"
             "  %input = f32[4096,2048]{1,0} parameter(0)\n"
             "  %ar = f32[4096,2048]{1,0} all-reduce(%input), channel_id=7, "
             "replica_groups={{0,2,4,6},{1,3,5,7}}, use_global_device_ids=true, to_apply=%add\n"
             "  ROOT %ds = f32[1024,2048]{1,0} dynamic-slice(%ar, %i, %j), "
             "dynamic_slice_sizes={1024,2048}\n}\n")
    hlo = module("%f = f32[1024,2048]{1,0:T(8,128)} fusion(%g), kind=kCustom, "
                 "calls=%all-reduce-scatter", extra=extra)
    assert found(hlo) == [("reduce-scatter", ("fsdp",), 1, 1024 * 2048 * 4, 4)]


def test_a_collective_in_a_loop_counts_once_per_known_trip():
    extra = ("%body (s: (s32[], f32[8])) -> (s32[], f32[8]) {\n"
             "  %s = (s32[], f32[8]) parameter(0)\n"
             "  %x = f32[8]{0} get-tuple-element(%s), index=1\n"
             "  %ar = f32[8]{0} all-reduce(%x), channel_id=9, replica_groups=[4,2]<=[8], "
             "to_apply=%add\n"
             "  ROOT %t = (s32[], f32[8]) tuple(%i, %ar)\n}\n\n"
             "%cond (s: (s32[], f32[8])) -> pred[] {\n"
             "  %s = (s32[], f32[8]) parameter(0)\n"
             "  ROOT %lt = pred[] compare(%i, %n), direction=LT\n}\n")
    hlo = module('%w = (s32[], f32[8]) while(%init), condition=%cond, body=%body, '
                 'backend_config={"known_trip_count":{"n":"12"}}', extra=extra)
    assert found(hlo) == [("all-reduce", ("model",), 12, 12 * 32, 2)]


def test_kinds_come_in_a_fixed_order_and_unreadable_groups_are_said():
    hlo = module("%a2a = f32[8,8]{1,0} all-to-all(%p), channel_id=1, "
                 "replica_groups=[4,2]<=[8], dimensions={0}",
                 "%ar = f32[2]{0} all-reduce(%p), channel_id=2, replica_groups=<<odd>>, "
                 "to_apply=%add",
                 "%ag = f32[2]{0} all-gather(%p), channel_id=3, replica_groups=[1,8]<=[8], "
                 "dimensions={0}")
    kinds = [(k, axes) for k, axes, *_ in found(hlo)]
    assert kinds == [("all-gather", ("fsdp", "model")), ("all-reduce", None),
                     ("all-to-all", ("model",))]


def test_one_slice_s_program_numbers_its_own_devices_and_dcn_transfers_span_slices():
    # Global mesh (fsdp = 4, model = 2) with `model` across 2 slices: slice 0 holds the
    # mesh positions 0, 2, 4, 6 (model = 0), which its program numbers 0..3.
    hlo = module("%ag = f32[8,8]{1,0} all-gather(%p), channel_id=1, "
                 "replica_groups={{0,1,2,3}}, dimensions={0}",
                 '%s = (f32[512,8]{1,0}, u32[], token[]) send(%x, %t), channel_id=2, '
                 'is_host_transfer=true, frontend_attributes={_xla_host_transfer_handler_name='
                 '"xla_megascale_runtime",_xla_host_transfer_rendezvous="all-reduce.2_0",'
                 '_xla_megascale_reduce_operation="SUM",_xla_megascale_target="{1,2}x{0:3}",'
                 '_xla_megascale_transfer_type="ALL_REDUCE"}',
                 '%r = (f32[512,8]{1,0}, u32[], token[]) recv(%t), channel_id=3, '
                 'is_host_transfer=true, frontend_attributes={_xla_host_transfer_handler_name='
                 '"xla_megascale_runtime",_xla_host_transfer_rendezvous="all-reduce.2_0",'
                 '_xla_megascale_transfer_type="ALL_REDUCE"}')
    got = [(c.kind, c.axes, c.count, c.bytes, c.group_size) for c in collectives(
        hlo, MESH, NAMES, slice_positions=[0, 2, 4, 6], slice_axes=("model",))]
    assert got == [("all-gather", ("fsdp",), 1, 256, 4),
                   ("all-reduce", ("model",), 1, 512 * 8 * 4, 2)]
