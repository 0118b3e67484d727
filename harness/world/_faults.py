"""Fault rules: armed durably by the controller, fired by the calling process.

The controller (the harness) arms a :class:`~harness.world.FaultRule` in the
world's file; any worker process that makes the matching call fires it. Which
call matches is decided by durable counters incremented inside the call's
write transaction, so "the 3rd payments call" means the same call whichever
processes make the calls and however the OS schedules them: outcomes come from
rules and counters, never from timing.
"""

from __future__ import annotations

import os
import signal
import sqlite3
from dataclasses import dataclass
from typing import NoReturn, cast

from ._errors import WorldUsageError
from ._model import LOOKUP, MODEL, FaultMode, FaultRule
from ._services import rule_target
from ._store import next_counter, read_counter


@dataclass(frozen=True)
class ArmedRule:
    """A rule as stored in a world: its id, the rule, and whether it fired."""

    rule_id: int
    rule: FaultRule
    fired: bool


def call_counter(service: str, action: str | None) -> str:
    """Name of the durable counter of calls to ``service`` (and ``action``)."""
    return f"calls:{service}" if action is None else f"calls:{service}:{action}"


def arm(conn: sqlite3.Connection, rule: FaultRule) -> int:
    """Store ``rule`` (inside the caller's transaction); returns its id.

    Refuses a rule that can no longer fire because its call already happened,
    since a silently dead rule would make a scenario test nothing.
    """
    if rule.service != MODEL:
        rule_target(rule.service, rule.action)
    done = read_counter(conn, call_counter(rule.service, rule.action))
    if rule.nth <= done:
        raise WorldUsageError(
            f"rule {rule!r} can never fire: {rule.service}"
            f"{'' if rule.action is None else '.' + rule.action} has already had {done} "
            f"call(s). Arm nth={done + 1} or later for the next call."
        )
    cursor = conn.execute(
        "INSERT INTO rules (service, action, nth, mode, delay) VALUES (?, ?, ?, ?, ?)",
        (rule.service, rule.action, rule.nth, rule.mode, rule.delay),
    )
    return int(cast(int, cursor.lastrowid))


def count_and_match(
    conn: sqlite3.Connection, service: str, action: str
) -> tuple[ArmedRule, int] | None:
    """Count one call and return the rule it fires (with the nth it matched), if any.

    At most one rule fires per call: the earliest armed among those that match.
    A rule is marked fired in the same transaction, so it never fires twice.
    A lookup (``action`` :data:`LOOKUP`) is counted only as a lookup: a
    service-wide rule counts the service's effects, never its lookups.
    """
    by_service = None if action == LOOKUP else next_counter(conn, call_counter(service, None))
    by_action = next_counter(conn, call_counter(service, action))
    row = conn.execute(
        "SELECT rule_id, action, nth, mode, delay FROM rules "
        "WHERE fired = 0 AND service = ? "
        "AND ((action IS NULL AND nth = ?) OR (action = ? AND nth = ?)) "
        "ORDER BY rule_id LIMIT 1",
        (service, by_service, action, by_action),
    ).fetchone()
    if row is None:
        return None
    rule_id, rule_action, nth, mode, delay = row
    conn.execute("UPDATE rules SET fired = 1 WHERE rule_id = ?", (rule_id,))
    rule = FaultRule(
        service=service, action=rule_action, nth=nth, mode=cast(FaultMode, mode), delay=delay
    )
    return ArmedRule(rule_id, rule, fired=True), nth


def list_rules(conn: sqlite3.Connection) -> list[ArmedRule]:
    """Every armed rule, in arming order."""
    rows = conn.execute(
        "SELECT rule_id, service, action, nth, mode, delay, fired FROM rules ORDER BY rule_id"
    ).fetchall()
    return [
        ArmedRule(
            rule_id,
            FaultRule(service=service, action=action, nth=nth, mode=mode, delay=delay),
            bool(fired),
        )
        for rule_id, service, action, nth, mode, delay, fired in rows
    ]


def disarm(conn: sqlite3.Connection, rule_id: int) -> bool:
    """Remove rule ``rule_id`` if it has not fired (inside the caller's
    transaction); whether it was removed (False: it fired, or never was)."""
    cursor = conn.execute("DELETE FROM rules WHERE rule_id = ? AND fired = 0", (rule_id,))
    return cursor.rowcount > 0


def stop_caller() -> None:
    """SIGSTOP this process (every thread of it): held until someone sends
    SIGCONT. Called only after the world's transaction has committed."""
    os.kill(os.getpid(), signal.SIGSTOP)


def kill_caller() -> NoReturn:
    """SIGKILL this process: no cleanup, no flush, no ``finally`` -- a real crash.

    Called only after the world's transaction has committed, so the world's
    records of the request and the fault survive.
    """
    os.kill(os.getpid(), signal.SIGKILL)
    # Unreachable: a process signalling itself gets the signal before kill()
    # returns. Kept so that the function really never returns.
    os._exit(137)
