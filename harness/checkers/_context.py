"""``context_rebuild``: a resumed worker rebuilds the model context the oracle built."""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from ..history import History
from ..model import OPERATOR_ANSWER, Event, EventF, PropertyResult
from ._base import Findings, every, guarded, plural, vstr
from ._excuses import excused_runs
from ._state import _ABSENT, first_difference

NAME = "context_rebuild"

#: keys that may legitimately differ between a first attempt and a retry
_VOLATILE = ("attempt",)


@guarded(NAME, uses_oracle=True, compares=True)
def check_context_rebuild(history: History, oracle: History | None) -> PropertyResult:
    """Every model context equals one the oracle built for the same run and step.

    A failure usually means: a resumed worker built the model's input from
    something other than durable records (a cache in process memory), or
    rebuilt it in another order or shape.

    Promises: for each ``context`` event (of a run no fault excuses: see
    :mod:`harness.checkers._excuses`), the oracle holds a ``context`` event of the same run and
    ``step`` whose ``context`` object is equal once the top-level ``attempt``
    key is removed from both. Objects are compared, not fingerprints (a
    fingerprint may cover the attempt or be computed differently). A step
    the oracle never built a context for fails too. On a mismatch the
    message names the differing keys against the closest oracle context.

    Cannot see: anything without the ``context`` capability in the
    declaration, without context events, or without the oracle
    (``unknown``); what the model did with the context.

    Assumes: a run's context does not depend on how the scenario's runs
    interleave. Runs that read what other runs write (shared memory, say)
    may legitimately build other contexts than the oracle's runs, which
    interleave differently; such a difference is reported as a failure. The
    reference runtime keeps to the assumption for the workloads its adapter
    offers (a memory write equal to the live record is a no-op) while its
    workers take turns. Workers released together (a ``race`` fault that
    fired) interleave as the scheduler pleases: there, the ``memory`` key of
    a run whose tenant has other runs in the scenario is left out of the
    comparison (counted ``memory_left_out_concurrent``), since what it holds
    depends on which run wrote first; every other key is still compared.
    Likewise a run of a tenant one of whose runs a fault names (a run
    cancelled by an operator, say, which then never writes what the
    oracle's wrote): its ``memory`` key is left out (counted
    ``memory_left_out_fault_shared``), since it may read what that run did
    or did not write. A context a run built after the runner answered for
    an operator (``operator_answer``: the run stopped on a call of unknown
    outcome, which the oracle's never did) is left out (counted
    ``excluded_after_operator_answer``): the answer says whether the call
    was applied and its reference, not what the service replied, so what
    the run knows of that call legitimately differs from the oracle's.
    """
    f = Findings(NAME)
    f.zero("contexts", "matched", "excluded_by_fault", "excluded_at_least_once_repeat")
    decl = history.declaration()
    if decl is None or not decl.has_capability("context"):
        return f.result("The runtime does not declare the 'context' capability: nothing to compare")
    contexts = history.by_f(EventF.CONTEXT)
    if not contexts:
        return f.result("The history holds no context events: nothing to compare")
    if oracle is None:
        f.unknown("no oracle history was given, so there is nothing to compare with")
        return f.result("")
    wanted: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for o in oracle.by_f(EventF.CONTEXT):
        key, obj = _key(o), _stable(o)
        if key is not None and obj is not None:
            wanted.setdefault(key, []).append(obj)
    if not wanted:
        f.unknown("the oracle holds no readable context events")
        return f.result("")
    excluded = excused_runs(history)
    repeated = _at_least_once_repeats(history)
    sharing = _sharing_concurrently(history)
    shared_fault = _sharing_with(history, list(excluded.runs))
    answered = _operator_answers(history)
    for e in contexts:
        key, obj = _key(e), _stable(e)
        if key is None or obj is None:
            f.unknown(f"context #{e.index} lacks a run_id, a step or a context object", [e.index])
            continue
        run_id, step = key
        if run_id in excluded:
            f.count("excluded_by_fault")
            continue
        if e.index > answered.get(run_id, e.index):
            f.count("excluded_after_operator_answer")
            continue
        if run_id in repeated:
            # A declared at-least-once effect ran twice: its second answer
            # (another external ref) may legitimately show in later contexts.
            f.count("excluded_at_least_once_repeat")
            continue
        f.count("contexts")
        candidates = wanted.get(key, [])
        if (run_id in sharing or run_id in shared_fault) and "memory" in obj:
            why = "concurrent" if run_id in sharing else "fault_shared"
            f.count(f"memory_left_out_{why}")
            obj = _without_memory(obj)
            candidates = [_without_memory(c) for c in candidates]
        if obj in candidates:
            f.count("matched")
            continue
        if not candidates:
            f.fail(
                f"run {run_id} built a context at step {step!r} (#{e.index}) that the oracle "
                "never built at that step",
                [e.index],
            )
            continue
        closest = _closest(obj, candidates)
        diff = _diff_keys(obj, closest)
        shown = ", ".join(_show(obj, closest, k) for k in diff[:4]) + (
            f", and {len(diff) - 4} more" if len(diff) > 4 else ""
        )
        f.fail(
            f"run {run_id}'s context at step {step!r} (#{e.index}) differs from the oracle's "
            f"in {plural(len(diff), 'key')}: {shown}",
            [e.index],
        )
        f.count("mismatched")
    return f.result(
        f"{every(f.counts['contexts'], 'context')} equal an oracle context of the same "
        "run and step (ignoring 'attempt')",
        evidence=f.counts["matched"] + f.counts.get("mismatched", 0),
    )


def _operator_answers(history: History) -> dict[str, int]:
    """The first operator's answer each run got, by history index."""
    out: dict[str, int] = {}
    for e in history.by_f(EventF.DELIVER):
        run_id = vstr(e, "run_id")
        if e.value.get("variant") == OPERATOR_ANSWER and run_id is not None:
            out.setdefault(run_id, e.index)
    return out


def _at_least_once_repeats(history: History) -> set[str]:
    """Runs that applied one logical at-least-once request more than once."""
    decl = history.declaration()
    seen: dict[tuple[Any, ...], int] = {}
    for e in history.by_f(EventF.EFFECT):
        v = e.value
        kind = v.get("kind")
        if not v.get("applied") or not isinstance(kind, str) or decl is None:
            continue
        if decl.delivery_for(kind) != "at_least_once":
            continue
        key = (v.get("run_id"), kind, v.get("request_hash"))
        seen[key] = seen.get(key, 0) + 1
    return {str(k[0]) for k, n in seen.items() if n > 1 and k[0] is not None}


def _sharing_concurrently(history: History) -> set[str]:
    """Runs whose tenant has other runs in the scenario, when workers ran
    truly concurrently (a ``race`` fault fired): what they read from shared
    memory depends on the interleaving, which the oracle cannot repeat."""
    if not any(e.value.get("fired", True) is not False for e in history.faults("race")):
        return set()
    by_tenant: dict[str, list[str]] = {}
    for run_id in history.run_ids():
        tenant = history.tenant_of(run_id)
        if tenant is not None:
            by_tenant.setdefault(tenant, []).append(run_id)
    return {r for runs in by_tenant.values() if len(runs) > 1 for r in runs}


def _sharing_with(history: History, runs: Collection[str]) -> set[str]:
    """Runs of a tenant that also has one of ``runs`` (runs a fault names):
    what they read from the tenant's memory may be what those runs wrote
    otherwise than in the oracle."""
    tenants = {history.tenant_of(r) for r in runs} - {None}
    return {r for r in history.run_ids() if r not in runs and history.tenant_of(r) in tenants}


def _without_memory(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k != "memory"}


def _key(e: Event) -> tuple[str, str] | None:
    run_id = vstr(e, "run_id")
    step = e.value.get("step")
    if run_id is None or step is None or isinstance(step, dict | list):
        return None
    return run_id, str(step)


def _stable(e: Event) -> dict[str, Any] | None:
    obj = e.value.get("context")
    if not isinstance(obj, dict):
        return None
    return {k: v for k, v in obj.items() if k not in _VOLATILE}


def _diff_keys(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    return sorted(k for k in set(a) | set(b) if a.get(k, _MISSING) != b.get(k, _MISSING))


def _closest(obj: dict[str, Any], candidates: list[dict[str, Any]]) -> dict[str, Any]:
    return min(candidates, key=lambda c: len(_diff_keys(obj, c)))


def _show(obj: dict[str, Any], oracle: dict[str, Any], key: str) -> str:
    """Where two contexts first differ under ``key``, with both values in full
    (a cut value hides a difference at its end)."""
    found = first_difference(obj.get(key, _MISSING), oracle.get(key, _MISSING), key)
    if found is None:  # pragma: no cover - only called for differing keys
        return key
    path, mine, theirs = found
    return f"{path}: {_full(mine)} here vs {_full(theirs)} in the oracle"


def _full(value: Any) -> str:
    if value is _MISSING or value is _ABSENT:
        return "(missing)"
    return json.dumps(value, sort_keys=True, default=str)


_MISSING = object()
