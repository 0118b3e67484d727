"""``progress``: once faults stop, every run ends or rests in a legitimate wait."""

from __future__ import annotations

from collections.abc import Mapping

from ..history import History
from ..model import EventF, PropertyResult, RunState
from ._base import Findings, every, final_state, guarded, plural, short, vnum

NAME = "progress"


@guarded(NAME)
def check_progress(history: History, oracle: History | None) -> PropertyResult:
    """Every run made progress: none lost, none stuck.

    A failure usually means: a run was left behind: stuck in a status
    nothing will move it out of (a lease no worker reclaims, a timer no one
    fires, a run only a supervisor would restart), lost, or retried
    forever.

    Promises: every run whose ``submit`` certainly succeeded (an ``ok``
    completion) has a ``final`` event (missing = *lost*), and every run with
    a ``final`` event -- submitted or spawned, e.g. a child run -- is in a
    terminal state (``completed``, ``failed``, ``cancelled``) or a legitimate
    wait (``waiting_approval``, ``waiting_event``, ``needs_operator``,
    ``parked``). ``running``, ``pending`` and ``unknown`` are *stuck*;
    ``retrying`` (the runtime keeps failing the run and will not give up) is
    *retried forever*, failed with the runtime's message (``error``). Under
    a persistent outage, a run whose workflow declares a ``retry_limit``
    is not refused more often than that by one service action (*retries
    past its limit*: a retry counter that is lost, say, retries for ever).
    A run seen waiting (``wait`` events) whose workflow declares
    ``max_wait_seconds`` reports a deadline no further from the harness's
    clock than that (*a deadline past the declared wait*: taken from
    another clock, or in other units, it keeps the run waiting long after
    it should have timed out, for ever if what it waits for never comes).
    A run stuck in ``running`` is often a lease or a timer the harness could
    not see expire (the clock never moved, or no ``wake_at`` said when): its
    message says what to declare (:func:`lease_hint`). A run
    whose submission ended ``info`` (may have happened) and has no final
    event is counted as unconfirmed, not lost. The oracle is not used.

    Cannot see: whether a wait is the *right* wait (``resume_equivalence``
    compares with the oracle), or runs the history never names. A history
    with runs but no ``final`` event at all was not finished (the runner
    stopped before observing the end): that is ``unknown``, not "all lost".
    """
    f = Findings(NAME)
    f.zero("runs", "terminal", "waiting", "lost", "stuck", "retrying")
    decl = history.declaration()
    _retry_limits(history, f)
    if decl is not None and decl.max_waits:
        _wait_bounds(history, decl.max_waits, f)
    submissions = history.submissions()
    finals = history.finals()
    submitted = [r for r, t in submissions.items() if t == "ok"]
    if submitted and not finals:
        f.unknown(
            f"{plural(len(submitted), 'run')} were submitted but the history has no final "
            "event at all: the scenario's end was not recorded"
        )
        return f.result("")
    for run_id in submitted:
        if run_id not in finals:
            f.fail(
                f"run {run_id} was submitted (ok) but has no final event: it was lost",
                [e.index for e in history.by_run(run_id) if e.f is EventF.SUBMIT][-1:],
            )
            f.count("lost")
    for run_id, t in submissions.items():
        if t in ("info", "invoke") and run_id not in finals:
            f.count("unconfirmed_submits")
    for run_id, final in finals.items():
        f.count("runs")
        state = final_state(final)
        if state is None:
            f.unknown(
                f"run {run_id}'s final state {short(final.value.get('state'))} is not a "
                "normalized run state",
                [final.index],
            )
        elif state.terminal:
            f.count("terminal")
        elif state.legitimate_wait:
            f.count("waiting")
        elif state is RunState.RETRYING:
            f.fail(
                f"run {run_id} is retried forever: the runtime keeps failing it and will not "
                f"give up (raw status {short(final.value.get('raw_status'))}, error "
                f"{short(final.value.get('error'), 300)})",
                [final.index],
            )
            f.count("retrying")
        else:
            hint = None
            if state is RunState.RUNNING and decl is not None and decl.capabilities is not None:
                hint = lease_hint(decl.has_capability("clock"), vnum(final, "wake_at"))
            f.fail(
                f"run {run_id} is stuck in {state.value} "
                f"(raw status {short(final.value.get('raw_status'))}) after faults stopped"
                + ("" if hint is None else f": {hint}"),
                [final.index],
            )
            f.count("stuck")
    return f.result(
        f"{every(f.counts['runs'], 'run')} ended: {f.counts['terminal']} terminal, "
        f"{f.counts['waiting']} in a legitimate wait; none lost, none stuck, none retried "
        "forever",
        evidence=f.counts["runs"] + f.counts["lost"],
    )


def _workflows(history: History) -> dict[str, str]:
    """run id -> its workflow, as its submission (or, for a run the runtime
    spawned, its ``created`` transition's ``detail.workflow``) names it."""
    out: dict[str, str] = {}
    for e in history.by_f(EventF.SUBMIT):
        run_id, workflow = e.value.get("run_id"), e.value.get("workflow")
        if isinstance(run_id, str) and isinstance(workflow, str):
            out.setdefault(run_id, workflow)
    for e in history.by_f(EventF.TRANSITION):
        detail = e.value.get("detail")
        workflow = detail.get("workflow") if isinstance(detail, dict) else None
        run_id = e.value.get("run_id")
        if isinstance(run_id, str) and isinstance(workflow, str) and e.value.get("from") is None:
            out.setdefault(run_id, workflow)
    return out


#: how much a deadline may exceed the declared wait (float rounding of
#: ``now + timeout``, and a clock that ticked between the wait and its view)
WAIT_SLACK = 1.0


def _wait_bounds(history: History, bounds: Mapping[str, float], f: Findings) -> None:
    """Each deadline a waiting run reported, against its workflow's
    declared ``max_wait_seconds`` (measured from the harness's clock when
    the run was seen waiting, so never longer than from its start)."""
    workflows = _workflows(history)
    failed: set[str] = set()
    for e in history.by_f(EventF.WAIT):
        run_id = e.value.get("run_id")
        bound = bounds.get(workflows.get(run_id, "")) if isinstance(run_id, str) else None
        wake_at = vnum(e, "wake_at")
        if bound is None or wake_at is None or not isinstance(run_id, str):
            continue
        f.count("waits_checked")
        ahead = wake_at - e.time
        if ahead > bound + WAIT_SLACK and run_id not in failed:
            failed.add(run_id)
            f.fail(
                f"run {run_id} waits ({short(e.value.get('state'))}) until {wake_at:.0f}, "
                f"{ahead:,.0f} s after the harness's clock ({e.time:.0f}), where its workflow "
                f"{workflows[run_id]!r} declares waits of at most {bound:,.0f} s "
                "(max_wait_seconds): a deadline taken from another clock (wall time for the "
                "harness's) or in other units keeps it waiting long after it should time out",
                [e.index],
            )
            f.count("past_declared_wait")


def _retry_limits(history: History, f: Findings) -> None:
    """Each run an outage refused, against the retry limit it declares."""
    for event in history.faults("outage"):
        limits = event.value.get("retry_limits") or {}
        for run_id, per in (event.value.get("refused") or {}).items():
            limit = limits.get(run_id)
            if limit is None:
                continue
            f.count("retry_limits_checked")
            for action, n in sorted(per.items()):
                if n > limit:
                    f.fail(
                        f"run {run_id} called {action} {n} times while the service "
                        f"refused every call, more than the {limit} its workflow "
                        "declares (retry_limit): its retries do not stop where they should",
                        [event.index],
                    )
                    f.count("past_retry_limit")


def lease_hint(clock: bool, wake_at: float | None) -> str | None:
    """What to declare when a run stays ``running`` because a lease or a timer
    never expires for the harness: ``clock``, the adapter declares the
    ``clock`` capability; ``wake_at``, the run's, as the adapter reported it.
    None when both are there (the harness moved the clock to it)."""
    if not clock:
        return (
            "if the runtime holds a lease on it (a job queue's claim of a worker that died) "
            "or waits on a timer, that lease can never expire here: without the clock "
            "capability the adapter's time is constant. Declare Capability.CLOCK, give the "
            "environment and its workers one FileClock (harness.adapters.kit) that "
            "advance_clock() moves, and report the run as RunView(state=RUNNING, "
            "wake_at=<lease expiry>): the harness moves the clock there when nothing else "
            'moves (docs/adapters.md, "Leases and timers")'
        )
    if wake_at is None:
        return (
            "if the runtime holds a lease on it or waits on a timer, the harness cannot know "
            "when that expires: report the run as RunView(state=RUNNING, wake_at=<lease "
            "expiry>), and the harness moves the clock there when nothing else moves "
            '(docs/adapters.md, "Leases and timers")'
        )
    return None
