"""The operator's answer: how the world's record becomes an answer, and how
resume_equivalence, migration_safety and context_rebuild read a run that
got one."""

from __future__ import annotations

from typing import Any

import pytest
from history_builder import CHARGE, NOTIFY, SEND, H

from harness.checkers import check_context_rebuild, check_resume_equivalence
from harness.model import OPERATOR_ANSWER, EventF, Verdict
from harness.nemesis._operator import world_answer
from harness.world import RequestRecord

DECL = {CHARGE: "exactly_once", NOTIFY: "at_least_once", SEND: "at_most_once"}
WAIT = "operator:r2/send"


def _oracle() -> H:
    return H().declaration(DECL).run("r2", (SEND, "m1"), output={"ok": True})


def _answer(b: H, run_id: str = "r2", waiting_on: str = WAIT, applied: bool = True) -> H:
    return b.add(
        "invoke",
        EventF.DELIVER,
        {
            "message_id": f"operator:{run_id}:1",
            "run_id": run_id,
            "kind": "event",
            "variant": OPERATOR_ANSWER,
            "decision": "applied" if applied else "not_applied",
            "waiting_on": waiting_on,
            "applied": applied,
        },
    ).mark("answer")


def _stopped(b: H, run_id: str = "r2", waiting_on: str = WAIT) -> H:
    return b.add(
        "info",
        EventF.FINAL,
        {"run_id": run_id, "tenant": "t1", "state": "needs_operator", "waiting_on": waiting_on},
    ).mark("final")


def test_a_run_still_on_the_answered_wait_lost_the_answer() -> None:
    b = H().declaration(DECL).submit("r2").effect("r2", SEND, "m1")
    _stopped(_answer(b))
    r = check_resume_equivalence(b.build(), _oracle().build())
    assert r.verdict is Verdict.FAIL, r.message
    assert f"still waits on {WAIT} after the operator's answer #{b.marks['answer']}" in r.message
    assert "applied" in r.message
    assert b.marks["final"] in r.witness


def test_a_run_stopped_without_an_answer_is_a_legitimate_divergence() -> None:
    b = H().declaration(DECL).submit("r2").effect("r2", SEND, "m1")
    _stopped(b)
    r = check_resume_equivalence(b.build(), _oracle().build())
    assert r.verdict is Verdict.PASS, r.message
    assert r.counts["needs_operator"] == 1


def test_a_run_that_called_again_after_the_answer_may_stop_again() -> None:
    # Told "not applied", it resent; the resend ended in doubt too.
    b = H().declaration(DECL).submit("r2").effect("r2", SEND, "m1", applied=False)
    _answer(b, applied=False).effect("r2", SEND, "m1", applied=False)
    r = check_resume_equivalence(_stopped(b).build(), _oracle().build())
    assert r.verdict is Verdict.PASS, r.message
    assert r.counts["needs_operator"] == 1


def test_a_run_stopped_on_another_wait_than_the_answered_one_is_legitimate() -> None:
    b = H().declaration(DECL).submit("r2").effect("r2", SEND, "m1")
    _stopped(_answer(b, waiting_on="operator:r2/other"))
    r = check_resume_equivalence(b.build(), _oracle().build())
    assert r.verdict is Verdict.PASS, r.message


def _context(b: H, step: str, tool: str) -> H:
    ctx = {"step": step, "tool_results": {"send": tool}}
    return b.add("info", EventF.CONTEXT, {"run_id": "r2", "step": step, "context": ctx})


def test_contexts_after_an_answer_are_left_out_and_before_it_compared() -> None:
    o = _oracle()
    _context(_context(o, "a", "sent"), "b", "sent")
    b = H().declaration(DECL, capabilities=("context",)).submit("r2")
    _context(b, "a", "sent")
    _answer(b)
    _context(b, "b", "(unknown)")
    r = check_context_rebuild(b.build(), o.build())
    assert r.verdict is Verdict.PASS, r.message
    assert r.counts["excluded_after_operator_answer"] == 1
    assert r.counts["matched"] == 1
    # The same difference before any answer is a failure.
    b2 = H().declaration(DECL, capabilities=("context",)).submit("r2")
    _context(_context(b2, "a", "sent"), "b", "(unknown)")
    assert check_context_rebuild(b2.build(), o.build()).verdict is Verdict.FAIL


# -- the world's record as an answer ------------------------------------------


def _req(seq: int, **kw: Any) -> RequestRecord:
    base: dict[str, Any] = {
        "seq": seq,
        "service": "email",
        "action": "send",
        "tenant": "t1",
        "run_id": "r2",
        "op_id": None,
        "worker_id": "w1",
        "fencing_token": 1,
        "idempotency_key": None,
        "business_key": None,
        "request": {},
        "request_hash": "h",
        "outcome": "applied",
        "applied": True,
        "deduplicated": False,
        "external_ref": f"mail-{seq}",
        "response": {},
        "error": None,
        "rule_id": None,
        "pid": 1,
        "at": 0.0,
    }
    return RequestRecord(**{**base, **kw})


@pytest.mark.parametrize(
    ("op", "want"),
    [
        # the ledger's op id picks the call, whatever else matches
        ({"op_id": "r2/b", "request_hash": "h", "kind": SEND}, (False, None)),
        ({"op_id": "r2/a", "kind": SEND}, (True, "mail-1")),
        # no op id: the request hash
        ({"request_hash": "h2", "kind": SEND}, (False, None)),
        # neither: the kind
        ({"kind": SEND}, (True, "mail-1")),
        # a service action no request of the run is: the call never reached it
        ({"kind": "payments.charge"}, (False, None)),
        # a kind the world does not offer: no guess
        ({"kind": "fax.send"}, None),
        ({"op_id": "r2/zzz"}, None),
    ],
)
def test_the_answer_is_the_world_record_of_the_call_in_doubt(
    op: dict[str, Any], want: tuple[bool, str | None] | None
) -> None:
    requests = [
        _req(1, op_id="r2/a"),
        _req(2, op_id="r2/b", request_hash="h2", applied=False, outcome="killed_before_apply"),
    ]
    assert world_answer(op, requests) == want
