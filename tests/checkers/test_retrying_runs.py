"""``RunState.RETRYING`` (issue 18): a run the runtime keeps failing and
will not give up on is neither ended nor a legitimate wait; ``progress`` and
``migration_safety`` fail it with the runtime's message in the witness."""

from __future__ import annotations

from history_builder import CHARGE, H

from harness.checkers import check_migration_safety, check_progress
from harness.model import RunState, Verdict

DECL = {CHARGE: "exactly_once"}
NONDETERMINISM = "[TMPRL1100] Nondeterminism error: activity type 'notify' expected 'refund'"


def test_retrying_is_neither_terminal_nor_a_legitimate_wait() -> None:
    assert not RunState.RETRYING.terminal
    assert not RunState.RETRYING.legitimate_wait


def test_progress_fails_a_run_retried_forever_with_the_runtimes_message() -> None:
    h = H().declaration(DECL).submit("r1").final("r1", "completed")
    h.submit("r2").final("r2", "retrying", error=NONDETERMINISM).mark("f")
    r = check_progress(h.build(), None)
    assert r.verdict is Verdict.FAIL
    assert "run r2 is retried forever" in r.message
    assert "Nondeterminism error" in r.message
    assert r.witness == (h.marks["f"],)
    assert r.counts["retrying"] == 1 and r.counts["stuck"] == 0 and r.counts["terminal"] == 1


def test_migration_safety_fails_a_migrated_run_retried_forever() -> None:
    oracle = H().declaration(DECL).run("r1", (CHARGE, "h1"), output={"ref": "pay-1"})
    h = H().declaration(DECL).fault("migration", runs=["r1"]).mark("m").submit("r1")
    h.final("r1", "retrying", error=NONDETERMINISM).mark("f")
    r = check_migration_safety(h.build(), oracle.build())
    assert r.verdict is Verdict.FAIL
    assert "retried forever" in r.message and "Nondeterminism error" in r.message
    assert "the oracle ends it completed" in r.message
    assert r.witness == (h.marks["m"], h.marks["f"])
    # Without an oracle it still fails: a run retried forever is never safe.
    assert check_migration_safety(h.build(), None).verdict is Verdict.FAIL
