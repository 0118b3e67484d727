"""exactly_once_effects, approval_integrity, resume_equivalence, migration_safety."""

from __future__ import annotations

from history_builder import CHARGE, NOTIFY, REFUND, SEND, H

from harness.checkers import (
    check_approval_integrity,
    check_exactly_once_effects,
    check_migration_safety,
    check_resume_equivalence,
)
from harness.model import EventF, Verdict

DECL = {CHARGE: "exactly_once", NOTIFY: "at_least_once", SEND: "at_most_once"}


# -- exactly_once_effects ---------------------------------------------------------


def test_one_applied_effect_per_logical_operation_passes() -> None:
    h = H().declaration(DECL).run("r1", (CHARGE, "h1"), (NOTIFY, "n1")).build()
    r = check_exactly_once_effects(h, None)
    assert r.verdict is Verdict.PASS, r.message
    assert r.counts["logical_ops"] == 2 and r.counts["applied_effects"] == 2


def test_an_exactly_once_effect_applied_twice_fails_with_both_effects_as_witness() -> None:
    b = H().declaration(DECL).submit("r1").effect("r1").mark("a").effect("r1").mark("b")
    r = check_exactly_once_effects(b.final("r1", "completed").build(), None)
    assert r.verdict is Verdict.FAIL
    assert r.witness == (b.marks["a"], b.marks["b"])
    assert "payments.charge" in r.message and "r1" in r.message and "2 times" in r.message


def test_an_undeclared_kind_is_held_to_exactly_once() -> None:
    h = H().submit("r1").effect("r1", "x.y").effect("r1", "x.y").final("r1", "completed")
    r = check_exactly_once_effects(h.build(), None)
    assert r.verdict is Verdict.FAIL
    assert "No declaration" in r.message


def test_at_least_once_duplicates_are_counted_not_failed() -> None:
    h = H().declaration(DECL).submit("r1").effect("r1", NOTIFY).effect("r1", NOTIFY)
    r = check_exactly_once_effects(h.final("r1", "completed").build(), None)
    assert r.verdict is Verdict.PASS
    assert r.counts["at_least_once_duplicates"] == 1


def test_an_at_most_once_effect_applied_twice_fails() -> None:
    h = H().declaration(DECL).submit("r1").effect("r1", SEND).effect("r1", SEND)
    assert check_exactly_once_effects(h.build(), None).verdict is Verdict.FAIL


def test_repeats_absorbed_by_idempotency_are_counted_never_failed() -> None:
    h = (
        H()
        .declaration(DECL)
        .submit("r1")
        .effect("r1")
        .effect("r1", applied=False, deduplicated=True)
        .final("r1", "completed")
    )
    r = check_exactly_once_effects(h.build(), None)
    assert r.verdict is Verdict.PASS
    assert r.counts["absorbed_duplicates"] == 1


def test_read_only_calls_and_other_requests_are_not_duplicates() -> None:
    h = (
        H()
        .declaration(DECL)
        .submit("r1")
        .effect("r1", "identity.verify", side_effect=False)
        .effect("r1", "identity.verify", side_effect=False)
        .effect("r1", CHARGE, "h1")
        .effect("r1", CHARGE, "h2")
        .final("r1", "completed")
    )
    assert check_exactly_once_effects(h.build(), None).verdict is Verdict.PASS


def test_an_approval_gated_effect_of_a_cancelled_run_fails() -> None:
    b = H().declaration(DECL, needs_approval={REFUND: REFUND}).submit("r1")
    b.effect("r1", REFUND).mark("e").final("r1", "cancelled").mark("f")
    r = check_exactly_once_effects(b.build(), None)
    assert r.verdict is Verdict.FAIL
    assert r.witness == (b.marks["e"], b.marks["f"])
    assert "cancelled" in r.message


def test_an_effect_of_a_run_whose_submission_failed_fails() -> None:
    b = H().declaration(DECL).submit("r1", outcome="fail").mark("s").effect("r1").mark("e")
    r = check_exactly_once_effects(b.build(), None)
    assert r.verdict is Verdict.FAIL
    assert r.witness == (b.marks["s"], b.marks["e"])


def test_a_silently_dropped_at_most_once_effect_fails_against_the_oracle() -> None:
    oracle = H().declaration(DECL).run("r1", (SEND, "m1")).build()
    b = (
        H()
        .declaration(DECL)
        .submit("r1")
        .effect("r1", SEND, "m1", applied=False, outcome="killed_before_apply")
    )
    b.final("r1", "completed").mark("f")
    r = check_exactly_once_effects(b.build(), oracle)
    assert r.verdict is Verdict.FAIL
    assert "silently dropped" in r.message
    assert b.marks["f"] in r.witness


def test_an_at_most_once_effect_surfaced_as_needs_operator_passes() -> None:
    oracle = H().declaration(DECL).run("r1", (SEND, "m1")).build()
    h = H().declaration(DECL).submit("r1").final("r1", "needs_operator").build()
    r = check_exactly_once_effects(h, oracle)
    assert r.verdict is Verdict.PASS


def test_an_effect_record_without_a_request_hash_is_unknown() -> None:
    b = H().declaration(DECL).submit("r1")
    b.add("info", b.events[0].f.EFFECT, {"kind": CHARGE, "applied": True}).mark("bad")
    r = check_exactly_once_effects(b.build(), None)
    assert r.verdict is Verdict.UNKNOWN
    assert r.witness == (b.marks["bad"],)


# -- approval_integrity ------------------------------------------------------------

GATED = {REFUND: REFUND}


def test_an_effect_approved_for_its_exact_parameters_passes() -> None:
    h = H().declaration(DECL, needs_approval=GATED).submit("r1").deliver("r1")
    h.approval("r1", params_hash="h1")
    r = check_approval_integrity(
        h.effect("r1", REFUND, "h1").final("r1", "completed").build(), None
    )
    assert r.verdict is Verdict.PASS, r.message
    assert r.counts["authorized"] == 1


def test_an_effect_without_any_approval_fails() -> None:
    b = H().declaration(DECL, needs_approval=GATED).submit("r1").effect("r1", REFUND).mark("e")
    r = check_approval_integrity(b.build(), None)
    assert r.verdict is Verdict.FAIL
    assert r.witness == (b.marks["e"],)
    assert "no approval record" in r.message


def test_an_approval_for_other_parameters_fails_and_is_part_of_the_witness() -> None:
    b = H().declaration(DECL, needs_approval=GATED).submit("r1")
    b.approval("r1", params_hash="other").mark("a").effect("r1", REFUND, "h1").mark("e")
    r = check_approval_integrity(b.build(), None)
    assert r.verdict is Verdict.FAIL
    assert r.witness == (b.marks["a"], b.marks["e"])
    assert "other parameters" in r.message


def test_an_effect_after_its_approval_expired_fails() -> None:
    b = H().declaration(DECL, needs_approval=GATED).submit("r1").approval("r1", expires_at=5.0)
    r = check_approval_integrity(b.effect("r1", REFUND, at=6.0).build(), None)
    assert r.verdict is Verdict.FAIL
    assert "expired at 5" in r.message


def test_expires_at_is_the_first_instant_an_approval_no_longer_counts() -> None:
    """As a JWT's ``exp`` (RFC 7519 4.1.4), and as the harness's clock
    faults read it: an effect at the very instant, or a decision recorded
    then, is expired; a hair before, it counts."""
    b = H().declaration(DECL, needs_approval=GATED).submit("r1").approval("r1", expires_at=5.0)
    r = check_approval_integrity(b.effect("r1", REFUND, at=5.0).build(), None)
    assert r.verdict is Verdict.FAIL
    assert "the first instant it no longer counts" in r.message
    b = H().declaration(DECL, needs_approval=GATED).submit("r1").approval("r1", expires_at=5.0)
    r = check_approval_integrity(b.effect("r1", REFUND, at=4.999).build(), None)
    assert r.verdict is not Verdict.FAIL and r.counts["authorized"] == 1, r.message
    b = H().declaration(DECL, needs_approval=GATED).submit("r1")
    b.approval("r1", expires_at=5.0, decided_at=5.0)
    r = check_approval_integrity(b.build(), None)
    assert r.verdict is Verdict.FAIL
    assert "at 5.0, the instant it expired" in r.message


def test_a_rejected_approval_does_not_authorize() -> None:
    b = H().declaration(DECL, needs_approval=GATED).submit("r1").approval("r1", decision="rejected")
    r = check_approval_integrity(b.effect("r1", REFUND).build(), None)
    assert r.verdict is Verdict.FAIL
    assert "rejected" in r.message


def test_an_approval_executed_twice_fails_naming_the_approval() -> None:
    b = H().declaration(DECL, needs_approval=GATED).submit("r1").approval("r1", approval_id="ap-7")
    b.effect("r1", REFUND).effect("r1", REFUND)
    r = check_approval_integrity(b.build(), None)
    assert r.verdict is Verdict.FAIL
    assert "ap-7 executed 2 times" in r.message


def test_approval_integrity_is_unknown_without_a_declaration() -> None:
    r = check_approval_integrity(H().submit("r1").effect("r1", REFUND).build(), None)
    assert r.verdict is Verdict.UNKNOWN


def test_approval_integrity_passes_when_nothing_needs_approval() -> None:
    r = check_approval_integrity(H().declaration(DECL).run("r1", (REFUND, "h")).build(), None)
    assert r.verdict is Verdict.PASS


# -- resume_equivalence -------------------------------------------------------------


def _oracle() -> H:
    return (
        H()
        .declaration(DECL)
        .run("r1", (CHARGE, "h1"), (NOTIFY, "n1"), output={"ref": "pay-1"})
        .run("r2", (SEND, "m1"), output={"ok": True})
    )


def test_runs_that_end_as_in_the_oracle_pass() -> None:
    h = (
        H()
        .declaration(DECL)
        .submit("r1")
        .effect("r1", CHARGE, "h1")
        .effect("r1", NOTIFY, "n1")
        .effect("r1", NOTIFY, "n1")  # a redelivery: sets are equal
        .final("r1", "completed", {"ref": "pay-1"})
        .run("r2", (SEND, "m1"), output={"ok": True})
    )
    r = check_resume_equivalence(h.build(), _oracle().build())
    assert r.verdict is Verdict.PASS, r.message
    assert r.counts["equivalent"] == 2


def test_a_different_output_fails_naming_the_key() -> None:
    b = H().declaration(DECL).run("r1", (CHARGE, "h1"), (NOTIFY, "n1"), output={"ref": "pay-2"})
    b.mark("f").run("r2", (SEND, "m1"), output={"ok": True})
    r = check_resume_equivalence(b.build(), _oracle().build())
    assert r.verdict is Verdict.FAIL
    assert "r1" in r.message and "ref" in r.message
    assert r.witness == (b.marks["f"],)


def test_an_extra_exactly_once_effect_fails_with_the_effects_in_the_witness() -> None:
    b = H().declaration(DECL).submit("r1").effect("r1", CHARGE, "h1").mark("a")
    b.effect("r1", CHARGE, "h1").mark("b").effect("r1", NOTIFY, "n1")
    b.final("r1", "completed", {"ref": "pay-1"}).mark("f").run(
        "r2", (SEND, "m1"), output={"ok": True}
    )
    r = check_resume_equivalence(b.build(), _oracle().build())
    assert r.verdict is Verdict.FAIL
    assert r.witness == (b.marks["a"], b.marks["b"], b.marks["f"])


def test_needs_operator_on_an_at_most_once_effect_is_a_legitimate_divergence() -> None:
    h = H().declaration(DECL).run("r1", (CHARGE, "h1"), (NOTIFY, "n1"), output={"ref": "pay-1"})
    h.submit("r2").final("r2", "needs_operator")
    r = check_resume_equivalence(h.build(), _oracle().build())
    assert r.verdict is Verdict.PASS, r.message
    assert r.counts["needs_operator"] == 1


def test_runs_named_by_a_fault_are_excluded_and_counted() -> None:
    h = H().declaration(DECL).fault("clock", runs=["r1"]).submit("r1").final("r1", "cancelled")
    h.run("r2", (SEND, "m1"), output={"ok": True})
    r = check_resume_equivalence(h.build(), _oracle().build())
    assert r.verdict is Verdict.PASS
    assert r.counts["excluded_by_fault"] == 1


def test_resume_equivalence_is_unknown_without_an_oracle() -> None:
    r = check_resume_equivalence(_oracle().build(), None)
    assert r.verdict is Verdict.UNKNOWN
    assert "oracle" in r.message


def test_a_run_the_oracle_never_finished_is_unknown() -> None:
    h = H().declaration(DECL).run("r9", output={})
    assert check_resume_equivalence(h.build(), _oracle().build()).verdict is Verdict.UNKNOWN


# -- migration_safety ------------------------------------------------------------------


def test_without_migration_faults_migration_safety_passes() -> None:
    r = check_migration_safety(_oracle().build(), None)
    assert r.verdict is Verdict.PASS
    assert r.counts["touched"] == 0


def test_a_migrated_run_that_ends_as_in_the_oracle_passes() -> None:
    h = _oracle().fault("migration", runs=["r1"])
    r = check_migration_safety(h.build(), _oracle().build())
    assert r.verdict is Verdict.PASS, r.message
    assert r.counts == {"equivalent": 1, "parked": 0, "touched": 1}


def test_a_migrated_run_that_lost_a_field_fails() -> None:
    b = H().declaration(DECL).fault("migration", runs=["r1"]).mark("m")
    b.run("r1", (CHARGE, "h-without-field"), (NOTIFY, "n1"), output={"ref": "pay-1"})
    r = check_migration_safety(b.build(), _oracle().build())
    assert r.verdict is Verdict.FAIL
    assert "h-without-fi" in r.message
    assert b.marks["m"] in r.witness


def test_a_migrated_run_parked_with_a_schema_error_passes_even_without_an_oracle() -> None:
    h = H().declaration(DECL).fault("migration").submit("r1")
    h.final("r1", "parked", error="payload schema v3 is newer than this code (v2)")
    r = check_migration_safety(h.build(), None)
    assert r.verdict is Verdict.PASS
    assert r.counts["parked"] == 1


def test_a_run_an_older_release_started_and_today_parks_is_stranded() -> None:
    """Only an older release touched it (at submit): parking it is not the
    answer; the new release must resume it."""
    h = H().declaration(DECL).submit("r1")
    h.add(
        "info",
        EventF.FAULT,
        {"kind": "migration", "fired": True, "runs": ["r1"], "at": "submit", "code_version": 1},
        process="nemesis",
    )
    h.final("r1", "parked", error="payload schema v1 cannot be read by this code").mark("f")
    r = check_migration_safety(h.build(), _oracle().build())
    assert r.verdict is Verdict.FAIL
    assert "stranded" in r.message and "raw status" in r.message
    assert h.marks["f"] in r.witness  # the final event, with the adapter's raw status
    # the same park after an older *worker* read newer data is the right answer
    g = H().declaration(DECL).submit("r1")
    g.add(
        "info",
        EventF.FAULT,
        {"kind": "migration", "fired": True, "runs": ["r1"], "code_version": 1},
        process="nemesis",
    )
    g.final("r1", "parked", error="payload schema v3 is newer than this code (v2)")
    assert check_migration_safety(g.build(), _oracle().build()).verdict is Verdict.PASS


def _older_release_run(*charges: str, state: str = "completed") -> H:
    """r1 submitted and run by a worker of the older release (v1), which
    builds its requests in its own shape (``h1-v1`` where today's code asks
    ``h1``) and so gets another reference from the world; r2 as the oracle."""
    h = H().declaration(DECL).submit("r1")
    h.add("invoke", EventF.WORKER, {"worker_id": "v1", "crash": None, "code_version": 1})
    h.add(
        "info",
        EventF.FAULT,
        {"kind": "migration", "fired": True, "runs": ["r1"], "code_version": 1},
        process="nemesis",
    ).mark("m")
    for digest in charges:
        h.effect("r1", CHARGE, digest, worker_id="v1")
    h.effect("r1", NOTIFY, "n1", worker_id="v1")
    h.final("r1", state, output={"ref": "pay-1-v1"}).mark("f")
    return h.run("r2", (SEND, "m1"), output={"ok": True})


def test_requests_an_older_release_made_in_its_own_shape_are_compared_by_kind() -> None:
    """Seen on the correct reference runtime: a refund submitted, approved
    and finished under the older release asks for the refund without the
    currency today's code adds, so neither the request hash nor the world's
    reference can match today's oracle. That is the release's shape, not a
    lost field."""
    r = check_migration_safety(_older_release_run("h1-v1").build(), _oracle().build())
    assert r.verdict is Verdict.PASS, r.message
    assert r.counts["older_release_requests"] == 1 and r.counts["equivalent"] == 1


def test_an_older_release_that_charges_twice_or_ends_otherwise_still_fails() -> None:
    twice = _older_release_run("h1-v1", "h1-v1b")
    r = check_migration_safety(twice.build(), _oracle().build())
    assert r.verdict is Verdict.FAIL
    assert "payments.charge request of any shape applied 2x here, 1x in the oracle" in r.message
    failed = _older_release_run("h1-v1", state="failed")
    r = check_migration_safety(failed.build(), _oracle().build())
    assert r.verdict is Verdict.FAIL and "state failed vs the oracle's completed" in r.message
    # today's workers' requests are still compared hash for hash
    h = H().declaration(DECL).fault("migration", runs=["r1"])
    h.submit("r1").effect("r1", CHARGE, "h1-v1", worker_id="w1").effect("r1", NOTIFY, "n1")
    h.final("r1", "completed", output={"ref": "pay-1"}).run("r2", (SEND, "m1"), output={"ok": True})
    r = check_migration_safety(h.build(), _oracle().build())
    assert r.verdict is Verdict.FAIL and "h1-v1" in r.message


def test_a_migrated_run_parked_without_a_reason_fails() -> None:
    h = H().declaration(DECL).fault("migration", runs=["r1"]).submit("r1")
    r = check_migration_safety(h.final("r1", "parked", error="oops").build(), None)
    assert r.verdict is Verdict.FAIL


def test_a_migrated_run_that_did_not_park_is_unknown_without_an_oracle() -> None:
    h = _oracle().fault("migration", runs=["r1"])
    assert check_migration_safety(h.build(), None).verdict is Verdict.UNKNOWN
