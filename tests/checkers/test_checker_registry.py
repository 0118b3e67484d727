"""The registry, check_all, the guard, and properties that hold for any history."""

from __future__ import annotations

from typing import Any

import pytest
from history_builder import H
from hypothesis import given, settings
from hypothesis import strategies as st

import harness.checkers as checkers
from harness.checkers import CHECKERS, check_all, merge_verdicts
from harness.checkers._base import guarded
from harness.history import History
from harness.model import Event, EventF, PropertyResult, Verdict

NAMES = [
    "exactly_once_effects",
    "resume_equivalence",
    "progress",
    "legal_transitions",
    "approval_integrity",
    "memory_safety",
    "migration_safety",
    "context_rebuild",
    "state_equivalence",
    "effects_accounted",
]


def test_the_public_names_are_sorted_and_all_exist() -> None:
    assert checkers.__all__ == sorted(checkers.__all__)
    for name in checkers.__all__:
        assert hasattr(checkers, name)


def test_the_registry_holds_the_ten_properties_in_report_order() -> None:
    assert list(CHECKERS) == NAMES
    for name, fn in CHECKERS.items():
        assert fn.__name__ == f"check_{name}"
        assert fn.__doc__ and "Cannot see" in fn.__doc__


def test_check_all_runs_every_checker_and_names_each_result() -> None:
    results = check_all(H().declaration().run("r1").build(), None)
    assert [r.name for r in results] == NAMES


def test_check_all_runs_only_the_named_checkers_in_registry_order() -> None:
    results = check_all(H().build(), None, only=["progress", "exactly_once_effects"])
    assert [r.name for r in results] == ["exactly_once_effects", "progress"]


def test_check_all_refuses_a_name_that_is_not_a_checker() -> None:
    with pytest.raises(ValueError, match="no checker named 'exactly_once'"):
        check_all(H().build(), None, only=["exactly_once"])


def test_a_crashing_checker_answers_unknown_and_asks_for_a_bug_report() -> None:
    @guarded("boom")
    def boom(history: History, oracle: History | None) -> PropertyResult:
        raise KeyError("state")

    r = boom(H().build(), None)
    assert r.verdict is Verdict.UNKNOWN
    assert "bug in the harness" in r.message and "KeyError" in r.message


def test_a_pass_on_a_history_with_lost_lines_becomes_unknown() -> None:
    events = H().submit("r1").final("r1", "completed").events
    holed = History([events[0], events[2]])
    r = CHECKERS["progress"](holed, None)
    assert r.verdict is Verdict.UNKNOWN
    assert "incomplete or malformed" in r.message


def test_a_fail_on_a_history_with_lost_lines_stands() -> None:
    stuck = H().submit("r1").final("r1", "running").events
    r = CHECKERS["progress"](History([stuck[0], stuck[2]]), None)
    assert r.verdict is Verdict.FAIL


def test_merge_verdicts_of_nothing_is_pass() -> None:
    assert merge_verdicts([]) is Verdict.PASS


# -- properties ------------------------------------------------------------------

verdicts = st.sampled_from(list(Verdict))
ORDER = [Verdict.NOT_TESTED, Verdict.PASS, Verdict.UNKNOWN, Verdict.FAIL]


@given(verdicts, verdicts, verdicts)
def test_verdict_merge_is_associative_and_commutative(a: Verdict, b: Verdict, c: Verdict) -> None:
    assert a.merge(b) is b.merge(a)
    assert a.merge(b).merge(c) is a.merge(b.merge(c))
    assert a.merge(Verdict.NOT_TESTED) is a
    assert a.merge(Verdict.FAIL) is Verdict.FAIL


@given(st.lists(verdicts))
def test_merge_verdicts_picks_the_highest_priority(vs: list[Verdict]) -> None:
    assert merge_verdicts(vs) is max([Verdict.PASS, *vs], key=ORDER.index)


# Values drawn from the vocabulary of docs/history.md, so that the checkers
# get past their shape checks and into their logic, plus arbitrary JSON.
_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(allow_nan=False)
    | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)
_runs = st.sampled_from(["r1", "r2", "r3"])
_vocab: dict[str, st.SearchStrategy[Any]] = {
    "run_id": _runs,
    "runs": st.lists(_runs, max_size=2) | st.none(),
    "tenant": st.sampled_from(["t1", "t2"]),
    "owner_tenant": st.sampled_from(["t1", "t2"]),
    "kind": st.sampled_from(
        ["payments.charge", "email.send", "migration", "clock", "expired", "stale", "poisoned"]
    ),
    "request_hash": st.sampled_from(["h1", "h2"]),
    "params_hash": st.sampled_from(["h1", "h2"]),
    "applied": st.booleans(),
    "deduplicated": st.booleans(),
    "side_effect": st.booleans(),
    "outcome": st.sampled_from(["applied", "unknown_applied", "killed_after_apply"]),
    "state": st.sampled_from(["completed", "running", "needs_operator", "parked", "bogus"]),
    "output": st.none() | st.dictionaries(st.sampled_from(["a", "b"]), st.integers(0, 2)),
    "error": st.none() | st.sampled_from(["schema v3", "oops"]),
    "from": st.none() | st.sampled_from(["Created", "Running"]),
    "to": st.sampled_from(["Created", "Running", "Completed"]),
    "state_version": st.integers(0, 4),
    "action": st.sampled_from(["payments.charge", "parked", None]),
    "decision": st.sampled_from(["approved", "rejected", None]),
    "expires_at": st.none() | st.floats(0, 10),
    "at": st.floats(0, 10),
    "step": st.sampled_from(["a", "b"]),
    "context": st.dictionaries(st.sampled_from(["x", "attempt"]), st.integers(0, 1)),
    "memory_id": st.sampled_from(["m1", "m2"]),
    "memory_ids": st.lists(st.sampled_from(["m1", "m2"]), max_size=2),
    "fired": st.booleans(),
    "volatile": st.lists(st.sampled_from(["at", "x"]), max_size=2),
    "delivery": st.dictionaries(
        st.sampled_from(["payments.charge", "email.send"]),
        st.sampled_from(["exactly_once", "at_most_once", "at_least_once", "nope"]),
    ),
    "transitions": st.none() | st.just({"Created": ["Running"], "Running": ["Completed"]}),
    "needs_approval": st.dictionaries(st.sampled_from(["payments.charge"]), st.just("x")),
    "capabilities": st.lists(st.sampled_from(["context", "clock"])),
}
_FIELDS: dict[EventF, tuple[str, ...]] = {
    EventF.DECLARATION: ("delivery", "transitions", "needs_approval", "capabilities"),
    EventF.SUBMIT: ("run_id", "tenant"),
    EventF.EFFECT: (
        "run_id",
        "tenant",
        "kind",
        "request_hash",
        "applied",
        "deduplicated",
        "side_effect",
        "outcome",
        "at",
    ),
    EventF.TRANSITION: ("run_id", "from", "to", "state_version", "action"),
    EventF.APPROVAL: ("run_id", "action", "params_hash", "decision", "expires_at"),
    EventF.MEMORY: ("tenant", "memory_id", "kind", "owner_tenant"),
    EventF.CONTEXT: ("run_id", "step", "context", "memory_ids"),
    EventF.FAULT: ("kind", "runs", "fired"),
    EventF.FINAL: ("run_id", "tenant", "state", "output", "error"),
    EventF.STATE: ("run_id", "state", "volatile"),
}


def _values(f: EventF) -> st.SearchStrategy[dict[str, Any]]:
    shaped = st.fixed_dictionaries(
        {k: _vocab[k] for k in _FIELDS.get(f, ())}, optional={"junk": _json}
    )
    loose = st.dictionaries(st.sampled_from(sorted(_vocab)), _vocab["run_id"] | _json, max_size=4)
    return st.one_of(shaped, shaped, shaped, loose)


@st.composite
def histories(draw: st.DrawFn) -> History:
    n = draw(st.integers(0, 25))
    events = []
    for i in range(n):
        f = draw(st.sampled_from(list(EventF)))
        events.append(
            Event(
                index=i,
                time=float(i),
                process=draw(st.sampled_from(["runner", "world", "w1"])),
                type=draw(st.sampled_from(["invoke", "ok", "fail", "info"])),
                f=f,
                value=draw(_values(f)),
            )
        )
    return History(events)


@settings(max_examples=300, deadline=None)
@given(histories(), st.none() | histories())
def test_check_all_never_raises_nor_crashes_on_well_formed_events(
    history: History, oracle: History | None
) -> None:
    results = check_all(history, oracle)
    assert [r.name for r in results] == NAMES
    for r in results:
        assert "crashed" not in r.message, r.message
        assert r.message
        if r.verdict is Verdict.FAIL:
            assert r.witness, f"{r.name} failed without a witness: {r.message}"
        assert all(history.event(i) is not None for i in r.witness), (r.name, r.witness)
