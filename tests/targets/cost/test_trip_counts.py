"""The HLO reader (`planc.targets.aot.hlo`) finds each loop's trip count: XLA:CPU's
`known_trip_count`, or read from the loop's own shape as XLA:TPU leaves it."""

from planc.targets.aot import hlo

# XLA:TPU's form: no known_trip_count; the counter starts at a constant through copies,
# the condition compares it with a constant, the body's fused add steps it by one.
TPU_LOOP = """
%cond (p.1: (s32[], f32[4])) -> pred[] {
  %limit = s32[] constant(6)
  %p.1 = (s32[], f32[4]) parameter(0)
  %i.1 = s32[] get-tuple-element(%p.1), index=0
  ROOT %lt = pred[] compare(%i.1, %limit), direction=LT
}

%inc (a: s32[], b: s32[]) -> s32[] {
  %a = s32[] parameter(0)
  %b = s32[] parameter(1)
  ROOT %sum = s32[] add(%a, %b)
}

%body (p.2: (s32[], f32[4])) -> (s32[], f32[4]) {
  %p.2 = (s32[], f32[4]) parameter(0)
  %i.2 = s32[] get-tuple-element(%p.2), index=0
  %one = s32[] constant(1)
  %next = s32[] fusion(%i.2, %one), kind=kLoop, calls=%inc
  %x = f32[4] get-tuple-element(%p.2), index=1
  %y = f32[4] tanh(%x)
  ROOT %t = (s32[], f32[4]) tuple(%next, %y)
}

ENTRY %main (x.0: f32[4]) -> f32[4] {
  %x.0 = f32[4] parameter(0)
  %zero = s32[] constant(0)
  %start = s32[] copy(%zero)
  %init = (s32[], f32[4]) tuple(%start, %x.0)
  %loop = (s32[], f32[4]) while(%init), condition=%cond, body=%body
  ROOT %out = f32[4] get-tuple-element(%loop), index=1
}
"""


def test_a_tpu_style_loop_has_its_trip_count_read_from_its_shape():
    module = hlo.parse(TPU_LOOP)
    loop = module.find("main", "loop")
    assert hlo.trip_count(module, loop) == 6
    runs = hlo.runs(module)
    assert runs.exact and runs.times["body"] == 6


def test_xla_s_known_trip_count_is_taken_as_written():
    text = TPU_LOOP.replace("condition=%cond, body=%body",
                            'condition=%cond, body=%body, backend_config={"known_trip_count":'
                            '{"n":"9"}}')
    module = hlo.parse(text)
    assert hlo.trip_count(module, module.find("main", "loop")) == 9


def test_a_loop_that_ends_on_a_value_has_no_trip_count_and_is_not_guessed():
    text = TPU_LOOP.replace("ROOT %lt = pred[] compare(%i.1, %limit), direction=LT",
                            "%s = f32[] constant(1)\n  ROOT %lt = pred[] compare(%s, %s), "
                            "direction=LT")
    module = hlo.parse(text)
    assert hlo.trip_count(module, module.find("main", "loop")) is None
    runs = hlo.runs(module)
    assert not runs.exact and runs.unknown_loops == ("loop",) and runs.times["body"] == 1


def test_a_counter_that_starts_at_two_and_steps_by_two_is_counted_exactly():
    text = (TPU_LOOP.replace("%zero = s32[] constant(0)", "%zero = s32[] constant(2)")
            .replace("%one = s32[] constant(1)", "%one = s32[] constant(2)"))
    module = hlo.parse(text)
    assert hlo.trip_count(module, module.find("main", "loop")) == 2
