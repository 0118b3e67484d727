"""A fault excuses a run only where the history shows it could change its end.

Crafted histories for each kind's rule (:mod:`harness.checkers._excuses`),
then a mistake of our own making on a copy of the reference runtime: a wait
whose deadline has passed times out before it reads its inbox, so a parent
fails although its child's completion was durably in that inbox before the
clock jumped. The clock jump names the parent (its wait's ``wake_at``
passed); the over-broad excuse left it out of every comparison, and the
evidence (the child ended before the jump) now holds it to the oracle.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from history_builder import H
from mutants_support import load_mutants

from harness.checkers._excuses import excused_runs
from harness.checkers._resume import check_resume_equivalence
from harness.checkers._runs import fault_runs
from harness.history import History
from harness.model import EventF, Verdict


def _clock(h: H, runs: list[str], seconds: float = 90_000.0) -> H:
    h.time += seconds
    return h.add(
        "info", EventF.FAULT, {"kind": "clock", "fired": True, "seconds": seconds, "runs": runs}
    )


def _spawned(h: H, child: str, parent: str) -> H:
    return h.add(
        "info",
        EventF.TRANSITION,
        {
            "run_id": child,
            "tenant": "t1",
            "from": None,
            "to": "Created",
            "state_version": 0,
            "actor": "w1",
            "detail": {"parent_run_id": parent},
        },
    )


def _parent_waits(*, child_done_before_jump: bool, parent_end: str) -> History:
    h = H().declaration(capabilities=("context", "approvals", "clock")).submit("r1")
    h.transition("r1", "Created", "Running", 1)
    _spawned(h, "r1.c", "r1")
    h.transition("r1", "Running", "WaitingForEvent", 2)
    if child_done_before_jump:
        h.transition("r1.c", "Created", "Completed", 1)
    _clock(h, ["r1"])
    if not child_done_before_jump:
        h.transition("r1.c", "Created", "Completed", 1)
    h.transition("r1", "WaitingForEvent", parent_end.title(), 3)
    h.final("r1", parent_end, output={"ok": 1} if parent_end == "completed" else None)
    return h.final("r1.c", "completed").build()


ORACLE = H().declaration().submit("r1").final("r1", "completed", output={"ok": 1})
ORACLE = ORACLE.final("r1.c", "completed")


def test_a_parent_timed_out_after_its_child_ended_in_time_is_not_excused() -> None:
    h = _parent_waits(child_done_before_jump=True, parent_end="failed")
    assert "r1" in fault_runs(h)  # named by the jump
    excuses = excused_runs(h)
    assert "r1" not in excuses
    assert "ended" in excuses.refused["r1"][0][2]
    result = check_resume_equivalence(h, ORACLE.build())
    assert result.verdict is Verdict.FAIL, result.message
    assert result.counts["not_excused_clock"] == 1


def test_a_parent_whose_child_ended_only_after_the_jump_stays_excused() -> None:
    h = _parent_waits(child_done_before_jump=False, parent_end="failed")
    assert [kind for kind, _ in excused_runs(h).runs["r1"]] == ["clock"]
    result = check_resume_equivalence(h, ORACLE.build())
    assert result.verdict is Verdict.PASS, result.message
    assert result.counts["excused_by_clock"] == 1


def test_a_parent_that_took_its_childs_result_in_time_passes() -> None:
    h = _parent_waits(child_done_before_jump=True, parent_end="completed")
    assert check_resume_equivalence(h, ORACLE.build()).verdict is Verdict.PASS


def _waits_for_event(variant: str, *, approval: bool = False) -> History:
    h = H().declaration().submit("r1")
    h.transition("r1", "Running", "WaitingForEvent", 1)
    # an event (no approval named), its invoke then its ok
    value = {"message_id": "m1", "run_id": "r1", "kind": "event", "approval_id": None}
    h.add("invoke", EventF.DELIVER, {**value, "variant": variant})
    h.add("ok", EventF.DELIVER, {"message_id": "m1", "run_id": "r1", "accepted": True})
    if approval:
        h.approval("r1", expires_at=50.0)
    _clock(h, ["r1"])
    return h.final("r1", "failed").build()


def test_a_genuine_message_accepted_before_the_jump_takes_the_excuse_away() -> None:
    assert "r1" not in excused_runs(_waits_for_event("valid"))
    # a forged one is nothing the run waits for
    assert "r1" in excused_runs(_waits_for_event("forged"))


def test_an_approval_the_jump_lets_expire_stays_an_excuse() -> None:
    # expiry is checked where the approval is used: a decision taken in
    # time may still lapse before the effect
    assert "r1" in excused_runs(_waits_for_event("valid", approval=True))


def _plant_then_contexts(keys: list[list[str]], *, other_reads: bool = False) -> History:
    h = H().declaration().submit("r1").submit("r2")
    h.memory("limit:v1", "poisoned")
    h.add(
        "info",
        EventF.FAULT,
        {"kind": "memory", "fired": True, "tenant": "t1", "runs": ["r1", "r2"]},
    )
    for ks in keys:
        mem = [{"namespace": "policy", "key": k} for k in ks]
        h.context("r1", "s", {"memory": mem})
    if other_reads:
        h.context("r2", "s", {"memory": [{"namespace": "policy", "key": "limit"}]})
    return h.final("r1", "completed").final("r2", "completed").build()


def test_a_memory_plant_excuses_only_the_runs_that_read_its_key() -> None:
    assert "r1" in excused_runs(_plant_then_contexts([["limit"]]))
    refused = excused_runs(_plant_then_contexts([["other"]]))
    assert "r1" not in refused
    assert refused.refused["r1"][0][2].endswith("policy/limit")


def test_a_run_reading_memory_after_another_run_read_the_plant_stays_excused() -> None:
    # what r2 wrote from the plant may reach r1 through another key
    assert "r1" in excused_runs(_plant_then_contexts([["other"]], other_reads=True))


def test_a_run_whose_contexts_list_no_memory_cannot_show_a_read_and_stays_excused() -> None:
    h = H().declaration().submit("r1").memory("limit:v1", "poisoned")
    h.add("info", EventF.FAULT, {"kind": "memory", "fired": True, "tenant": "t1", "runs": ["r1"]})
    h.context("r1", "s", {"prompt": "no memory listed"})
    assert "r1" in excused_runs(h.final("r1", "completed").build())


def _outage(touched: list[str], refused: dict[str, Any], calls: int) -> History:
    h = H().declaration().submit("r1").submit("r2")
    value = {
        "kind": "outage",
        "fired": True,
        "touched": touched,
        "runs": ["r1", "r2"],
        "refused": refused,
        "calls": calls,
    }
    h.add("info", EventF.FAULT, value)
    return h.final("r1", "completed").final("r2", "completed").build()


def test_an_outage_excuses_the_runs_it_turned_away() -> None:
    x = excused_runs(_outage(["r1"], {"r1": {"payments.charge": 8}}, 8))
    assert "r1" in x and "r2" not in x
    # a refused call of a run not submitted here (a child): the tenant's runs
    x = excused_runs(_outage(["r1.c"], {"r1.c": {"payments.charge": 8}}, 8))
    assert "r1" in x and "r2" in x


def test_a_cancel_that_did_not_take_effect_excuses_nothing() -> None:
    h = H().declaration().submit("r1")
    h.fault("operator_cancel", ["r1"], fired=False)
    assert "r1" not in excused_runs(h.final("r1", "completed").build())
    h = H().declaration().submit("r1")
    h.fault("operator_cancel", ["r1"])
    assert "r1" in excused_runs(h.final("r1", "cancelled").build())


# -- a mistake of our own making -------------------------------------------------


#: "a deadline is a deadline: a wait whose time is up times out, whatever
#: came in" -- the timeout checked before the inbox is read
TIMEOUT_FIRST = (
    "_executor/_inbox.py",
    "    for msg in snap.pending_inbox:\n        acked.append(msg.message_id)\n",
    "    if not operator and run.wake_at is not None and now >= run.wake_at:\n"
    "        late = tuple(m.message_id for m in snap.pending_inbox)\n"
    "        end_wait(sc, run, late, (), status=S.FAILED, action='timeout',\n"
    "                 error=f'timed out waiting for {waiting}')\n"
    "        raise Yield\n"
    "    for msg in snap.pending_inbox:\n        acked.append(msg.message_id)\n",
)

#: procurement's parent r1, its worker killed right after the commit that
#: ends its child (the completion is in the parent's inbox), then a day
#: passes: the plan's targeted/procurement/deadline_passes/r0/...@6
CHILD_DONE_THEN_A_DAY = {
    "name": "demo/child-done-then-a-day",
    "steps": [
        {
            "op": "submit",
            "run": {
                "run_id": "r1",
                "tenant": "acme",
                "workflow": "procurement",
                "input": {"item": "bolts", "quantity": 3},
            },
        },
        {
            "op": "run_worker",
            "worker_id": "w1",
            "crash": {"site": "after_step_commit", "nth": 4, "action": "kill"},
        },
        {"op": "advance_clock", "seconds": 90000},
        {"op": "quiesce", "approve_waits": True},
    ],
}


def test_the_evidence_catches_a_timeout_the_broad_excuse_hid(tmp_path: Path) -> None:
    mutants = load_mutants()
    got: dict[str, tuple[list[str], bool, bool]] = {}
    for label, edits in (("correct", ()), ("mutant", (mutants.Edit(*TIMEOUT_FIRST),))):
        copy = mutants.mutated_copy(tmp_path / label / "src", edits)
        run = mutants.execute(copy, CHILD_DONE_THEN_A_DAY, tmp_path / label / "work")
        h = History.load(run.history)
        got[label] = (run.failed, "r1" in fault_runs(h), "r1" in excused_runs(h))
    # named by the jump in both; excused in neither (the child ended in time)
    assert got["correct"] == ([], True, False)
    assert got["mutant"] == (["resume_equivalence"], True, False)
