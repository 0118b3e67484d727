"""``state_equivalence``: what a run keeps durably equals the fault-free run's."""

from __future__ import annotations

import json
from typing import Any

from ..history import History
from ..model import Event, EventF, PropertyResult
from ._base import Findings, guarded, plural, vstr, vstrs
from ._effects import parse_effects
from ._excuses import excused_runs
from ._runs import RepeatRefs, repeat_refs

NAME = "state_equivalence"


@guarded(NAME, uses_oracle=True, compares=True)
def check_state_equivalence(history: History, oracle: History | None) -> PropertyResult:
    """Every run's durable state ends as in the oracle.

    A failure usually means: durable state differs after a resume: a
    message appended twice, a record left half written. When the differing
    path is an id or a time, it belongs in the adapter's
    DurableState.volatile.

    Promises, for every run with a ``state`` event (the adapter's normalized
    snapshot of what the runtime keeps durably: conversation items,
    checkpoint channels, ledger entries, memory written) that no fault
    excuses (:mod:`harness.checkers._excuses`) and whose final state equals the oracle's: the
    snapshot, with the keys listed in ``volatile`` removed at any depth,
    equals the oracle's snapshot of the same run. A worker killed and
    resumed must not leave a second copy of a message, a ledger entry stuck
    in ``prepared``, or a turn the fault-free run never took. The witness is
    the run's ``state`` event; the message names the first differing path
    and both values in full. A value that differs only in carrying the new
    reference the world gave a repeated ``at_least_once`` request (the
    second send of an email the runtime may send twice) instead of the
    first one's is equal (counted as ``at_least_once_new_ref``); an
    exactly-once kind's new reference is a difference.

    Cannot see: runs a fault may legitimately change (named in a fault's
    ``runs``) and runs that ended in another state than the oracle's (that
    is ``resume_equivalence``'s finding); what the adapter leaves out of its
    snapshot. Without an oracle, or a run the oracle has no snapshot of:
    ``unknown``. No ``state`` events (the adapter does not declare
    ``durable_state``): nothing to judge.
    """
    f = Findings(NAME)
    f.zero("runs", "equivalent", "excluded_by_fault", "excluded_other_end")
    states = _states(history)
    if not states:
        return f.result(
            "No durable state was recorded (capability durable_state): nothing to compare"
        )
    if oracle is None:
        f.unknown("no oracle history was given, so there is nothing to compare with")
        return f.result("")
    ostates = _states(oracle)
    excluded = excused_runs(history)
    decl = history.declaration()
    effects, _ = parse_effects(history)
    oracle_effects, _ = parse_effects(oracle)
    finals, ofinals = history.finals(), oracle.finals()
    for run_id, e in states.items():
        if run_id in excluded:
            f.count("excluded_by_fault")
            continue
        final, ofinal = finals.get(run_id), ofinals.get(run_id)
        if (
            final is not None
            and ofinal is not None
            and final.value.get("state") != ofinal.value.get("state")
        ):
            f.count("excluded_other_end")
            continue
        o = ostates.get(run_id)
        if o is None:
            f.unknown(f"the oracle has no durable state for run {run_id}", [e.index])
            continue
        f.count("runs")
        volatile = set(vstrs(e, "volatile") or []) | set(vstrs(o, "volatile") or [])
        mine = _strip(e.value.get("state"), volatile)
        theirs = _strip(o.value.get("state"), volatile)
        diff = first_difference(mine, theirs)
        repeats = repeat_refs(effects, oracle_effects, run_id, decl)
        if diff is not None and repeats:
            diff = _beyond_repeats(mine, theirs, repeats)
            if diff is None:
                f.count("at_least_once_new_ref")
        if diff is None:
            f.count("equivalent")
            continue
        path, a, b = diff
        f.fail(
            f"run {run_id}'s durable state (#{e.index}) differs from the oracle's at "
            f"{path}: {_show(a)} here vs {_show(b)} in the oracle",
            [e.index],
        )
        f.count("diverged")
    return f.result(
        f"The durable state of {plural(f.counts['equivalent'], 'run')} equals the oracle's; "
        f"{f.counts['excluded_by_fault']} were excluded because a fault may change them and "
        f"{f.counts['excluded_other_end']} ended otherwise than the oracle "
        "(resume_equivalence judges those)",
        evidence=f.counts["runs"],
    )


def _states(history: History) -> dict[str, Event]:
    out: dict[str, Event] = {}
    for e in history.by_f(EventF.STATE):
        run_id = vstr(e, "run_id")
        if run_id is not None:
            out[run_id] = e
    return out


_ABSENT = object()


def _beyond_repeats(mine: Any, theirs: Any, repeats: RepeatRefs) -> tuple[str, Any, Any] | None:
    """The first difference that is not a repeat's new reference, with the
    real values there; None when there is none. (Normalizing changes
    strings only, so a path in the normalized values is one in the real.)"""
    found = _difference(repeats.normalize(mine), repeats.normalize(theirs, oracle=True), ())
    if found is None:
        return None
    steps = found[0]
    return _path(steps), _at(mine, steps), _at(theirs, steps)


def _at(value: Any, steps: tuple[Any, ...]) -> Any:
    for index, k in steps:
        held = (
            (isinstance(value, list) and k < len(value))
            if index
            else (isinstance(value, dict) and k in value)
        )
        if not held:
            return _ABSENT
        value = value[k]
    return value


def _strip(value: Any, volatile: set[str]) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v, volatile) for k, v in value.items() if k not in volatile}
    if isinstance(value, list):
        return [_strip(v, volatile) for v in value]
    return value


def first_difference(a: Any, b: Any, path: str = "$") -> tuple[str, Any, Any] | None:
    """The first path (JSONPath-like, ``$.messages[2].content``) at which
    ``a`` and ``b`` differ, with both values there; None if equal. A key or
    item present on one side only shows as ``(absent)`` on the other."""
    found = _difference(a, b, ())
    if found is None:
        return None
    steps, x, y = found
    return _path(steps, path), x, y


def _difference(a: Any, b: Any, steps: tuple[Any, ...]) -> tuple[tuple[Any, ...], Any, Any] | None:
    if a == b:
        return None
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            here = (*steps, (False, k))
            if k not in a or k not in b:
                return here, a.get(k, _ABSENT), b.get(k, _ABSENT)
            found = _difference(a[k], b[k], here)
            if found is not None:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i in range(max(len(a), len(b))):
            here = (*steps, (True, i))
            if i >= len(a) or i >= len(b):
                return here, a[i] if i < len(a) else _ABSENT, b[i] if i < len(b) else _ABSENT
            found = _difference(a[i], b[i], here)
            if found is not None:
                return found
        return None
    return steps, a, b


def _path(steps: tuple[Any, ...], root: str = "$") -> str:
    """``$.messages[2].content``: steps are (is a list index, key or index)."""
    return root + "".join(f"[{k}]" if index else f".{k}" for index, k in steps)


def _show(value: Any) -> str:
    """A value in full (never cut: the difference may be at its end)."""
    if value is _ABSENT:
        return "(absent)"
    return json.dumps(value, sort_keys=True, default=str)
