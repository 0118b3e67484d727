"""The harness's pytest plugin (entry point ``pytest11``).

Thin on purpose, like Hypothesis's: it adds the ``--harness-*`` options and,
when ``--harness-adapter`` is given, collects the resilience suite against
that adapter as if it were a test file of the project. Without that option it
changes nothing in a test run.
"""

from __future__ import annotations

from typing import Any

import pytest

from ._errors import UsageError
from ._settings import PROFILES


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("harness", "stateful-agent-harness")
    group.addoption(
        "--harness-adapter",
        dest="harness_adapter",
        default=None,
        help="run the resilience suite against this adapter ('reference' or module:attr)",
    )
    group.addoption(
        "--harness-adapter-opt",
        dest="harness_adapter_opt",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an adapter option (repeatable)",
    )
    group.addoption(
        "--harness-profile",
        dest="harness_profile",
        choices=list(PROFILES),
        default=None,
        help="search profile (default: ci when $CI is set, else dev)",
    )
    group.addoption("--harness-seed", dest="harness_seed", type=int, default=None)
    group.addoption(
        "--harness-allow-inconclusive",
        dest="harness_allow_inconclusive",
        action="store_true",
        default=False,
        help="accept an inconclusive run (a property that could not be judged, a fault "
        "armed and never fired, a budget that cut the search): skip instead of failing",
    )
    group.addoption(
        "--harness-report-dir",
        dest="harness_report_dir",
        default=None,
        help="write report.json, history.jsonl and the counterexample here",
    )


class _SuiteItem(pytest.Item):
    def __init__(self, *, prop: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.prop = prop

    def runtest(self) -> None:
        from .adapters._loading import parse_opts
        from .testing import failure_text, judge_property, run_suite

        cfg = self.config
        try:
            opts = parse_opts(cfg.getoption("harness_adapter_opt"))
        except UsageError as exc:
            raise _PropertyFailed(f"harness: error: {exc}") from None
        report = run_suite(cfg.getoption("harness_adapter"), opts, cfg)
        prop = next((p for p in report["properties"] if p["name"] == self.prop), None)
        if prop is None:
            raise _PropertyFailed(f"{self.prop} was not checked; log:\n{report['_log']}")
        if prop["verdict"] == "fail":
            raise _PropertyFailed(failure_text(report, prop))
        try:
            judge_property(report, self.prop, cfg)
        except pytest.fail.Exception as exc:
            raise _PropertyFailed(str(exc.msg)) from None

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, _PropertyFailed):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[str, int | None, str]:
        return "harness", None, f"harness::{self.prop}"


class _PropertyFailed(Exception):
    pass


class _Suite(pytest.Collector):
    def collect(self) -> list[pytest.Item]:
        from .testing import PROPERTIES

        return [_SuiteItem.from_parent(self, name=p, prop=p) for p in PROPERTIES]


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    if not config.getoption("harness_adapter", None):
        return
    # "harness/ADAPTER::property": JUnit makes that classname "harness.ADAPTER",
    # name "property". (Brackets would read as parameters, and a plain child
    # of the session gets the id "::name": both leave the classname empty.)
    name = f"harness/{config.getoption('harness_adapter')}"
    suite = _Suite.from_parent(session, name=name, nodeid=name)
    found = suite.collect()
    # Reported like any collector's result, so that "collected N items", -k
    # selection counts and the JUnit totals include the suite.
    config.hook.pytest_collectreport(
        report=pytest.CollectReport(suite.nodeid, "passed", None, list[Any](found))
    )
    items.extend(found)
