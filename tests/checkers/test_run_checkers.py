"""progress and legal_transitions."""

from __future__ import annotations

from typing import Any

import pytest
from history_builder import TABLE, H

from harness.checkers import check_legal_transitions, check_progress
from harness.model import EventF, Verdict

# -- progress -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "state", ["completed", "failed", "cancelled", "waiting_approval", "needs_operator", "parked"]
)
def test_a_run_that_ends_or_rests_in_a_legitimate_wait_makes_progress(state: str) -> None:
    r = check_progress(H().submit("r1").final("r1", state).build(), None)
    assert r.verdict is Verdict.PASS, r.message
    assert r.counts["runs"] == 1 and r.counts["stuck"] == 0


@pytest.mark.parametrize("state", ["running", "pending", "unknown"])
def test_a_run_left_running_pending_or_unknown_is_stuck(state: str) -> None:
    b = H().submit("r1").final("r1", state).mark("f")
    r = check_progress(b.build(), None)
    assert r.verdict is Verdict.FAIL
    assert r.witness == (b.marks["f"],)
    assert f"run r1 is stuck in {state}" in r.message


def test_a_submitted_run_without_a_final_event_is_lost() -> None:
    b = H().submit("r1").mark("s").run("r2")
    r = check_progress(b.build(), None)
    assert r.verdict is Verdict.FAIL
    assert r.witness == (b.marks["s"],)
    assert "r1" in r.message and "lost" in r.message
    assert r.counts["lost"] == 1


def test_a_run_whose_submission_may_not_have_happened_is_not_lost() -> None:
    r = check_progress(H().submit("r1", outcome="info").run("r2").build(), None)
    assert r.verdict is Verdict.PASS
    assert r.counts["unconfirmed_submits"] == 1


def test_a_history_with_no_final_event_at_all_is_unknown_not_all_lost() -> None:
    r = check_progress(H().submit("r1").submit("r2").build(), None)
    assert r.verdict is Verdict.UNKNOWN
    assert "not recorded" in r.message


def test_a_final_state_that_is_not_normalized_is_unknown() -> None:
    r = check_progress(H().submit("r1").final("r1", "Running").build(), None)
    assert r.verdict is Verdict.UNKNOWN


def _outage(refused: int, limit: int | None) -> H:
    value = {
        "kind": "outage",
        "fired": True,
        "services": ["payments"],
        "runs": ["r1"],
        "refused": {"r1": {"payments.refund": refused}},
        "retry_limits": {} if limit is None else {"r1": limit},
    }
    return H().submit("r1").add("info", EventF.FAULT, value, "nemesis").mark("o")


def test_a_run_refused_more_often_than_its_declared_retry_limit_fails_progress() -> None:
    b = _outage(refused=8, limit=5).final("r1", "completed")
    r = check_progress(b.build(), None)
    assert r.verdict is Verdict.FAIL
    assert r.witness == (b.marks["o"],)
    assert "payments.refund 8 times" in r.message and "retry_limit" in r.message


@pytest.mark.parametrize(("refused", "limit"), [(5, 5), (8, None)])
def test_a_run_within_its_retry_limit_or_without_one_makes_progress(
    refused: int, limit: int | None
) -> None:
    r = check_progress(_outage(refused, limit).final("r1", "failed").build(), None)
    assert r.verdict is Verdict.PASS, r.message
    assert r.counts.get("retry_limits_checked", 0) == (limit is not None)


def _waits(wake_in: float, max_waits: dict[str, Any] | None) -> H:
    """r1 (refund) seen waiting for its decision, its deadline ``wake_in``
    seconds after the harness's clock; a child of it, spawned by the runtime
    (its workflow named by its ``created`` transition), within any bound."""
    b = H().add(
        "info",
        EventF.DECLARATION,
        {
            "delivery": {},
            "capabilities": [],
            **({} if max_waits is None else {"max_waits": max_waits}),
        },
    )
    b.submit("r1", workflow="refund")
    b.add(
        "info",
        EventF.TRANSITION,
        {"run_id": "r1.c", "from": None, "to": "Created", "detail": {"workflow": "quote"}},
    )
    at = b.time + 1.0  # the next event's time
    b.add(
        "info", EventF.WAIT, {"run_id": "r1", "state": "waiting_approval", "wake_at": at + wake_in}
    )
    b.mark("w")
    b.add("info", EventF.WAIT, {"run_id": "r1.c", "state": "waiting_event", "wake_at": b.time + 60})
    return b.final("r1", "waiting_approval")


def test_a_wait_whose_deadline_is_past_the_declared_wait_fails_progress() -> None:
    # an approval that lives 3,600,000 s: its TTL taken in milliseconds
    b = _waits(3_600_000.0, {"refund": 3600.0, "quote": 3600.0})
    r = check_progress(b.build(), None)
    assert r.verdict is Verdict.FAIL
    assert r.witness == (b.marks["w"],)
    assert "run r1 waits ('waiting_approval')" in r.message
    assert "'refund' declares waits of at most 3,600 s" in r.message
    assert r.counts["waits_checked"] == 2 and r.counts["past_declared_wait"] == 1


@pytest.mark.parametrize(
    ("wake_in", "max_waits"),
    [(3600.0, {"refund": 3600.0}), (3_600_000.0, None), (3_600_000.0, {"other": 1.0})],
    ids=["within", "undeclared", "another-workflow"],
)
def test_a_wait_within_its_bound_or_without_one_makes_progress(
    wake_in: float, max_waits: dict[str, Any] | None
) -> None:
    r = check_progress(_waits(wake_in, max_waits).build(), None)
    assert r.verdict is Verdict.PASS, r.message


def test_a_malformed_max_wait_is_a_declaration_problem() -> None:
    decl = _waits(1.0, {"refund": -5}).build().declaration()
    assert decl is not None and decl.max_waits == {}
    assert decl.problems == ("max_waits['refund'] is -5, not a positive number of seconds",)


# -- legal_transitions ---------------------------------------------------------------


def _chain(b: H, run_id: str = "r1") -> H:
    return (
        b.transition(run_id, None, "Created", 1)
        .transition(run_id, "Created", "Running", 2)
        .transition(run_id, "Running", "Running", 3)
        .transition(run_id, "Running", "Completed", 4)
    )


def test_a_legal_versioned_chain_passes() -> None:
    r = check_legal_transitions(_chain(H().declaration(transitions=TABLE)).build(), None)
    assert r.verdict is Verdict.PASS, r.message
    assert r.counts == {"runs": 1, "transitions": 4}


def test_a_transition_the_table_forbids_fails() -> None:
    b = H().declaration(transitions=TABLE).transition("r1", None, "Created", 1)
    b.transition("r1", "Created", "Completed", 2).mark("bad")
    r = check_legal_transitions(b.build(), None)
    assert r.verdict is Verdict.FAIL
    assert r.witness == (b.marks["bad"],)
    assert "Created -> Completed" in r.message


def test_leaving_a_terminal_status_fails() -> None:
    b = _chain(H().declaration(transitions=TABLE)).transition("r1", "Completed", "Running", 5)
    assert check_legal_transitions(b.build(), None).verdict is Verdict.FAIL


def test_parking_keeps_the_status_and_is_allowed() -> None:
    b = H().declaration(transitions=TABLE).transition("r1", None, "Created", 1)
    b.transition("r1", "Created", "Created", 2, action="parked")
    b.transition("r1", "Created", "Created", 3, action="unparked")
    assert check_legal_transitions(b.build(), None).verdict is Verdict.PASS


def test_two_transitions_with_one_state_version_are_a_fork() -> None:
    b = H().declaration(transitions=TABLE).transition("r1", None, "Created", 1)
    b.transition("r1", "Created", "Running", 2).mark("a")
    b.transition("r1", "Created", "Cancelled", 2).mark("b")
    r = check_legal_transitions(b.build(), None)
    assert r.verdict is Verdict.FAIL
    assert r.witness == (b.marks["a"], b.marks["b"])
    assert "forked" in r.message


def test_a_state_version_that_goes_back_is_a_stale_write() -> None:
    b = H().declaration(transitions=TABLE).transition("r1", None, "Created", 1)
    b.transition("r1", "Created", "Running", 3).mark("a")
    b.transition("r1", "Running", "Running", 2).mark("b")
    r = check_legal_transitions(b.build(), None)
    assert r.verdict is Verdict.FAIL
    assert r.witness == (b.marks["a"], b.marks["b"])
    assert "stale write" in r.message


def test_a_broken_chain_is_a_lost_write_even_without_a_table() -> None:
    b = H().declaration(transitions=None).transition("r1", None, "Created", 1).mark("a")
    b.transition("r1", "Running", "Completed", 2).mark("b")
    r = check_legal_transitions(b.build(), None)
    assert r.verdict is Verdict.FAIL
    assert r.witness == (b.marks["a"], b.marks["b"])
    assert "chain broke" in r.message


def test_without_a_table_only_versions_and_chaining_are_checked() -> None:
    b = H().declaration().transition("r1", None, "Created", 1)
    b.transition("r1", "Created", "Completed", 2)
    r = check_legal_transitions(b.build(), None)
    assert r.verdict is Verdict.PASS
    assert "only versions and chaining" in r.message


def test_runs_are_checked_independently() -> None:
    b = _chain(_chain(H().declaration(transitions=TABLE), "r1"), "r2")
    assert check_legal_transitions(b.build(), None).verdict is Verdict.PASS


def test_a_transition_without_a_state_version_is_unknown() -> None:
    b = H().declaration(transitions=TABLE)
    b.add("info", b.events[0].f.TRANSITION, {"run_id": "r1", "from": None, "to": "Created"})
    r = check_legal_transitions(b.build(), None)
    assert r.verdict is Verdict.UNKNOWN
    assert r.witness == (b.last,)


def test_submitted_runs_with_no_transition_recorded_are_unknown() -> None:
    r = check_legal_transitions(H().declaration(transitions=TABLE).run("r1").build(), None)
    assert r.verdict is Verdict.UNKNOWN
