"""The lease queue of docs/adapters.md ("Leases and timers"), issue 29.

A newcomer's job queue: leases of 30 s, a worker that sends an email with
no dedupe. With the kit's clock (``Capability.CLOCK``, a ``FileClock``,
``wake_at`` at the lease's expiry) the harness waits a dead worker's lease
out and sees the second email; declared ``at_least_once``, that repeat is
what the queue promised, and nothing fails; a queue that keys or looks up
its call passes. Each search is small (a few targeted scenarios, seconds).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import harness
from harness.report import Report

SPEC = "examples.lease_queue.adapter:LeaseQueueAdapter"
ROOT = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, **options: str) -> Report:
    return harness.run(
        SPEC,
        options=options,
        profile="dev",
        seed=0,
        max_examples=6,
        budget=60,
        report_dir=tmp_path / "report",
    )


def _verdicts(report: Report) -> dict[str, str]:
    return {p.name: p.verdict for p in report.properties}


def _counts(report: Report, name: str) -> dict[str, int]:
    return next(p.counts for p in report.properties if p.name == name)


def test_the_naive_queue_sends_the_email_twice_and_fails_exactly_once(tmp_path: Path) -> None:
    report = _run(tmp_path, job="send_welcome", delivery="exactly_once")
    assert _verdicts(report)["exactly_once_effects"] == "fail"
    assert report.counterexample is not None
    # the worker dies right after the send; its lease expires; the job runs again
    steps = "\n".join(report.counterexample.steps)
    assert "kill_after_apply" in steps and "email.send" in steps, steps


def test_the_naive_queue_declared_at_least_once_keeps_its_promise(tmp_path: Path) -> None:
    report = _run(tmp_path, job="send_welcome", delivery="at_least_once")
    verdicts = _verdicts(report)
    assert "fail" not in verdicts.values(), verdicts
    assert verdicts["exactly_once_effects"] == verdicts["resume_equivalence"] == "pass"
    # earned: the email was really sent twice, and the run ended holding the
    # second send's reference, which resume_equivalence took as the repeat
    assert _counts(report, "exactly_once_effects")["at_least_once_duplicates"] >= 1
    assert _counts(report, "resume_equivalence")["at_least_once_new_ref"] >= 1


@pytest.mark.parametrize("job", ["charge", "open_account"])
def test_the_queue_that_keys_or_looks_up_its_call_passes(job: str, tmp_path: Path) -> None:
    report = _run(tmp_path, job=job)  # declared exactly_once
    verdicts = _verdicts(report)
    assert report.verdict == "pass", verdicts
    assert verdicts["exactly_once_effects"] == verdicts["resume_equivalence"] == "pass"
    assert verdicts["progress"] == "pass"


# -- check-adapter: the promise, and the lease that never expires -------------------


def _check_adapter(tmp_path: Path, *opts: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    words = [w for o in opts for w in ("--adapter-opt", o)]
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", "check-adapter", SPEC, *words],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_check_adapter_refuses_exactly_once_on_a_service_with_no_key_and_no_lookup(
    tmp_path: Path,
) -> None:
    proc = _check_adapter(tmp_path, "job=send_welcome", "delivery=exactly_once")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "workflow send_welcome: PROBLEM: a delivery promise the service cannot keep" in (
        proc.stdout
    )
    # the reason, and the fix
    assert "email.send is declared exactly_once, but the email service takes no " in proc.stdout
    assert "idempotency key and offers no lookup" in proc.stdout
    assert "delivery={'email.send': 'at_least_once'} if it calls again" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


def test_check_adapter_warns_of_a_lease_that_can_never_expire(tmp_path: Path) -> None:
    # the guide's minimal pattern on a queue with leases: no clock, no wake_at
    proc = _check_adapter(tmp_path, "clock=constant", "delivery=at_least_once")
    assert proc.returncode == 0, proc.stdout + proc.stderr  # a warning, not a refusal
    assert (
        "warning: run probe1 was left running after the world killed its worker right "
        "after email.send" in proc.stdout
    ), proc.stdout
    assert "Declare Capability.CLOCK" in proc.stdout
    assert "RunView(state=RUNNING, wake_at=<lease expiry>)" in proc.stdout
    assert "with 1 warning above to read first" in proc.stdout
    # declared as the recipe says, nothing to warn of
    proc = _check_adapter(tmp_path, "clock=virtual", "delivery=at_least_once")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "warning:" not in proc.stdout
