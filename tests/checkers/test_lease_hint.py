"""A run stuck in ``running`` says what to declare (issue 29).

Under a constant clock a job queue's lease never expires: the run a dead
worker held stays ``running`` and ``progress`` fails it. The failure stays
a failure, and now says what the adapter must declare for the harness to
wait a lease out: the clock capability and the run's ``wake_at``.
"""

from __future__ import annotations

from history_builder import H

from harness.checkers import check_progress
from harness.checkers._progress import lease_hint
from harness.model import Verdict


def _stuck(capabilities: tuple[str, ...], wake_at: float | None = None) -> str:
    h = H().declaration(capabilities=capabilities).submit("r1")
    r = check_progress(h.final("r1", "running", wake_at=wake_at).build(), None)
    assert r.verdict is Verdict.FAIL
    assert "run r1 is stuck in running (raw status 'Running')" in r.message
    return r.message


def test_stuck_running_under_a_constant_clock_says_to_declare_the_clock_and_wake_at() -> None:
    message = _stuck(())
    assert "Declare Capability.CLOCK" in message and "FileClock" in message
    assert "RunView(state=RUNNING, wake_at=<lease expiry>)" in message
    # a wake_at alone does not help: nothing moves a constant clock
    assert "Declare Capability.CLOCK" in _stuck((), wake_at=1030.0)


def test_stuck_running_with_a_clock_but_no_wake_at_says_to_report_wake_at() -> None:
    message = _stuck(("clock",))
    assert "Capability.CLOCK" not in message
    assert "report the run as RunView(state=RUNNING, wake_at=<lease expiry>)" in message


def test_no_hint_where_the_harness_could_move_the_clock_or_the_run_is_not_running() -> None:
    assert lease_hint(True, 1030.0) is None
    assert _stuck(("clock",), wake_at=1030.0).endswith("after faults stopped.")
    h = H().declaration(capabilities=()).submit("r1").final("r1", "pending").build()
    r = check_progress(h, None)
    assert r.verdict is Verdict.FAIL and "wake_at" not in r.message


def test_check_adapter_warns_of_each_run_left_running_with_no_way_to_wake_up() -> None:
    from harness.session._check import lease_warnings

    h = (
        H()
        .declaration(capabilities=())
        .submit("r1")
        .submit("r2")
        .submit("r3")
        .final("r1", "running")
        .final("r2", "completed")
        .final("r3", "running", wake_at=1030.0)
        .build()
    )
    constant = lease_warnings(h, False, "in the fault-free run")
    assert [w.split(":")[0] for w in constant] == [
        "run r1 was left running in the fault-free run",
        "run r3 was left running in the fault-free run",
    ]
    assert all("Declare Capability.CLOCK" in w for w in constant)
    # with a clock, only the run that says nothing of when it wakes up
    clock = lease_warnings(h, True, "in the fault-free run")
    assert len(clock) == 1 and clock[0].startswith("run r1 ") and "report the run" in clock[0]
