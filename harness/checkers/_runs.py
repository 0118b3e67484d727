"""Run-level helpers shared by the checkers that compare a history with its oracle."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from ..history import Declaration, History
from ..model import Event, RunState
from ._base import final_state, short, vstr, vstrs
from ._effects import Effect, Request, compare_requests, delivery

_SCHEMA_WORDS = re.compile(r"schema|version", re.IGNORECASE)


def fault_runs(history: History, *, except_kind: str | None = None) -> dict[str, list[int]]:
    """run id -> indexes of the ``fault`` events that name it in their ``runs``
    (leaving out faults of ``except_kind``)."""
    out: dict[str, list[int]] = {}
    for e in history.faults():
        if except_kind is not None and e.value.get("kind") == except_kind:
            continue
        for run_id in vstrs(e, "runs") or []:
            out.setdefault(run_id, []).append(e.index)
    return out


def migration_faults(history: History) -> list[Event]:
    """``migration`` faults that fired (a missing ``fired`` counts as fired)."""
    return [e for e in history.faults("migration") if e.value.get("fired", True) is not False]


def migration_touched(history: History) -> dict[str, list[int]]:
    """run id -> the migration faults that touched it: those naming it in
    ``runs``, and those without a ``runs`` list (they touch every run)."""
    out: dict[str, list[int]] = {}
    every = known_runs(history)
    for e in migration_faults(history):
        runs = vstrs(e, "runs")
        for run_id in every if runs is None else runs:
            out.setdefault(run_id, []).append(e.index)
    return out


def known_runs(history: History) -> list[str]:
    """Runs submitted (whatever the completion but ``fail``) or with a final
    state, in order of first appearance."""
    runs = [r for r, t in history.submissions().items() if t != "fail"]
    return list(dict.fromkeys([*runs, *history.finals()]))


def parked_for_schema(final: Event) -> bool:
    """The run ended ``parked`` with an error that names the schema or version."""
    error = vstr(final, "error") or ""
    return final_state(final) is RunState.PARKED and bool(_SCHEMA_WORDS.search(error))


def output_diff(mine: Any, theirs: Any) -> str | None:
    """None when equal, else a short description naming the differing keys."""
    if mine == theirs:
        return None
    if isinstance(mine, dict) and isinstance(theirs, dict):
        keys = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
        parts = [f"{k}: {short(mine.get(k), 40)} vs {short(theirs.get(k), 40)}" for k in keys[:4]]
        more = f", and {len(keys) - 4} more" if len(keys) > 4 else ""
        return f"output differs in {', '.join(parts)}{more}"
    return f"output {short(mine)} vs the oracle's {short(theirs)}"


def divergence(
    final: Event,
    ofinal: Event,
    mine: Counter[Request],
    theirs: Counter[Request],
    decl: Declaration | None,
) -> list[str]:
    """Every way a run's end differs from the oracle's: state, output, effects."""
    diffs: list[str] = []
    state, ostate = final.value.get("state"), ofinal.value.get("state")
    if state != ostate:
        diffs.append(f"state {state} vs the oracle's {ostate}")
    out = output_diff(final.value.get("output"), ofinal.value.get("output"))
    if out is not None:
        diffs.append(out)
    diffs += compare_requests(mine, theirs, decl)
    return diffs


def surplus_effects(
    effects: list[Effect],
    run_id: str,
    mine: Counter[Request],
    theirs: Counter[Request],
    decl: Declaration | None,
) -> list[int]:
    """Indexes of the run's counted effects of requests it applied more often
    than the oracle (the events that show the divergence)."""
    extra = {
        req
        for req, n in mine.items()
        if n > theirs.get(req, 0)
        and not (delivery(decl, req[0]) == "at_least_once" and theirs.get(req, 0) > 0)
    }
    return [e.index for e in effects if e.counted and e.run_id == run_id and e.request in extra]
