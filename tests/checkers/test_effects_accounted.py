"""effects_accounted: a completed run's ledger and output against what the
world applied (oracle-free: a mistake the fault-free run shares shows)."""

from __future__ import annotations

from typing import Any

from history_builder import CHARGE, NOTIFY, H

from harness.checkers import check_effects_accounted
from harness.model import Verdict

DECL = {CHARGE: "exactly_once", NOTIFY: "at_least_once"}
CAPS = ("operations",)


# -- effects_accounted --------------------------------------------------------------


def _op(
    kind: str = CHARGE,
    status: str = "done",
    ref: str | None = "pay-1",
    request_hash: str | None = "h1",
    **extra: Any,
) -> dict[str, Any]:
    raw = {"done": "confirmed", "pending": "prepared", "failed": "failed"}.get(status, status)
    return {
        "run_id": "r1",
        "kind": kind,
        "status": status,
        "raw_status": raw,
        "external_ref": ref,
        "request_hash": request_hash,
        **extra,
    }


def _final(
    b: H, ops: list[dict[str, Any]] | None, state: str = "completed", output: Any = None
) -> H:
    b.final("r1", state, output)
    if ops is not None:
        b.events[-1].value["operations"] = ops
    return b


def _applied(b: H, kind: str = CHARGE, ref: str = "pay-1", digest: str = "h1", **kw: Any) -> H:
    b.effect("r1", kind, digest, **kw)
    b.events[-1].value["external_ref"] = ref
    return b


def _acc(caps: tuple[str, ...] = CAPS) -> H:
    return H().declaration(DECL, capabilities=caps).submit("r1")


def test_a_ledger_that_names_every_applied_effect_passes() -> None:
    b = _applied(_acc()).mark("e")
    r = check_effects_accounted(_final(b, [_op()], output={"payment": "pay-1"}).build(), None)
    assert r.verdict is Verdict.PASS, r.message
    assert r.counts["reflected"] == 1 and r.evidence == 2


def test_an_entry_that_never_recorded_the_worlds_ref_fails() -> None:
    b = _applied(_acc()).mark("e")
    r = check_effects_accounted(_final(b, [_op(ref=None)]).mark("f").build(), None)
    assert r.verdict is Verdict.FAIL
    assert "pay-1" in r.message and "no external ref" in r.message
    assert r.witness == (b.marks["e"], b.marks["f"])


def test_an_entry_left_prepared_after_the_world_applied_it_fails() -> None:
    b = _applied(_acc())
    r = check_effects_accounted(_final(b, [_op(status="pending")]).build(), None)
    assert r.verdict is Verdict.FAIL
    assert "still prepared (pending)" in r.message


def test_an_applied_effect_with_no_entry_at_all_fails() -> None:
    r = check_effects_accounted(_final(_applied(_acc()), []).build(), None)
    assert r.verdict is Verdict.FAIL
    assert "no payments.charge entry" in r.message


def test_a_done_entry_for_a_call_the_world_refused_fails() -> None:
    b = _acc().effect("r1", CHARGE, "h1", applied=False, outcome="rejected").mark("e")
    r = check_effects_accounted(_final(b, [_op(ref=None)]).mark("f").build(), None)
    assert r.verdict is Verdict.FAIL
    assert "never performed" in r.message and "refused" in r.message
    assert r.witness == (b.marks["e"], b.marks["f"])


def test_a_done_entry_naming_a_ref_the_world_never_gave_fails() -> None:
    b = _applied(_acc())
    r = check_effects_accounted(_final(b, [_op(), _op(NOTIFY, ref="mail-x")]).build(), None)
    assert r.verdict is Verdict.FAIL
    assert "mail-x" in r.message and "never gave that ref" in r.message


def test_an_at_least_once_request_applied_twice_needs_only_one_ref_named() -> None:
    b = _applied(_acc(), NOTIFY, "mail-1", "n1")
    b = _applied(b, NOTIFY, "mail-2", "n1")  # a resend after a timeout, or a zombie's
    r = check_effects_accounted(
        _final(b, [_op(NOTIFY, ref="mail-2", request_hash="n1")]).build(), None
    )
    assert r.verdict is Verdict.PASS, r.message


def test_a_deduplicated_repeat_names_the_first_ref() -> None:
    b = _applied(_acc())
    b = _applied(b, applied=False, deduplicated=True)
    r = check_effects_accounted(_final(b, [_op(status="done")]).build(), None)
    assert r.verdict is Verdict.PASS, r.message


def test_runs_that_did_not_complete_are_not_judged() -> None:
    for state in ("cancelled", "failed", "needs_operator"):
        b = _applied(_acc())
        r = check_effects_accounted(_final(b, [_op(status="in_doubt")], state=state).build(), None)
        assert r.verdict is Verdict.PASS, (state, r.message)
        assert r.evidence == 0


def test_an_effect_without_side_effect_need_not_be_in_the_ledger() -> None:
    b = _applied(_acc(), "identity.verify", "idv-1", "v1", applied=False, side_effect=False)
    b.events[-1].value["outcome"] = "applied"
    r = check_effects_accounted(
        _final(b, [_op("identity.verify", ref="idv-1", request_hash="v1")]).build(), None
    )
    assert r.verdict is Verdict.PASS, r.message


def test_an_output_naming_another_runs_ref_fails() -> None:
    b = _applied(_acc())
    b.effect("r2", CHARGE, "h9")
    b.events[-1].value["external_ref"] = "pay-9"
    r = check_effects_accounted(_final(b, [_op()], output={"payment": "pay-9"}).build(), None)
    assert r.verdict is Verdict.FAIL
    assert "output.payment" in r.message and "run r2" in r.message


def test_a_ref_found_by_a_shared_business_key_is_counted_not_failed() -> None:
    b = _acc()
    b.effect("r0", "provisioning.create_account", "a0")
    b.events[-1].value.update(external_ref="acct-0", business_key="t1:k-1")
    op = _op("provisioning.create_account", ref="acct-0", request_hash="a1", business_key="t1:k-1")
    r = check_effects_accounted(_final(b, [op]).build(), None)
    assert r.verdict is Verdict.PASS, r.message
    assert r.counts["shared_refs"] == 1


def test_without_the_operations_capability_nothing_is_judged() -> None:
    b = _applied(_acc(caps=("approvals",)))
    r = check_effects_accounted(_final(b, None).build(), None)
    assert r.verdict is Verdict.PASS and r.evidence == 0
    assert "operations" in r.message


def test_a_completed_run_without_its_operations_list_is_unknown() -> None:
    r = check_effects_accounted(_final(_applied(_acc()), None).build(), None)
    assert r.verdict is Verdict.UNKNOWN
    assert "no operations list" in r.message


def test_a_malformed_entry_is_unknown() -> None:
    b = _applied(_acc())
    r = check_effects_accounted(_final(b, [_op(), {"kind": CHARGE, "status": "??"}]).build(), None)
    assert r.verdict is Verdict.UNKNOWN
