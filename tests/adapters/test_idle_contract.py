"""The idle rule's contract (issue 18): quiet for ``quiet`` polls in a row,
where a poll is quiet when the snapshot did not change *and* the adapter's
``busy`` predicate says no run has a task pending (a retry timer the
snapshot cannot show)."""

from __future__ import annotations

from harness.adapters.kit import GAVE_UP, IdlePolicy, work_until_idle

POLICY = IdlePolicy(quiet=3, interval=0.001, give_up=60.0)


class Runtime:
    """A runtime whose runs look the same while a retry is pending: the
    snapshot never changes; ``pending`` says how many more polls the retry
    timer has to run."""

    def __init__(self, pending: int) -> None:
        self.pending = pending
        self.probes = 0
        self.asked: list[tuple[str, ...]] = []

    def probe(self) -> tuple[str, ...]:
        self.probes += 1
        return ("r1:RUNNING",)

    def busy(self, snapshot: tuple[str, ...]) -> bool:
        self.asked.append(snapshot)
        self.pending -= 1
        return self.pending >= 0


def test_without_busy_an_unchanged_snapshot_is_idle_after_quiet_polls() -> None:
    rt = Runtime(pending=5)
    assert work_until_idle(rt.probe, POLICY) == 0
    assert rt.probes == 1 + 3, "the first look, then three quiet polls: the retry is missed"


def test_a_pending_task_keeps_the_worker_until_it_is_done_then_quiet_polls() -> None:
    rt = Runtime(pending=5)
    assert work_until_idle(rt.probe, POLICY, busy=rt.busy) == 0
    assert rt.probes == 1 + 5 + 3, "five busy polls, then three quiet ones"
    assert rt.asked == [("r1:RUNNING",)] * 8, "busy is asked about each poll's snapshot"


def test_a_change_restarts_the_count_even_when_nothing_is_pending() -> None:
    snapshots = iter(["a", "a", "b", "b", "b", "b"])
    assert work_until_idle(lambda: next(snapshots), POLICY, busy=lambda s: False) == 0


def test_a_runtime_busy_for_ever_gives_up() -> None:
    policy = IdlePolicy(quiet=1, interval=0.01, give_up=0.2)
    assert work_until_idle(lambda: 1, policy, busy=lambda s: True) == GAVE_UP
