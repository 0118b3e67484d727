"""The run state machine, defined in code.

``TRANSITIONS`` is the single source of truth for which status may follow
which; :func:`check_transition` rejects anything else with a clear error. A
harness reads the same table to judge histories (``legal_transitions``).
"""

from __future__ import annotations

from enum import StrEnum

from ._errors import IllegalTransitionError


class RunStatus(StrEnum):
    CREATED = "Created"
    RUNNING = "Running"
    WAITING_FOR_APPROVAL = "WaitingForApproval"
    WAITING_FOR_EVENT = "WaitingForEvent"
    RETRY_SCHEDULED = "RetryScheduled"
    RECONCILING = "Reconciling"
    COMPLETED = "Completed"
    FAILED = "Failed"
    CANCELLED = "Cancelled"


S = RunStatus

#: Legal successors of each status. Self-loops (Running -> Running, a wait ->
#: the same wait) are checkpoints that make progress or consume a message
#: without changing status; each still bumps ``state_version``.
TRANSITIONS: dict[RunStatus, frozenset[RunStatus]] = {
    S.CREATED: frozenset({S.RUNNING, S.CANCELLED, S.FAILED}),
    S.RUNNING: frozenset(
        {
            S.RUNNING,
            S.WAITING_FOR_APPROVAL,
            S.WAITING_FOR_EVENT,
            S.RETRY_SCHEDULED,
            S.RECONCILING,
            S.COMPLETED,
            S.FAILED,
            S.CANCELLED,
        }
    ),
    S.WAITING_FOR_APPROVAL: frozenset({S.RUNNING, S.CANCELLED, S.FAILED, S.WAITING_FOR_APPROVAL}),
    S.WAITING_FOR_EVENT: frozenset({S.RUNNING, S.CANCELLED, S.FAILED, S.WAITING_FOR_EVENT}),
    S.RETRY_SCHEDULED: frozenset({S.RUNNING, S.FAILED, S.CANCELLED}),
    # Cancelled: a resend found its approval expired while the run was down.
    S.RECONCILING: frozenset(
        {S.RUNNING, S.RETRY_SCHEDULED, S.WAITING_FOR_EVENT, S.FAILED, S.CANCELLED}
    ),
    S.COMPLETED: frozenset(),
    S.FAILED: frozenset(),
    S.CANCELLED: frozenset(),
}

TERMINAL: frozenset[RunStatus] = frozenset({S.COMPLETED, S.FAILED, S.CANCELLED})
WAITING: frozenset[RunStatus] = frozenset({S.WAITING_FOR_APPROVAL, S.WAITING_FOR_EVENT})
#: Statuses a worker may pick up when ``wake_at`` has passed (or is unset).
ACTIVE: frozenset[RunStatus] = frozenset({S.CREATED, S.RUNNING, S.RETRY_SCHEDULED, S.RECONCILING})


def is_legal(src: RunStatus | str, dst: RunStatus | str) -> bool:
    """Whether the state machine has an edge ``src -> dst``."""
    return RunStatus(dst) in TRANSITIONS[RunStatus(src)]


def check_transition(run_id: str, src: RunStatus | str, dst: RunStatus | str) -> None:
    """Raise :class:`IllegalTransitionError` unless ``src -> dst`` is legal."""
    if not is_legal(src, dst):
        allowed = tuple(sorted(s.value for s in TRANSITIONS[RunStatus(src)]))
        raise IllegalTransitionError(run_id, str(RunStatus(src)), str(RunStatus(dst)), allowed)
