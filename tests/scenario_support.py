"""One scenario through the engine, and its verdicts read back: the helpers
every framework adapter's tests share (tests/adk, tests/langgraph,
tests/openai_agents, tests/prefect). Imported by its basename, as
``code_size`` is: pytest puts ``tests/`` (the folder of the top conftest)
on ``sys.path``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness import Engine, Example, load_settings
from harness.adapters import Adapter
from harness.model import PropertyResult, Scenario, Verdict


def engine(adapter: Adapter, workdir: Path, **settings: Any) -> Engine:
    """An engine on the ``dev`` profile (``settings`` override it) whose
    ``execute`` runs a scenario and checks every property against its
    fault-free oracle (run once per workload and engine)."""
    return Engine(adapter, load_settings("dev", start=workdir, **settings), workdir=workdir)


def execute(adapter: Adapter, scenario: Scenario, workdir: Path, **settings: Any) -> Example:
    """Run ``scenario`` on ``adapter`` and its fault-free oracle; check every property."""
    return engine(adapter, workdir, **settings).execute(scenario)


def result(example: Example, name: str) -> PropertyResult:
    """The result of property ``name``."""
    return next(r for r in example.results if r.name == name)


def verdicts(example: Example) -> dict[str, Verdict]:
    """Every property's verdict, by name."""
    return {r.name: r.verdict for r in example.results}


def failed(example: Example) -> list[str]:
    """The properties that failed, sorted."""
    return sorted(r.name for r in example.results if r.verdict is Verdict.FAIL)
