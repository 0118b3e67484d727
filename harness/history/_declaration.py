"""A runtime's :class:`Declaration` (its ``declare`` event): the delivery
promise of each effect kind, its capabilities, its memory floors."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..model import Event

#: Delivery promises a runtime may declare per effect kind.
DELIVERY_MODES: tuple[str, ...] = ("exactly_once", "at_least_once", "at_most_once")


_DEFAULT_DELIVERY = "exactly_once"


@dataclass(frozen=True)
class Declaration:
    """What the runtime promised, read leniently from a ``declaration`` event.

    Fields that are missing take their documented defaults; fields of the wrong
    shape are dropped and described in ``problems`` (checkers that depend on
    them answer *unknown*).
    """

    index: int
    #: effect kind -> "exactly_once" | "at_least_once" | "at_most_once"
    delivery: Mapping[str, str] = field(default_factory=dict)
    #: raw status -> legal successors; None when the runtime has no table
    transitions: Mapping[str, frozenset[str]] | None = None
    #: effect kind -> approval action
    needs_approval: Mapping[str, str] = field(default_factory=dict)
    #: capability names; None when the declaration does not say
    capabilities: frozenset[str] | None = None
    adapter: str | None = None
    #: workflow -> the trust floor its runs read memory at: one number, or
    #: {namespace template -> number} (``WorkflowSpec.memory_floor``)
    memory_floors: Mapping[str, float | Mapping[str, float]] = field(default_factory=dict)
    #: workflow -> the longest its runs wait, in seconds (``WorkflowSpec.max_wait_seconds``)
    max_waits: Mapping[str, float] = field(default_factory=dict)
    problems: tuple[str, ...] = ()

    def delivery_for(self, kind: str) -> str:
        """The declared delivery of ``kind`` (``exactly_once`` when undeclared)."""
        return self.delivery.get(kind, _DEFAULT_DELIVERY)

    def memory_floor(
        self, workflow: str, run_input: Mapping[str, Any], namespace: str
    ) -> float | None:
        """The trust floor a run of ``workflow`` with ``run_input`` reads
        ``namespace`` at, or None when its workflow declares none there (a
        per-namespace floor is a template over the run's input, as
        ``MemoryTarget``: an input field it names but the input lacks is
        left as written)."""
        floor = self.memory_floors.get(workflow)
        if floor is None or isinstance(floor, float):
            return floor
        fields = _Fields(run_input)
        for template, at in floor.items():
            try:
                if template.format_map(fields) == namespace:
                    return at
            except (ValueError, LookupError, AttributeError):
                continue  # validated where it was declared; a hand-made history may differ
        return None

    def has_capability(self, name: str) -> bool:
        return self.capabilities is not None and name in self.capabilities

    @classmethod
    def from_event(cls, event: Event) -> Declaration:
        v, problems = event.value, []
        delivery: dict[str, str] = {}
        raw = v.get("delivery", {})
        if isinstance(raw, dict):
            for kind, mode in raw.items():
                if mode in DELIVERY_MODES:
                    delivery[str(kind)] = str(mode)
                else:
                    problems.append(
                        f"delivery of {kind!r} is {mode!r}, not one of {', '.join(DELIVERY_MODES)}"
                    )
        elif raw is not None:
            problems.append(f"delivery is {type(raw).__name__}, not an object")
        transitions: dict[str, frozenset[str]] | None = None
        raw = v.get("transitions")
        if isinstance(raw, dict):
            transitions = {}
            for src, dsts in raw.items():
                if isinstance(dsts, list) and all(isinstance(d, str) for d in dsts):
                    transitions[str(src)] = frozenset(dsts)
                else:
                    problems.append(f"transitions[{src!r}] is not a list of statuses")
        elif raw is not None:
            problems.append(f"transitions is {type(raw).__name__}, not an object or null")
        needs: dict[str, str] = {}
        raw = v.get("needs_approval", {})
        if isinstance(raw, dict):
            needs = {str(k): str(a) for k, a in raw.items()}
        elif isinstance(raw, list):  # a bare list of kinds: each kind is its own action
            needs = {str(k): str(k) for k in raw}
        elif raw is not None:
            problems.append(f"needs_approval is {type(raw).__name__}, not an object")
        capabilities: frozenset[str] | None = None
        raw = v.get("capabilities")
        if isinstance(raw, list):
            capabilities = frozenset(str(c) for c in raw)
        elif raw is not None:
            problems.append(f"capabilities is {type(raw).__name__}, not a list")
        adapter = v.get("adapter")
        floors: dict[str, float | Mapping[str, float]] = {}
        raw = v.get("memory_floors")
        if isinstance(raw, dict):
            for workflow, floor in raw.items():
                parsed = _floor(floor)
                if parsed is None:
                    problems.append(
                        f"memory_floors[{workflow!r}] is {floor!r}, not a trust from 0 to 1 "
                        "or a mapping of namespaces to one"
                    )
                else:
                    floors[str(workflow)] = parsed
        elif raw is not None:
            problems.append(f"memory_floors is {type(raw).__name__}, not an object")
        waits: dict[str, float] = {}
        raw = v.get("max_waits")
        if isinstance(raw, dict):
            for workflow, seconds in raw.items():
                ok = isinstance(seconds, int | float) and not isinstance(seconds, bool)
                if ok and math.isfinite(seconds) and seconds > 0:
                    waits[str(workflow)] = float(seconds)
                else:
                    problems.append(
                        f"max_waits[{workflow!r}] is {seconds!r}, not a positive number of seconds"
                    )
        elif raw is not None:
            problems.append(f"max_waits is {type(raw).__name__}, not an object")
        return cls(
            index=event.index,
            delivery=delivery,
            transitions=transitions,
            needs_approval=needs,
            capabilities=capabilities,
            adapter=adapter if isinstance(adapter, str) else None,
            memory_floors=floors,
            max_waits=waits,
            problems=tuple(problems),
        )


def _trust(x: Any) -> float | None:
    ok = isinstance(x, int | float) and not isinstance(x, bool) and 0.0 <= x <= 1.0
    return float(x) if ok else None


def _floor(x: Any) -> float | dict[str, float] | None:
    """A declared floor as recorded, or None if it is not one."""
    if not isinstance(x, dict):
        return _trust(x)
    out = {str(ns): _trust(at) for ns, at in x.items()}
    if not out or any(at is None for at in out.values()):
        return None
    return {ns: at for ns, at in out.items() if at is not None}


class _Fields(dict[str, Any]):
    """A run's input for ``str.format_map``: a missing field stays as written."""

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"
