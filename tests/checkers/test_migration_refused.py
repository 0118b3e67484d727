"""``migration_safety`` judges what a code-version switch did, not what a
service's refusal did: a migrated run that failed after a world fault
refused its call is left out (the correct LangGraph refund app, submitted
under code v1, its email rejected three times, failed its run and was
called unsafe); one that failed with no refusal is still a failure."""

from __future__ import annotations

from typing import Any

from history_builder import CHARGE, H

from harness.checkers import check_migration_safety
from harness.model import EventF, Verdict

DECL = {CHARGE: "exactly_once"}


def _refused(h: H, mode: str) -> H:
    value: dict[str, Any] = {
        "kind": "world_fault",
        "fired": True,
        "mode": mode,
        "service": "email",
        "action": "notify",
        "run_id": "r1",
    }
    return h.add("info", EventF.FAULT, value, process="nemesis")


def _migrated_and_failed(mode: str | None) -> H:
    h = H().declaration(DECL).fault("migration", runs=["r1"]).submit("r1")
    if mode is not None:
        _refused(h, mode)
    return h.final("r1", "failed", error="email refused")


def test_a_run_that_failed_after_a_refusal_is_left_out() -> None:
    oracle = H().declaration(DECL).run("r1", (CHARGE, "h1"), output={"ref": "pay-1"})
    for mode in ("reject", "unavailable", "timeout_before_apply"):
        r = check_migration_safety(_migrated_and_failed(mode).build(), oracle.build())
        assert r.verdict is not Verdict.FAIL, (mode, r.message)
        assert r.counts["excluded_by_other_fault"] == 1


def test_a_run_that_failed_with_no_refusal_still_fails() -> None:
    oracle = H().declaration(DECL).run("r1", (CHARGE, "h1"), output={"ref": "pay-1"})
    r = check_migration_safety(_migrated_and_failed(None).build(), oracle.build())
    assert r.verdict is Verdict.FAIL
    # a fault that only slowed a call is no excuse either
    r = check_migration_safety(_migrated_and_failed("slow").build(), oracle.build())
    assert r.verdict is Verdict.FAIL
