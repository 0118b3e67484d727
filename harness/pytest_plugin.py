"""The harness's pytest plugin (entry point ``pytest11``).

Thin on purpose, like Hypothesis's: it adds the ``--harness-*`` options and,
when ``--harness-adapter`` is given, collects the resilience suite against
that adapter as if it were a test file of the project. Without that option it
changes nothing in a test run.

Under pytest-xdist (``-n N``) the suite is still one search: xdist worker K
runs shard K of N of its plan (``--shard K/N``, the seed fixed by the
controller), every property test judges the shards' reports merged, and the
controller merges them once more into the report folder when the session
ends (see :class:`_Xdist`).
"""

from __future__ import annotations

import contextlib
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from ._errors import UsageError
from ._settings import plugin_option, setting_options


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("harness", "stateful-agent-harness")
    group.addoption(
        "--harness-adapter",
        dest="harness_adapter",
        default=None,
        help="run the resilience suite against this adapter: an installed adapter's name "
        "(harness list adapters) or module:attr",
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
        "--harness-property",
        dest="harness_property",
        action="append",
        default=[],
        metavar="MODULE:ATTR",
        help="your own invariant (an @harness.invariant, importable): a test of its own "
        "beside the built-in properties (repeatable; docs/invariants.md)",
    )
    # The settings the plugin offers, made from their Settings fields'
    # options as harness run's are (the one place a setting is spelled).
    for name, option in setting_options():
        if option.pytest:
            flag, dest = plugin_option(name, option)
            group.addoption(
                flag,
                dest=dest,
                type=option.type,
                choices=option.choices,
                metavar=option.metavar,
                default=None,
                help=option.help,
            )
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
        xdist = cfg.stash.get(_XDIST, None)
        if xdist is not None:
            report = xdist.merged(self)
        else:
            report = run_suite(
                cfg.getoption("harness_adapter"), opts, cfg, cfg.getoption("harness_property")
            )
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
        from ._properties import load_property
        from .testing import PROPERTIES

        names = list(PROPERTIES)
        for spec in self.config.getoption("harness_property"):
            # one that cannot be loaded fails every test with the reason (run_suite)
            with contextlib.suppress(UsageError):
                names += [p.name for p in load_property(spec) if p.name not in names]
        return [_SuiteItem.from_parent(self, name=p, prop=p) for p in names]


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


# -- pytest-xdist: one search, sharded over the workers --------------------


class _Xdist:
    """The suite's search under pytest-xdist: worker K of N runs shard K/N
    into ``root/shard-K`` before its tests (an error it met goes to
    ``root/shard-K.error``); a property test waits for every shard, then
    judges their merge; the controller merges them into the report folder
    at the end. ``root`` and the seed come from the controller, so that
    every worker plans the same search."""

    def __init__(self, config: pytest.Config, root: Path, seed: int, k: int, n: int) -> None:
        self.config, self.root, self.seed, self.k, self.n = config, root, seed, k, n
        self.log: list[str] = []
        self._report: dict[str, Any] | None = None

    def _opts(self) -> dict[str, str]:
        from .adapters._loading import parse_opts

        return parse_opts(self.config.getoption("harness_adapter_opt"))

    def run_shard(self) -> None:
        """This worker's shard of the search (errors kept for every worker)."""
        from ._api import run

        cfg = self.config
        try:
            run(
                cfg.getoption("harness_adapter"),
                options=self._opts(),
                profile=cfg.getoption("harness_profile"),
                seed=self.seed,
                shard=(self.k, self.n),
                jobs=1,
                properties=cfg.getoption("harness_property"),
                report_dir=self.root / f"shard-{self.k}",
                log=self.log.append,
            )
        except UsageError as exc:
            (self.root / f"shard-{self.k}.error").write_text(f"harness: error: {exc}")

    def _wait(self) -> tuple[list[Path], dict[int, str]]:
        """The shards' folders once each has a report or an error, and the
        errors; a shard still missing at the deadline (its worker died)
        is left out, with the reason."""
        from ._settings import load_settings

        budget = load_settings(self.config.getoption("harness_profile")).budget_seconds
        deadline = time.monotonic() + 2 * budget + 600
        why: dict[int, str] = {}
        while True:
            done, why = [], {}
            for k in range(1, self.n + 1):
                error = self.root / f"shard-{k}.error"
                if error.is_file():
                    why[k] = error.read_text()
                elif (self.root / f"shard-{k}" / "report.json").is_file():
                    done.append(self.root / f"shard-{k}")
            if len(done) + len(why) == self.n:
                return done, why
            if time.monotonic() > deadline:
                for k in range(1, self.n + 1):
                    if self.root / f"shard-{k}" not in done and k not in why:
                        why[k] = f"xdist worker gw{k - 1} never wrote its shard's report"
                return done, why
            time.sleep(0.2)

    def merged(self, item: pytest.Item) -> dict[str, Any]:
        """The shards' merged report, as :func:`harness.testing.run_suite`
        gives a run's (fails the test when a shard refused the run)."""
        if self._report is not None:
            return self._report
        from .report import merge_reports

        folders, why = self._wait()
        errors = [text for text in why.values() if text.startswith("harness: ")]
        if errors or not folders:
            pytest.fail(errors[0] if errors else "; ".join(why.values()), pytrace=False)
        out = self.root / f"merged-{self.k}"
        report = merge_reports(folders, out, partial=True, why_missing=why)
        data: dict[str, Any] = report.model_dump(mode="json")
        data["_log"] = "\n".join(self.log)
        data["_folder"] = str(out)
        self._report = data
        return data


_XDIST = pytest.StashKey[_Xdist]()
_CONTROLLER = pytest.StashKey[dict[str, Any]]()


def _report_folder(config: pytest.Config, root: Path) -> Path:
    """Where the controller keeps the merged report: as run_suite names it."""
    from .adapters._loading import parse_opts

    given = config.getoption("harness_report_dir")
    if not given:
        return root / "merged"
    adapter = config.getoption("harness_adapter")
    opts = parse_opts(config.getoption("harness_adapter_opt"))
    name = "-".join(
        [
            adapter.replace(":", "_").replace(".", "_"),
            *(f"{k}={v}" for k, v in sorted(opts.items())),
        ]
    )
    return Path(given) / name


def pytest_configure(config: pytest.Config) -> None:
    if not config.getoption("harness_adapter", None):
        return
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and "harness_xdist" in workerinput:
        shared = workerinput["harness_xdist"]
        k = int(str(workerinput["workerid"]).removeprefix("gw")) + 1
        n = int(workerinput["workercount"])
        config.stash[_XDIST] = _Xdist(config, Path(shared["root"]), int(shared["seed"]), k, n)
    elif workerinput is None and _xdist_controller(config):
        from ._settings import load_settings

        settings = load_settings(
            config.getoption("harness_profile"), seed=config.getoption("harness_seed")
        )
        seed = settings.seed
        if seed is None:
            seed = 0 if settings.derandomize else random.SystemRandom().randrange(2**32)
        root = Path(tempfile.mkdtemp(prefix="harness-xdist-"))
        config.stash[_CONTROLLER] = {"root": str(root), "seed": seed}


def _xdist_controller(config: pytest.Config) -> bool:
    """Whether this process is the controller of xdist workers (``-n N``)."""
    return bool(
        config.pluginmanager.hasplugin("xdist")
        and getattr(config.option, "numprocesses", None)
        and not getattr(config.option, "collectonly", False)
    )


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist, on the controller: every worker gets the same folder and seed."""
    shared = node.config.stash.get(_CONTROLLER, None)
    if shared is not None:
        node.workerinput["harness_xdist"] = shared


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session: pytest.Session) -> Any:
    """On an xdist worker: its shard of the search, before its tests (so that
    every shard runs, whichever worker got which property test)."""
    xdist = session.config.stash.get(_XDIST, None)
    if xdist is not None:
        xdist.run_shard()
    return (yield)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """On the xdist controller: the shards merged into the report folder."""
    shared = session.config.stash.get(_CONTROLLER, None)
    if shared is None:
        return
    from .report import merge_reports

    root = Path(shared["root"])
    n = len([p for p in root.iterdir() if p.name.startswith("shard-") and p.is_dir()])
    folders = sorted(root.glob("shard-*/report.json"))
    if not folders:
        return
    out = _report_folder(session.config, root)
    try:
        report = merge_reports([f.parent for f in folders], out, partial=True)
    except UsageError as exc:
        line = f"harness: the xdist shards could not be merged: {exc}"
    else:
        line = (
            f"harness: one search in {n} shards (xdist workers), merged into {out}: "
            f"verdict {report.verdict}"
        )
    shared["line"] = line
    if out.parent != root:  # the shards are merged and copied: drop them
        shutil.rmtree(root, ignore_errors=True)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """On the xdist controller: where the merged report is, and its verdict.
    After any suite: what an adapter declares and its run could not
    exercise here, with why (network faults on a store over a Unix socket):
    a suite that passes says what it did not test."""
    shared = config.stash.get(_CONTROLLER, None)
    if shared is not None and "line" in shared:
        terminalreporter.write_line(shared["line"])
    from .testing import _CACHE

    for report in _CACHE.values():
        declared = set(report.get("adapter", {}).get("capabilities", []))
        for gap in report.get("not_tested", []):
            if gap.get("capability") in declared:
                terminalreporter.write_line(
                    f"harness: {report['adapter'].get('name', '')} not tested "
                    f"({gap['capability']}): {gap['what']}"
                )
