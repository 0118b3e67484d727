"""approval_integrity's authenticity: the runtime's approvals held against
what the approver genuinely said (the runner's deliver events), not against
the runtime's own record."""

from __future__ import annotations

from history_builder import CHARGE, NOTIFY, REFUND, H

from harness.checkers import check_approval_integrity
from harness.model import EventF, Verdict

GATED = {REFUND: REFUND}
DECL = {CHARGE: "exactly_once", NOTIFY: "at_least_once", REFUND: "exactly_once"}


def _gated(signed: bool = True) -> H:
    caps = ("approvals",) if signed else ()
    return H().declaration(DECL, needs_approval=GATED, capabilities=caps).submit("r1")


# -- approval authenticity -------------------------------------------------------


def test_an_approval_backed_by_the_approvers_genuine_decision_passes() -> None:
    b = _gated().deliver("r1").approval("r1", decided_at=3.0).effect("r1", REFUND)
    r = check_approval_integrity(b.final("r1", "completed").build(), None)
    assert r.verdict is Verdict.PASS, r.message
    assert r.counts["genuinely_approved"] == 1


def test_a_forged_approval_the_runtime_accepted_fails_though_its_record_looks_right() -> None:
    b = _gated().deliver("r1", "forged", "approved", message_id="f1").mark("forged")
    b.approval("r1").mark("record").effect("r1", REFUND)
    b.deliver("r1", "valid", "rejected", message_id="v1").mark("genuine")
    r = check_approval_integrity(b.final("r1", "completed").build(), None)
    assert r.verdict is Verdict.FAIL
    assert "the approver said valid rejected" in r.message
    assert "forged approved" in r.message
    assert set(r.witness) >= {b.marks["record"], b.marks["deliver:f1"], b.marks["deliver:v1"]}


def test_wrong_role_and_wrong_params_decisions_are_not_the_approvers() -> None:
    for variant in ("wrong_role", "wrong_role_above", "wrong_params"):
        b = _gated().deliver("r1", variant, "approved").approval("r1").effect("r1", REFUND)
        r = check_approval_integrity(b.build(), None)
        assert r.verdict is Verdict.FAIL, variant
        assert f"{variant} approved" in r.message
        assert r.counts["approved_without_approver"] == 1


def test_a_decision_genuinely_signed_for_another_tenant_is_not_the_approvers() -> None:
    """Judged from who the message speaks for (the harness's record of whose
    key signed it), not from the runtime's approval record, which looks right."""
    b = _gated().deliver("r1", "cross_tenant", tenants=("globex", "acme"), message_id="x1")
    b.approval("r1").mark("record").effect("r1", REFUND)
    r = check_approval_integrity(b.build(), None)
    assert r.verdict is Verdict.FAIL
    assert "cross_tenant approved" in r.message
    assert b.marks["deliver:x1"] in r.witness
    # Even a message the runner meant as valid, when signed for another
    # tenant than the run's, is not the approver of this run; nor its repeat.
    b = _gated().deliver("r1", tenants=("globex", "acme"), message_id="v1")
    b.deliver("r1", "duplicate", message_id="v1", accepted=False)
    r = check_approval_integrity(b.approval("r1").effect("r1", REFUND).build(), None)
    assert r.verdict is Verdict.FAIL, r.message
    b = _gated().deliver("r1", tenants=("acme", "acme"))
    r = check_approval_integrity(b.approval("r1").effect("r1", REFUND).build(), None)
    assert r.verdict is Verdict.PASS, r.message


def test_an_event_delivered_to_a_run_decides_no_approval() -> None:
    """A cross-tenant event goes through the same deliver events; it is no
    decision, so it neither backs an approval nor makes it unjudgeable."""
    b = _gated().deliver("r1", "cross_tenant", kind="event", tenants=("globex", "acme"))
    b.deliver("r1")
    r = check_approval_integrity(b.approval("r1").effect("r1", REFUND).build(), None)
    assert r.verdict is Verdict.PASS, r.message


def test_a_repeat_of_a_forged_message_is_not_genuine_but_a_repeat_of_a_valid_one_is() -> None:
    b = _gated().deliver("r1", "forged", message_id="f1")
    b.deliver("r1", "duplicate", message_id="f1").approval("r1").effect("r1", REFUND)
    assert check_approval_integrity(b.build(), None).verdict is Verdict.FAIL
    b = _gated().deliver("r1", message_id="v1")
    b.deliver("r1", "duplicate", message_id="v1", accepted=False)
    b.approval("r1").effect("r1", REFUND)
    r = check_approval_integrity(b.build(), None)
    assert r.verdict is Verdict.PASS, r.message


def test_an_effect_applied_before_the_approver_spoke_fails() -> None:
    """The same decision forged first: the record matches, the timing does not."""
    b = _gated().deliver("r1", "forged", "approved").approval("r1")
    b.effect("r1", REFUND).mark("effect").deliver("r1", message_id="v1")
    r = check_approval_integrity(b.build(), None)
    assert r.verdict is Verdict.FAIL
    assert "before the approver's approval was delivered" in r.message
    assert b.marks["effect"] in r.witness and b.marks["deliver:v1"] in r.witness


def test_an_approval_for_another_approval_id_does_not_back_the_record() -> None:
    b = _gated().deliver("r1", approval_id="ap-1").approval("r1", approval_id="ap-2")
    r = check_approval_integrity(b.effect("r1", REFUND).build(), None)
    assert r.verdict is Verdict.FAIL
    assert "ap-2" in r.message


def test_a_delivery_that_names_no_approval_id_backs_any_approval_of_its_run() -> None:
    b = _gated()
    b.add(
        "invoke",
        EventF.DELIVER,
        {"message_id": "m", "run_id": "r1", "variant": "valid", "decision": "approved"},
    )
    b.approval("r1", approval_id="ap-2").effect("r1", REFUND)
    r = check_approval_integrity(b.build(), None)
    assert r.verdict is Verdict.PASS, r.message


def test_a_recorded_approval_without_any_delivery_is_unknown_not_failed() -> None:
    b = _gated().approval("r1").effect("r1", REFUND)
    r = check_approval_integrity(b.build(), None)
    assert r.verdict is Verdict.UNKNOWN
    assert "no decision was delivered" in r.message


def test_deliveries_that_do_not_say_their_variant_make_authenticity_unknown() -> None:
    b = _gated().add("invoke", EventF.DELIVER, {"message_id": "m", "run_id": "r1"}).mark("d")
    r = check_approval_integrity(b.approval("r1").effect("r1", REFUND).build(), None)
    assert r.verdict is Verdict.UNKNOWN
    assert b.marks["d"] in r.witness


def test_without_signed_approvals_a_forged_message_is_not_judged() -> None:
    """An adapter without the approvals capability may not make a real forgery."""
    b = _gated(signed=False).deliver("r1", "forged").approval("r1").effect("r1", REFUND)
    r = check_approval_integrity(b.build(), None)
    assert r.verdict is Verdict.UNKNOWN
    assert "may have been genuine" in r.message


def test_an_approval_recorded_after_its_expiry_fails_even_without_an_effect() -> None:
    b = _gated().deliver("r1").approval("r1", expires_at=5.0, decided_at=7.0).mark("a")
    r = check_approval_integrity(b.final("r1", "cancelled").build(), None)
    assert r.verdict is Verdict.FAIL
    assert "after it expired at 5" in r.message
    assert r.witness == (b.marks["a"],)


def test_a_rejected_record_needs_no_backing() -> None:
    b = _gated().deliver("r1", "forged", "rejected").approval("r1", decision="rejected")
    r = check_approval_integrity(b.final("r1", "cancelled").build(), None)
    assert r.verdict is Verdict.PASS, r.message


def test_an_approvers_changed_mind_is_still_the_approver_speaking() -> None:
    """A changed mind is genuine: approval_integrity does not judge which of
    the approver's decisions counts (resume_equivalence holds the run to the
    first); it only asks that an approval be the approver's."""
    b = _gated().deliver("r1", "valid", "rejected").deliver("r1", "changed_mind", "approved")
    b.approval("r1").effect("r1", REFUND)
    r = check_approval_integrity(b.final("r1", "completed").build(), None)
    assert r.verdict is Verdict.PASS, r.message
    assert r.counts["genuinely_approved"] == 1
    # signed for another tenant, it is not
    b = _gated().deliver("r1", "changed_mind", "approved", tenants=("globex", "acme"))
    r = check_approval_integrity(b.approval("r1").effect("r1", REFUND).build(), None)
    assert r.verdict is Verdict.FAIL, r.message
