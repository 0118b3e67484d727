"""Run-level helpers shared by the checkers that compare a history with its oracle."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..history import Declaration, History
from ..model import Event, RunState
from ._base import final_state, vstr, vstrs
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


@dataclass(frozen=True)
class RepeatRefs:
    """The world's references of a run's repeated at-least-once requests.

    A request of an ``at_least_once`` kind that the world applied more than
    once for the run is a legitimate repeat, and each application got a new
    reference (the world numbers them: ``mail-...-1``, ``mail-...-2``). A run
    that ends carrying the second one where the fault-free run carried the
    first ends as it should. ``mine`` maps each such reference in the
    history, ``theirs`` each reference of the same requests in the oracle,
    to one token per request: a value that differs from the oracle's only in
    which of those references it carries is equal once both are replaced.
    So does a later request that quotes one (a receipt naming the payment),
    and the reference the world gave *it* in turn. Nothing else is: another
    request's reference, an ``exactly_once`` kind's new reference, any
    other changed field."""

    mine: Mapping[str, str] = field(default_factory=dict)
    theirs: Mapping[str, str] = field(default_factory=dict)
    #: the run's requests here and in the oracle, each identified by its
    #: parameters with those references replaced (see :func:`repeat_refs`):
    #: a later request that quotes a repeat's new reference is the request
    #: the oracle made quoting its first. None: no repeat.
    requests: tuple[Counter[Request], Counter[Request]] | None = None

    def __bool__(self) -> bool:
        return bool(self.mine)

    def normalize(self, value: Any, *, oracle: bool = False) -> Any:
        """``value`` with every reference of a repeated request replaced by
        its request's token, at any depth (inside strings too)."""
        refs = self.theirs if oracle else self.mine
        if not refs:
            return value
        # Longest first, and never inside a longer number: "mail-x-1" is not
        # a reference inside "mail-x-12".
        pattern = re.compile(
            "|".join(re.escape(r) + r"(?![0-9])" for r in sorted(refs, key=len, reverse=True))
        )
        return _replace(value, pattern, refs)


def _replace(value: Any, pattern: re.Pattern[str], refs: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return pattern.sub(lambda m: refs[m.group(0)], value)
    if isinstance(value, dict):
        return {k: _replace(v, pattern, refs) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace(v, pattern, refs) for v in value]
    return value


def repeat_refs(
    effects: Iterable[Effect],
    oracle_effects: Iterable[Effect],
    run_id: str,
    decl: Declaration | None,
) -> RepeatRefs:
    """The references of ``run_id``'s at-least-once requests that the world
    applied more than once here (see :class:`RepeatRefs`); empty when there
    is none."""
    mine = [e for e in effects if e.run_id == run_id]
    applied = Counter(e.request for e in mine if e.counted)
    repeated = {
        req for req, n in applied.items() if n > 1 and delivery(decl, req[0]) == "at_least_once"
    }
    if not repeated:
        return RepeatRefs()

    def refs(of: Iterable[Effect]) -> dict[str, str]:
        return {
            e.external_ref: f"<the {e.kind} reference of request {e.request_hash[:12]}>"
            for e in of
            if e.run_id == run_id and e.request in repeated and e.external_ref
        }

    theirs = [e for e in oracle_effects if e.run_id == run_id]
    ours, others = refs(mine), refs(theirs)
    counted, ocounted = [e for e in mine if e.counted], [e for e in theirs if e.counted]
    for _ in range(MAX_QUOTED):
        here = [(e, _identity(e, ours)) for e in counted]
        there = [(e, _identity(e, others)) for e in ocounted]
        # The k-th application of a request here is the k-th of the same
        # request in the oracle: where they differ in hash only by the
        # references they quote, their own references are one too.
        pending: dict[Request, list[Effect]] = {}
        for e, ident in there:
            pending.setdefault(ident, []).append(e)
        grew = False
        for e, ident in here:
            match = pending.get(ident)
            if not match:
                continue
            o = match.pop(0)
            if (
                o.request_hash != e.request_hash
                and e.external_ref
                and o.external_ref
                and e.external_ref not in ours
            ):
                token = (
                    f"<the {e.kind} reference of a request quoting a repeat's ({ident[1][:12]})>"
                )
                ours[e.external_ref] = others[o.external_ref] = token
                grew = True
        if not grew:
            break
    return RepeatRefs(
        mine=ours,
        theirs=others,
        requests=(
            Counter(_identity(e, ours) for e in counted),
            Counter(_identity(e, others) for e in ocounted),
        ),
    )


#: how many links a chain of requests quoting references may have (a
#: receipt quoting a payment, a ticket quoting the receipt...)
MAX_QUOTED = 4


def _identity(e: Effect, refs: Mapping[str, str]) -> Request:
    """``e``'s request, identified by its parameters with ``refs`` replaced:
    its own hash where they quote none (or were not recorded)."""
    if e.params is None or not refs:
        return e.request
    same = RepeatRefs(mine=refs).normalize(e.params)
    if same == e.params:
        return e.request
    text = json.dumps(same, sort_keys=True, separators=(",", ":"), default=str)
    return (e.kind, "~" + hashlib.sha256(text.encode()).hexdigest())


def output_diff(mine: Any, theirs: Any, repeats: RepeatRefs | None = None) -> str | None:
    """None when equal, else a short description naming the differing keys
    (with ``repeats``: equal once the references of repeated at-least-once
    requests are set aside; the values shown are the real ones)."""
    same_mine, same_theirs = mine, theirs
    if repeats:
        same_mine, same_theirs = repeats.normalize(mine), repeats.normalize(theirs, oracle=True)
    if same_mine == same_theirs:
        return None
    if isinstance(mine, dict) and isinstance(theirs, dict):
        keys = sorted(k for k in set(mine) | set(theirs) if same_mine.get(k) != same_theirs.get(k))
        parts = [
            "{}: {} vs {}".format(k, *diff_pair(mine.get(k), theirs.get(k), 40)) for k in keys[:4]
        ]
        more = f", and {len(keys) - 4} more" if len(keys) > 4 else ""
        return f"output differs in {', '.join(parts)}{more}"
    return "output {} vs the oracle's {}".format(*diff_pair(mine, theirs, 80))


def diff_pair(mine: Any, theirs: Any, limit: int) -> tuple[str, str]:
    """The ``repr`` of two values cut to ``limit`` characters each, around
    where they first differ: two long strings that differ only at their end
    must not print alike. Left-out text is marked ``...`` on either side."""
    a, b = repr(mine), repr(theirs)
    if len(a) <= limit and len(b) <= limit:
        return a, b
    first = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
    if first is None:
        first = min(len(a), len(b))
    # A little context before the difference, the rest of the room after it.
    # Both windows start at one place, so the two texts line up.
    start = min(max(0, first - limit // 4), max(0, max(len(a), len(b)) - limit + 3))
    return _window(a, start, limit), _window(b, start, limit)


def _window(text: str, start: int, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = "..." if start > 0 else ""
    room = limit - len(head)
    body = text[start:]
    if len(body) > room:
        body = body[: room - 3] + "..."
    return head + body


def divergence(
    final: Event,
    ofinal: Event,
    mine: Counter[Request],
    theirs: Counter[Request],
    decl: Declaration | None,
    repeats: RepeatRefs | None = None,
) -> list[str]:
    """Every way a run's end differs from the oracle's: state, output, effects.
    With ``repeats``, an output that differs only in which reference of a
    repeated at-least-once request it carries is the same output."""
    diffs: list[str] = []
    state, ostate = final.value.get("state"), ofinal.value.get("state")
    if state != ostate:
        diffs.append(f"state {state} vs the oracle's {ostate}")
    out = output_diff(final.value.get("output"), ofinal.value.get("output"), repeats)
    if out is not None:
        diffs.append(out)
    if repeats is not None and repeats.requests is not None:
        mine, theirs = repeats.requests
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
