"""The optional hooks of an adapter and of its environments, by name, and the
check that an adapter's spelling of them is the harness's.

An optional hook is found by name: an adapter that spells one
``lease_second`` or ``rollsback`` would have it silently ignored, and the
search would run on defaults the author did not mean. :func:`check_hooks`
refuses, when the adapter loads (its environments when the first one opens),
a public attribute whose name is close to a hook the object does not define,
naming the hook it resembles; and a hook of the wrong kind (a flag that is
not ``True``/``False``, a number that is not one, a method that cannot be
called).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any, Literal

from .._errors import AdapterLoadError

Kind = Literal["method", "flag", "seconds", "value"]

#: The adapter's optional hooks (docs/adapters.md says what each does).
ADAPTER_HOOKS: Mapping[str, Kind] = {
    "lease_seconds": "seconds",
    "worker_timeout": "seconds",
    "scenario_seconds": "seconds",
    "drains": "flag",
    "rolls_back": "flag",
    "routes_workers": "flag",
    "network_services": "value",
    "migrated_input": "method",
    "properties": "method",
    "seeded_bugs": "method",
    "setup": "method",
    "close": "method",
}

#: The adapter's required members (``harness.adapters.Adapter``).
ADAPTER_MEMBERS = frozenset({"name", "capabilities", "workflows", "open", "describe"})

#: The environment's optional hooks, besides the ``Environment`` protocol's
#: members (whose capability-bound methods are optional too).
ENVIRONMENT_HOOKS: Mapping[str, Kind] = {
    "crash_point_trace": "method",
    "observation_cursor": "method",
    "event_message": "method",
    "operator_message": "method",
    "network_endpoints": "method",
    "storage_kinds": "method",
    "runnable": "method",
    "memory_versions": "method",
    "memory_id": "method",
    "trace_crash_points": "flag",
}

#: The ``Environment`` protocol's members (``harness.adapters.Environment``).
ENVIRONMENT_MEMBERS = frozenset(
    {
        "world",
        "declarations",
        "crash_points",
        "pause_points",
        "start_worker",
        "submit",
        "deliver",
        "approval_message",
        "observe",
        "now",
        "advance_clock",
        "inject_memory",
        "storage_fault",
        "cancel",
        "durable_state",
        "close",
    }
)

#: required members that are values, not methods
VALUE_MEMBERS = frozenset({"name", "capabilities", "world"})

#: How close a name must be to a hook's to be taken for a misspelling of it
#: (difflib's ratio: ``lease_second`` -> ``lease_seconds`` is 0.96,
#: ``rollsback`` -> ``rolls_back`` 0.95; ``close_all`` -> ``close`` 0.71)
CLOSE = 0.85


def _names(obj: Any) -> set[str]:
    """The public attribute names ``obj`` defines (its class's and its own)."""
    names = {n for n in dir(type(obj)) if not n.startswith("_")}
    names |= {n for n in getattr(obj, "__dict__", {}) if not n.startswith("_")}
    return names


def _kind_problem(value: Any, kind: Kind) -> str | None:
    if kind == "method" and not callable(value):
        return f"is {type(value).__name__}, not a method"
    if kind == "flag" and not isinstance(value, bool):
        return f"is {value!r}, not True or False (only True turns it on)"
    # a number (its range is checked where it is used, with its own fix)
    seconds = isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "seconds" and value is not None and not seconds:
        return f"is {value!r}, not a number of seconds"
    return None


def check_hooks(obj: Any, where: str, hooks: Mapping[str, Kind], members: frozenset[str]) -> None:
    """Raise :class:`AdapterLoadError` for each attribute of ``obj`` that
    looks like a misspelled hook, or a hook of the wrong kind."""
    kinds: dict[str, Kind] = {m: "method" for m in members if m not in VALUE_MEMBERS}
    kinds.update({m: "value" for m in members if m in VALUE_MEMBERS})
    kinds.update(hooks)
    names = _names(obj)
    problems: list[str] = []
    for name in sorted(names - set(kinds)):
        close = difflib.get_close_matches(name, sorted(kinds), n=1, cutoff=CLOSE)
        if not close or close[0] in names:
            continue
        try:
            value = getattr(obj, name)
        except Exception:
            continue
        # A misspelling is of the hook's own kind: a method named like a
        # flag (``drain()`` beside the ``drains`` promise) is the adapter's own.
        if _kind_problem(value, kinds[close[0]]) is None:
            problems.append(
                f"{name!r} is not a hook the harness knows; did you mean {close[0]!r}? "
                f"(as spelled, it is never called or read)"
            )
    for name, kind in hooks.items():
        if name not in names:
            continue
        try:
            value = getattr(obj, name)
        except Exception:  # a property that needs state the object has not yet
            continue
        problem = _kind_problem(value, kind)
        if problem is not None:
            problems.append(f"{name} {problem}")
    if problems:
        listed = "".join(f"\n  {p}" for p in problems)
        raise AdapterLoadError(
            f"{where}:{listed}\nRename or fix these (docs/adapters.md lists the hooks); "
            "an attribute of your own must not be named like a hook."
        )
