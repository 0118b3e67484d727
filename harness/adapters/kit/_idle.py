"""Idling: when a worker of a runtime that recovers in the background may exit."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

#: The exit code of :func:`work_until_idle` when the runtime never went quiet.
GAVE_UP = 3

T = TypeVar("T")


@dataclass(frozen=True)
class IdlePolicy:
    """When a worker whose runtime works in the background may exit.

    The contract: the worker polls a *probe* (any comparable snapshot of the
    runtime's progress: statuses, versions, a row count) every ``interval``
    seconds. A poll is *quiet* when its snapshot equals the one before it
    and, if the adapter gives a ``busy`` predicate, ``busy(snapshot)`` is
    False: no run of this worker's deployment has a task pending that the
    runtime will hand out by itself (an activity in flight or due for a
    retry, a task queued, a timer due within seconds) -- what the snapshot
    alone cannot show, since nothing changes while a retry timer runs. The
    runtime is idle after ``quiet`` quiet polls in a row. A run the runtime
    fails again and again (``RunState.RETRYING``) is no pending task: its
    worker may exit, and the harness reports the run.

    If it is not idle within ``give_up`` seconds, the worker stops waiting
    (:data:`GAVE_UP`, a failed worker). Keep ``give_up``, plus the time a
    worker takes to start, under the run's worker timeout (``--worker-timeout``
    or the adapter's ``worker_timeout``, default 120 s), or the harness
    kills the worker as stuck first. Real time, on purpose: it measures the
    runtime's own background threads and timers, not the virtual clock.
    """

    quiet: int = 3
    interval: float = 0.05
    give_up: float = 60.0

    def __post_init__(self) -> None:
        if self.quiet < 1 or not self.interval > 0 or not self.give_up > 0:
            raise ValueError(f"IdlePolicy needs quiet >= 1, interval > 0, give_up > 0: {self}")

    def wait(self, probe: Callable[[], T], busy: Callable[[T], bool] | None = None) -> bool:
        """Poll ``probe`` until the runtime is idle (True) or ``give_up``
        seconds have passed (False); ``busy`` (optional) is asked about each
        poll's snapshot. An exception from either propagates."""
        deadline = time.monotonic() + self.give_up
        last, calm = probe(), 0
        while calm < self.quiet:
            if time.monotonic() >= deadline:
                return False
            time.sleep(self.interval)
            now = probe()
            quiet = now == last and not (busy is not None and busy(now))
            calm = calm + 1 if quiet else 0
            last = now
        return True


def work_until_idle(
    probe: Callable[[], T],
    policy: IdlePolicy | None = None,
    *,
    busy: Callable[[T], bool] | None = None,
) -> int:
    """A worker's last line: wait until the runtime is idle -- ``probe``'s
    snapshot unchanged for ``policy.quiet`` polls in a row, ``busy(snapshot)``
    False at each (see :class:`IdlePolicy`) -- then return the worker's exit
    code: 0 when idle, :data:`GAVE_UP` when it never went quiet (the harness
    records a worker that failed, and the run's state says what it was
    doing). For example, a worker of a runtime that retries activities on a
    server timer::

        views = lambda: bridge.run(describe_runs(client))
        return work_until_idle(views, IdlePolicy(quiet=3, interval=0.1, give_up=60),
                               busy=lambda vs: any(v.activity_pending for v in vs))
    """
    return 0 if (policy or IdlePolicy()).wait(probe, busy) else GAVE_UP
