"""The reference fork server's warm-up (``harness.adapters.reference._warm``)."""

from __future__ import annotations

from harness.adapters.reference import _deployment, _warm


def test_the_warm_up_round_trips_every_sample_record_of_the_current_runtime() -> None:
    # warm() swallows errors so that a stale sample never stops the fork
    # server; this is where a sample the records refuse shows up.
    _warm._round_trips()
    kinds = {type(r).__name__ for r in _warm._samples()}
    assert kinds == {
        "Run",
        "WorkingState",
        "Operation",
        "Approval",
        "MemoryRecord",
        "AuditEvent",
        "InboxMessage",
        "ArtifactRef",
    }


def test_the_reference_fork_server_preloads_the_warm_up_last() -> None:
    # last: it imports what the other preloads import, and warms them
    for backend, queue in (("sqlite", "store"), ("postgres", "redis")):
        preload = _deployment._preload(backend, queue)
        assert "harness.adapters.reference._warm" in preload
        assert preload.index("harness.adapters.reference._warm") == len(_deployment.PRELOAD) - 1
