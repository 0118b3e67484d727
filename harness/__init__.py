"""Jepsen-style chaos verification for durable AI-agent runtimes.

The front door is :func:`run`::

    import harness

    report = harness.run("reference", profile="ci", report_dir="reports/ci")
    assert report.verdict == "pass", report.inconclusive or report.failed

From pytest, :func:`resilience_suite` gives one test per property. Your
own rules (the refunds of an order never exceed its total) are
:func:`invariant` functions, judged beside the built-in properties
(``docs/invariants.md``). Your own
runtime comes in through an :class:`Adapter` (see ``docs/adapters.md``).
``docs/architecture.md`` shows the packages below this one and how data flows
through them.

Names are imported on first use, so ``import harness`` stays cheap (worker
processes import it too).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_exports

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "PROFILES": "harness._settings",
    "Property": "harness.checkers",
    "ScenarioView": "harness.checkers",
    "Adapter": "harness.adapters",
    "AdapterError": "harness._errors",
    "BaseEnvironment": "harness.adapters",
    "CHECKERS": "harness.checkers",
    "Capability": "harness.adapters",
    "Declarations": "harness.adapters",
    "DurableState": "harness.adapters",
    "Engine": "harness.session",
    "Environment": "harness.adapters",
    "Example": "harness.outcome",
    "HarnessError": "harness._errors",
    "History": "harness.history",
    "Interrupted": "harness._errors",
    "Observation": "harness.adapters",
    "Outcome": "harness.outcome",
    "Report": "harness.report",
    "RunSpec": "harness.model",
    "RunState": "harness.model",
    "RunView": "harness.adapters",
    "Scenario": "harness.model",
    "Session": "harness._api",
    "Settings": "harness._settings",
    "Universe": "harness.scenarios",
    "UsageError": "harness._errors",
    "Verdict": "harness.model",
    "WorkerExit": "harness.adapters",
    "WorkerHandle": "harness.adapters",
    "WorkflowSpec": "harness.adapters",
    "World": "harness.world",
    "check_all": "harness.checkers",
    "held": "harness.checkers",
    "invariant": "harness.checkers",
    "load_adapter": "harness.adapters._loading",
    "load_report": "harness.report",
    "load_settings": "harness._settings",
    "probe_universe": "harness.scenarios",
    "resilience_suite": "harness.testing",
    "run": "harness._api",
    "violated": "harness.checkers",
}

__all__ = [
    "CHECKERS",
    "PROFILES",
    "Adapter",
    "AdapterError",
    "BaseEnvironment",
    "Capability",
    "Declarations",
    "DurableState",
    "Engine",
    "Environment",
    "Example",
    "HarnessError",
    "History",
    "Interrupted",
    "Observation",
    "Outcome",
    "Property",
    "Report",
    "RunSpec",
    "RunState",
    "RunView",
    "Scenario",
    "ScenarioView",
    "Session",
    "Settings",
    "Universe",
    "UsageError",
    "Verdict",
    "WorkerExit",
    "WorkerHandle",
    "WorkflowSpec",
    "World",
    "check_all",
    "held",
    "invariant",
    "load_adapter",
    "load_report",
    "load_settings",
    "probe_universe",
    "resilience_suite",
    "run",
    "violated",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals(), __all__, submodules=False)


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from ._api import Session, run
    from ._errors import AdapterError, HarnessError, Interrupted, UsageError
    from ._settings import PROFILES, Settings, load_settings
    from .adapters import (
        Adapter,
        BaseEnvironment,
        Capability,
        Declarations,
        DurableState,
        Environment,
        Observation,
        RunView,
        WorkerExit,
        WorkerHandle,
        WorkflowSpec,
    )
    from .adapters._loading import load_adapter
    from .checkers import CHECKERS, Property, ScenarioView, check_all, held, invariant, violated
    from .history import History
    from .model import RunSpec, RunState, Scenario, Verdict
    from .outcome import Example, Outcome
    from .report import Report, load_report
    from .scenarios import Universe, probe_universe
    from .session import Engine
    from .testing import resilience_suite
    from .world import World
