"""Per-run accounting from the world: a run's request answered with another
run's effect (two runs of one tenant sharing an idempotency key) is a lost
effect, whatever the oracle did (issue 28, gap 1)."""

from __future__ import annotations

from typing import Any

from history_builder import NOTIFY, REFUND, H

from harness.checkers import check_effects_accounted, check_exactly_once_effects
from harness.checkers._effects import foreign_answers, parse_effects
from harness.model import Verdict

DECL = {REFUND: "exactly_once", NOTIFY: "at_least_once"}


def _call(b: H, run_id: str, key: str | None, ref: str, **kw: Any) -> H:
    b.effect(run_id, REFUND, "h1", **kw)
    b.events[-1].value.update(idempotency_key=key, external_ref=ref)
    return b


def _twins(key_of_r2: str, *, r2_state: str = "completed", tenant_r2: str = "t1") -> H:
    """Two runs of one tenant making the same refund request; r2 sends
    ``key_of_r2`` (r1's key when the runtime derives keys from content)."""
    b = H().declaration(DECL, capabilities=("operations",)).submit("r1").submit("r2", tenant_r2)
    _call(b, "r1", "k-r1", "pay-r1-1").mark("first")
    if key_of_r2 == "k-r1" and tenant_r2 == "t1":
        _call(b, "r2", key_of_r2, "pay-r1-1", applied=False, deduplicated=True).mark("answer")
    else:
        _call(b, "r2", key_of_r2, "pay-r2-1", tenant=tenant_r2).mark("answer")
    b.final("r1", "completed")
    b.events[-1].value["operations"] = [_op("pay-r1-1")]
    b.final("r2", r2_state, tenant=tenant_r2)
    ref = b.events[b.marks["answer"]].value["external_ref"]
    b.events[-1].value["operations"] = [_op(ref)]
    return b


def _op(ref: str) -> dict[str, Any]:
    return {
        "kind": REFUND,
        "status": "done",
        "raw_status": "confirmed",
        "external_ref": ref,
        "request_hash": "h1",
    }


def test_a_twin_answered_with_the_other_runs_effect_lost_its_own() -> None:
    b = _twins("k-r1")
    h = b.build()
    r = check_exactly_once_effects(h, None)
    assert r.verdict is Verdict.FAIL, r.message
    assert "run r2 completed" in r.message and "run r1's effect" in r.message
    assert "'k-r1'" in r.message
    assert r.witness == (b.marks["first"], b.marks["answer"])
    assert r.counts["lost_to_another_run"] == 1
    # the ledger names r1's ref as r2's own: not a ref the world gave r2
    acc = check_effects_accounted(h, None)
    assert acc.verdict is Verdict.FAIL, acc.message
    assert "run r2 completed" in acc.message and "gave it to run r1" in acc.message


def test_twins_with_keys_of_their_own_pass() -> None:
    h = _twins("k-r2").build()
    assert check_exactly_once_effects(h, None).verdict is Verdict.PASS
    assert check_effects_accounted(h, None).verdict is Verdict.PASS


def test_a_repeat_of_the_runs_own_request_is_absorbed_not_lost() -> None:
    b = H().declaration(DECL).submit("r1")
    _call(b, "r1", "k-r1", "pay-r1-1")
    _call(b, "r1", "k-r1", "pay-r1-1", applied=False, deduplicated=True)
    r = check_exactly_once_effects(b.final("r1", "completed").build(), None)
    assert r.verdict is Verdict.PASS, r.message
    assert r.counts["absorbed_duplicates"] == 1


def test_the_same_key_in_another_tenant_is_another_request() -> None:
    # The world scopes keys by tenant: no deduplication, nothing shared.
    h = _twins("k-r1", tenant_r2="t2").build()
    assert foreign_answers(parse_effects(h)[0]) == []
    assert check_exactly_once_effects(h, None).verdict is Verdict.PASS


def test_only_a_completed_run_is_held_to_its_effect() -> None:
    # A run that ended otherwise may rightly not have had it.
    h = _twins("k-r1", r2_state="failed").build()
    effects, _ = parse_effects(h)
    assert [(a.run_id, o.run_id) for a, o in foreign_answers(effects)] == [("r2", "r1")]
    assert check_exactly_once_effects(h, None).verdict is Verdict.PASS


def test_a_run_that_also_applied_the_request_itself_lost_nothing() -> None:
    b = H().declaration(DECL).submit("r1").submit("r2")
    _call(b, "r1", "k", "pay-r1-1")
    _call(b, "r2", "k", "pay-r1-1", applied=False, deduplicated=True)
    _call(b, "r2", "k-r2", "pay-r2-1")
    h = b.final("r1", "completed").final("r2", "completed").build()
    assert check_exactly_once_effects(h, None).verdict is Verdict.PASS
