"""What the harness finds in the Prefect refund flows, and that the careful one passes.

One explicit scenario each, the minimal counterexample a search shrinks to,
run with its fault-free oracle and every checker, on the session's server
(``prefect``, ``prefect_api``: conftest.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from prefect_support import (
    KILL_AFTER_REFUND,
    KILL_BEFORE_COMPLETED,
    Adapters,
    execute,
    result,
    search,
    verdicts,
    zombie,
    zombie_schedule,
)

from harness.history import History
from harness.model import EventF, Verdict

pytestmark = pytest.mark.slow


def test_a_kill_after_the_refund_makes_the_naive_flow_refund_twice(
    prefect: Adapters, tmp_path: Path
) -> None:
    ex = execute(prefect.adapter("naive"), KILL_AFTER_REFUND, tmp_path)
    once = result(ex, "exactly_once_effects")
    assert once.verdict is Verdict.FAIL, once.message
    assert "applied 2 times" in once.message
    history = History.load(ex.folder / "history.jsonl")
    assert {history.events[i].value["idempotency_key"] for i in once.witness} == {None}
    # the run was recovered as the deployment would: crashed, rescheduled, run again
    moves = [e.value["to"] for e in history.events if e.f is EventF.TRANSITION]
    assert moves[:8] == [
        "SCHEDULED",
        "PENDING",
        "RUNNING",
        "CRASHED",
        "SCHEDULED",
        "PENDING",
        "RUNNING",
        "COMPLETED",
    ], moves


def test_the_careful_flow_survives_the_kill_after_the_refund(
    prefect: Adapters, tmp_path: Path
) -> None:
    ex = execute(prefect.adapter("careful"), KILL_AFTER_REFUND, tmp_path)
    judged = verdicts(ex)
    assert Verdict.FAIL not in judged.values(), [r.message for r in ex.results]
    assert judged["exactly_once_effects"] is Verdict.PASS
    assert "1 repeats were absorbed" in result(ex, "exactly_once_effects").message


def test_prefect_2_a_zombie_runs_a_completed_flow_run_again(
    prefect: Adapters, tmp_path: Path
) -> None:
    """The targeted schedule a ci search fails first, shrunk as the search
    shrinks it: z1's ContinueWorker right before the quiesce goes (the
    quiesce continues z1 first), and no other step can -- the five steps
    issue 34 asks for at most."""
    found = search(prefect.adapter("careful", "heartbeat"), zombie_schedule(), tmp_path)
    ex = found.counterexamples["legal_transitions"]
    assert len(ex.scenario.steps) <= 5, ex.scenario.describe()
    assert ex.scenario.steps == zombie(1).steps, ex.scenario.describe()
    assert found.dropped_steps["legal_transitions"] == 1
    assert "legal_transitions" not in found.not_fully_shrunk
    legal = result(ex, "legal_transitions")
    assert legal.verdict is Verdict.FAIL, legal.message
    assert "COMPLETED -> RUNNING" in legal.message
    history = History.load(ex.folder / "history.jsonl")
    moves = [e.value["to"] for e in history.events if e.f is EventF.TRANSITION]
    # z1 claimed the run and stopped before RUNNING; w1 crashed it (stale
    # heartbeat), retried and completed it; z1 woke up and ran it again
    assert moves[-7:] == [
        "CRASHED",
        "SCHEDULED",
        "PENDING",
        "RUNNING",
        "COMPLETED",
        "RUNNING",
        "COMPLETED",
    ], moves
    # the zombie's second refund carried the flow run's key: absorbed
    refunds = [e.value for e in history.events if e.f is EventF.EFFECT]
    assert [r["worker_id"] for r in refunds] == ["w1", "z1"]
    assert verdicts(ex)["exactly_once_effects"] is Verdict.PASS


def test_prefect_3_the_cache_skips_a_completed_refund(prefect: Adapters, tmp_path: Path) -> None:
    ex = execute(prefect.adapter("cached"), KILL_BEFORE_COMPLETED, tmp_path)
    judged = verdicts(ex)
    assert Verdict.FAIL not in judged.values(), [r.message for r in ex.results]


def test_prefect_3_but_not_one_killed_mid_task(prefect: Adapters, tmp_path: Path) -> None:
    ex = execute(prefect.adapter("cached"), KILL_AFTER_REFUND, tmp_path)
    once = result(ex, "exactly_once_effects")
    assert once.verdict is Verdict.FAIL, once.message
    assert "applied 2 times" in once.message
