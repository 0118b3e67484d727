"""The typed records an adapter may report instead of plain dicts
(issue 12): validated when the observation is built, then held as the
dicts the history records, so checkers see one shape."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from harness.adapters import ApprovalRecord, ContextRecord, Observation, Transition
from harness.checkers import check_legal_transitions
from harness.history import History
from harness.model import Event, EventF, Verdict


def test_a_transition_model_becomes_the_dict_the_checkers_read() -> None:
    t = Transition(run_id="r1", from_=None, to="pending", state_version=1, actor="w1")
    obs = Observation(runs=(), transitions=(t, {"run_id": "r1", "from": "pending", "to": "done"}))
    first, second = obs.transitions
    assert first["from"] is None and first["to"] == "pending" and first["state_version"] == 1
    assert "from_" not in first
    assert second == {"run_id": "r1", "from": "pending", "to": "done"}  # dicts as given


def test_from_may_be_given_by_its_wire_name() -> None:
    t = Transition.model_validate({"run_id": "r1", "from": "a", "to": "b", "state_version": 2})
    assert t.from_ == "a"


def test_a_record_missing_what_the_checkers_need_is_refused_when_built() -> None:
    with pytest.raises(ValidationError, match="state_version"):
        Transition(run_id="r1", to="pending")  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="approval_id"):
        ApprovalRecord(run_id="r1")  # type: ignore[call-arg]


def test_contexts_and_approvals_keep_extra_keys_and_json_shapes() -> None:
    c = ContextRecord(run_id="r1", step=2, context=["hello"], memory_ids=("m1",), model="fake")
    a = ApprovalRecord(run_id="r1", approval_id="ap1", decision="approved", expires_at=10.0)
    obs = Observation(runs=(), contexts=(c,), approvals=(a,))
    assert obs.contexts[0]["memory_ids"] == ["m1"] and obs.contexts[0]["model"] == "fake"
    assert obs.approvals[0]["decision"] == "approved" and obs.approvals[0]["expires_at"] == 10.0


def test_typed_transitions_are_judged_like_dicts() -> None:
    """A fork reported through the typed model is still a fork."""
    obs = Observation(
        runs=(),
        transitions=(
            Transition(run_id="r1", from_=None, to="pending", state_version=1),
            Transition(run_id="r1", from_="pending", to="done", state_version=2),
            Transition(run_id="r1", from_="pending", to="done", state_version=2),
        ),
    )
    events = [
        Event(
            index=0,
            time=0.0,
            process="runner",
            type="invoke",
            f=EventF.SUBMIT,
            value={"run_id": "r1", "tenant": "t", "workflow": "w", "input": {}},
        ),
        Event(
            index=1,
            time=0.0,
            process="runner",
            type="ok",
            f=EventF.SUBMIT,
            value={"run_id": "r1", "tenant": "t", "workflow": "w", "input": {}},
        ),
    ]
    for t in obs.transitions:
        events.append(
            Event(
                index=len(events),
                time=0.0,
                process="runtime",
                type="info",
                f=EventF.TRANSITION,
                value=dict(t),
            )
        )
    result = check_legal_transitions(History(events), None)
    assert result.verdict is Verdict.FAIL, result.message
    assert "state_version" in result.message or "fork" in result.message
