"""Checking a scenario against what an adapter declares, before it runs.

A step that needs a capability the adapter does not declare would fail
halfway through a run, after the steps before it have touched the
environment. :func:`validate` finds every such step first and refuses the
scenario as a whole, naming each one.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..adapters import Adapter, Capability
from ..model import Quiesce, RunWorker, Scenario
from ._context import ScenarioError

_CRASH_POINTS = (Capability.CRASH_POINTS, "crash points need the crash_points capability")
_OLDER_RELEASE = (
    Capability.VERSION_SWITCH,
    "the older release's workers need the version_switch capability",
)


def needs(step: object) -> tuple[Capability, str] | None:
    """The capability ``step`` needs (and why), or None if it needs none."""
    if isinstance(step, RunWorker):
        return None if step.crash is None else _CRASH_POINTS
    if isinstance(step, Quiesce) and step.code_version is not None:
        return _OLDER_RELEASE
    # each kind of step says what it needs (harness.model)
    need: tuple[Capability, str] | None = getattr(type(step), "needs", None)
    return need


def validate(scenario: Scenario, adapter: Adapter | Iterable[Capability]) -> None:
    """Raise :class:`ScenarioError` naming every step of ``scenario`` that
    needs a capability the adapter (or the given capabilities) lacks.

    Call it before the first step runs: a scenario that passes touches no
    capability it was not promised.
    """
    caps = adapter if isinstance(adapter, Iterable) else adapter.capabilities
    declared = frozenset(caps)
    problems: list[str] = []
    missing: set[str] = set()
    for number, step in enumerate(scenario.steps, start=1):
        need = needs(step)
        if need is not None and need[0] not in declared:
            problems.append(f"step {number} ({step.op}): {need[1]}")
            missing.add(need[0].value)
    if problems:
        listed = "".join(f"\n  {p}" for p in problems)
        have = ", ".join(sorted(c.value for c in declared)) or "none"
        raise ScenarioError(
            f"scenario {scenario.name!r} needs capabilities its adapter does not declare "
            f"(declared: {have}):{listed}\n"
            f"Remove these steps, or declare {', '.join(sorted(missing))} in the adapter "
            "if its environment offers them.",
            tuple(problems),
        )
