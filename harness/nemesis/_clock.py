"""Clock faults: a jump of virtual time, and the wait a supervisor makes
for a killed worker's lease (both may let approvals expire, and waits
pass their deadlines)."""

from __future__ import annotations

import math
from typing import Any

from ..model import AdvanceClock
from ._context import StepContext
from ._registry import handles


@handles(AdvanceClock)
def advance_clock(ctx: StepContext, step: AdvanceClock) -> None:
    """A scenario's clock jump: ``seconds`` on, or to the deadline of run
    ``until`` (its reported ``wake_at``) plus ``seconds``. A run with no
    deadline ahead (none reported, or already passed) moves nothing: the
    fault is recorded as not fired, with the reason (``reason``, as every
    fault that cannot fire says it)."""
    if step.until is None:
        advance(ctx, step.seconds)
        return
    now = ctx.env.now()
    wake_at = next((r.wake_at for r in ctx.recorder.observe().runs if r.run_id == step.until), None)
    target = None if wake_at is None else wake_at + step.seconds
    if target is None or target <= now:
        why = (
            f"run {step.until} reports no deadline (wake_at)"
            if wake_at is None
            else f"run {step.until}'s deadline {wake_at:g} is not ahead of the clock ({now:g})"
        )
        ctx.recorder.fault("clock", False, seconds=0.0, until=step.until, reason=why, runs=[])
        return
    advance(ctx, target - now, to=target, until=step.until)


def advance(
    ctx: StepContext,
    seconds: float,
    kind: str = "clock",
    to: float | None = None,
    until: str | None = None,
) -> None:
    """Move virtual time; ``kind`` is ``clock`` for a scenario's clock jump,
    ``lease_wait`` for the wait a supervisor makes after a kill. Either may
    let an approval expire, or a wait pass its deadline, so the runs that
    may change are named."""
    env = ctx.env
    before = ctx.recorder.observe()
    then = env.now()
    env.advance_clock(seconds)
    now = env.now()
    # ``to``: an exact instant (a deadline). ``then + (to - then)`` can land
    # an ulp short of it in floating point; a boundary a hair short is no
    # boundary, so step up to it.
    for _ in range(3):
        if to is None or now >= to:
            break
        env.advance_clock(max(to - now, math.ulp(to)))
        now = env.now()
    detail: dict[str, Any] = {} if until is None else {"until": until}
    if to is not None and now != to:
        detail["at"] = now  # where it landed, when not on ``to`` itself
    # expires_at is the first instant an approval no longer counts
    expiring = {
        r.run_id
        for r in before.runs
        if r.approval is not None and float(r.approval.get("expires_at", 0)) <= now
    }
    # A decision already taken expires too: a run that has not yet done
    # what it was approved for must now be refused it (a long outage).
    unfinished = {r.run_id for r in before.runs if not r.state.terminal}
    expiring |= {
        str(a.get("run_id"))
        for a in before.approvals
        if a.get("decision") == "approved"
        and a.get("expires_at") is not None
        and then < float(a["expires_at"]) <= now
        and a.get("run_id") in unfinished
    }
    # A run resting in a wait (for an event, a decision) whose own deadline
    # -- the wake_at its runtime reports -- the jump passes may rightly time
    # out: it is no longer bound to end as its fault-free run did.
    expiring |= {
        r.run_id
        for r in before.runs
        if r.state.legitimate_wait and r.wake_at is not None and r.wake_at <= now
    }
    ctx.recorder.fault(kind, True, seconds=seconds, runs=sorted(expiring), **detail)
