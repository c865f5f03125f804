"""The pipeline's stages in words (`planc.reports.stages`): the summary line and the table."""

from planc.reports.stages import summary_text, table_text

ROW = {"stage": 0, "position": 0, "layers": [0, 3], "variables": 4, "param_bytes": 1024,
       "state_bytes": None, "flops_per_token": 96, "in_flight_microbatches": 1}


def stages(n_stages=2, positions=2, placed=None):
    return {"axis": "pipe", "schedule": "1f1b", "microbatches": 8, "positions": positions,
            "bubble": 0.1, "imbalance": {"flops": None, "bytes": None},
            "stages": [dict(ROW, stage=k) for k in range(n_stages)],
            "placed": placed or {"param_bytes": None, "state_bytes": None}}


def test_one_stage_on_one_position_reads_in_the_singular():
    assert summary_text(stages(1, 1)).startswith("over `pipe`: 1 stage on 1 position, ")
    assert summary_text(stages(2, 2)).startswith("over `pipe`: 2 stages on 2 positions, ")


def test_the_table_says_what_plan_shardings_places_on_every_position():
    text = table_text(stages(placed={"param_bytes": 3 << 20, "state_bytes": 6 << 20}))
    assert text.splitlines()[-1].startswith(
        "plan.shardings places 3.00 MiB of parameters and 6.00 MiB of optimizer state on "
        "each device of every position")
    assert "plan.shardings" not in table_text(stages())
