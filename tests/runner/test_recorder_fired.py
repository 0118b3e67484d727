"""Each world rule that fires is recorded once, whatever order rules fire in.

Found by the ci profile on the reference runtime (2026-12-07): a ``slow``
rule armed first and a ``kill_after_apply`` rule armed second. The kill
fired first; the slow rule's firing was written when its caller's delay
ended. The world lists fired rules by rule id, and the recorder read that
list from an offset: the kill was recorded twice, the slow rule never
(``effect_boundary`` fired 2 of 1 armed).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.adapters.reference import ReferenceAdapter
from harness.runner._recorder import HistoryRecorder
from harness.world import Caller, FaultRule, Rejected

CALLER = Caller(tenant="acme", run_id="r1", op_id="op1", worker_id="w1", fencing_token=1)


def _faults(path: Path) -> list[tuple[str, str]]:
    events = [json.loads(line) for line in path.read_text().splitlines()]
    return [
        (e["value"]["kind"], e["value"]["service"])
        for e in events
        if e["f"] == "fault" and "service" in e["value"]
    ]


def test_a_rule_armed_first_and_fired_last_is_recorded_once_and_so_is_the_other(
    tmp_path: Path,
) -> None:
    rec = HistoryRecorder(tmp_path / "history.jsonl")
    rec.env = ReferenceAdapter().open(tmp_path / "env", seed=0)
    try:
        world = rec.env.world
        first = world.arm(FaultRule("email", nth=1, mode="reject"))
        second = world.arm(FaultRule("payments", nth=1, mode="reject"))
        client = world.client()
        for service, action in (("payments", "charge"), ("email", "send")):
            with pytest.raises(Rejected):  # the injected rejection
                client.call(service, action, {"to": "c-1"}, idempotency_key="k", caller=CALLER)
            rec.sync()
        assert {f.rule_id for f in world.fired()} == {first, second}
        rec.sync()  # nothing new: nothing recorded again
    finally:
        rec.env.close()
        rec.close()
    assert _faults(tmp_path / "history.jsonl") == [
        ("world_fault", "payments"),
        ("world_fault", "email"),
    ]
    assert rec.coverage.fired == {"world_fault": 2}
