"""A ready-made resilience suite for your own test files.

    # tests/test_resilience.py
    from harness.testing import resilience_suite

    TestMyRuntime = resilience_suite("myproject.adapter:MyAdapter", region="eu")

pytest then shows one test per property (``exactly_once_effects``,
``resume_equivalence``, ...), in its output and in its JUnit XML. The search
runs once per suite, with the profile, seed and report folder taken from
``--harness-profile``, ``--harness-seed`` and ``--harness-report-dir`` (or
``HARNESS_*`` variables, or ``[tool.harness]``). A failing property shows the
checker's message, the witness events, the minimal counterexample and the
command that replays it.

Your own invariants get a test each too::

    TestMyRuntime = resilience_suite("myproject.adapter:MyAdapter", properties=[refunds_capped])
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ._errors import UsageError, is_adapter_fault
from ._settings import plugin_option, setting_options
from .checkers import CHECKERS, Property
from .model import Verdict

_CACHE: dict[str, dict[str, Any]] = {}
_ERRORS: dict[str, str] = {}

#: One test per property, in the checkers' order.
PROPERTIES = tuple(CHECKERS)


def run_suite(
    adapter: str,
    opts: dict[str, str],
    config: pytest.Config | None,
    properties: Sequence[Property | str] = (),
) -> dict[str, Any]:
    """Run the search once for (adapter, options, settings, the user's
    invariants ``properties``) through :func:`harness.run`; returns
    report.json's dict, with the run's log (``_log``) and folder
    (``_folder``)."""
    from ._api import run

    get = (lambda name: config.getoption(name, None)) if config is not None else (lambda _: None)
    # the settings the plugin offers (--harness-seed...), by field name
    given: dict[str, Any] = {
        name: get(plugin_option(name, option)[1])
        for name, option in setting_options()
        if option.pytest
    }
    report_root = get("harness_report_dir")
    # The HARNESS_* environment is part of what is run (budget, plan size,
    # families): two suites of one adapter under other settings are two runs.
    env = {k: v for k, v in os.environ.items() if k.startswith("HARNESS_")}
    mine = [p if isinstance(p, str) else f"{p.name}={p.spec or id(p.check)}" for p in properties]
    key = json.dumps([adapter, opts, given, report_root, env, mine], sort_keys=True)
    if key in _CACHE:
        return _CACHE[key]
    # One folder per adapter variant: two suites of one adapter with other
    # options must not overwrite each other's reports.
    name = "-".join(
        [
            adapter.replace(":", "_").replace(".", "_"),
            *(f"{k}={v}" for k, v in sorted(opts.items())),
        ]
    )
    if report_root:
        folder = Path(report_root) / name
    elif config is not None:
        # Under the rootdir, where a user looks for it (and CI uploads it),
        # not in a new temporary folder each session; one folder per xdist
        # worker, since each worker that runs the suite runs its own search.
        worker = os.environ.get("PYTEST_XDIST_WORKER")
        folder = config.rootpath / "reports" / (f"{name}-{worker}" if worker else name)
    else:
        folder = Path(tempfile.mkdtemp(prefix="harness-"))
    if config is not None:
        _importable_from(config.rootpath)
    log: list[str] = []
    if key in _ERRORS:
        pytest.fail(_ERRORS[key], pytrace=False)
    try:
        report = run(
            adapter,
            options=opts,
            report_dir=folder,
            properties=properties,
            log=log.append,
            **given,
        )
    except UsageError as exc:
        # One line per property test, as the CLI prints it, not pytest
        # internals; the search is not attempted again for each property.
        kind = "adapter error" if is_adapter_fault(exc) else "error"
        where = getattr(exc, "saved_to", None)
        _ERRORS[key] = f"harness: {kind}: {exc}" + (
            f" (the adapter's traceback is in {where})" if where else ""
        )
        pytest.fail(_ERRORS[key], pytrace=False)
    out: dict[str, Any] = report.model_dump(mode="json")
    out["_log"] = "\n".join(log)
    out["_folder"] = str(folder)
    _CACHE[key] = out
    return out


#: Folders this session put on ``sys.path`` so that adapter specs resolve.
_ADDED: list[str] = []


def _importable_from(root: Path) -> None:
    """Make modules at the pytest rootdir importable by adapter specs, as
    ``python -m pytest`` does (plain ``pytest`` does not: an adapter module
    beside ``tests/`` would fail to import). Workers inherit ``sys.path``."""
    where = str(root)
    if where not in sys.path and where not in _ADDED:
        sys.path.append(where)
        _ADDED.append(where)


def _with_path(line: str) -> str:
    """``line`` (a printed ``replay:`` command) with the ``PYTHONPATH`` it
    needs when this session had to add the rootdir to ``sys.path``."""
    if not _ADDED or not line.startswith("replay: ") or line.startswith("replay: PYTHONPATH="):
        return line
    path = os.pathsep.join(shlex.quote(p) for p in _ADDED)
    return f"replay: PYTHONPATH={path} {line.removeprefix('replay: ')}"


def failure_text(report: dict[str, Any], prop: dict[str, Any]) -> str:
    """What pytest shows for a failed property: the checker's message, where
    the rendered report is, the witness events, the minimal counterexample,
    and -- always the last line -- the command that replays it (the same text
    as the property's JUnit failure)."""
    from .report import load_report
    from .report._junit import failure_body
    from .report._store import load_history

    folder = Path(report["_folder"])
    stored = load_report(folder)
    found = next(p for p in stored.properties if p.name == prop["name"])
    history = None
    if found.counterexample not in (None, "."):
        history = load_history(folder / str(found.counterexample) / "history.jsonl")
    elif stored.counterexample is not None:
        history = load_history(folder / stored.counterexample.history)
    body = "\n".join(_with_path(x) for x in failure_body(stored, found, history).splitlines())
    first, _, rest = body.partition("\n")
    return "\n".join(x for x in (first, f"report: {folder / 'report.html'}", rest) if x)


def judge_property(report: dict[str, Any], name: str, config: pytest.Config | None) -> None:
    """Turn one property's verdict in ``report`` into a pytest outcome: a
    failure fails with the counterexample; ``not_tested`` is skipped with the
    reason; ``unknown``, and a pass in an inconclusive run, fail with the
    reason unless ``--harness-allow-inconclusive`` (then they are skipped /
    pass)."""
    allow = bool(config.getoption("harness_allow_inconclusive", False)) if config else False
    prop = next((p for p in report["properties"] if p["name"] == name), None)
    if prop is None:
        pytest.fail(f"the harness did not check {name}; log:\n{report['_log']}")
    verdict = prop["verdict"]
    if verdict == Verdict.FAIL.value:
        pytest.fail(failure_text(report, prop), pytrace=False)
    if verdict == Verdict.NOT_TESTED.value:
        pytest.skip(f"{name} not tested: {prop.get('reason') or prop['message']}")
    hint = " (pass --harness-allow-inconclusive to accept this)"
    if verdict == Verdict.UNKNOWN.value:
        text = f"{name} could not be judged: {prop.get('reason') or prop['message']}"
        if allow:
            pytest.skip(text)
        pytest.fail(text + hint, pytrace=False)
    reasons = report.get("inconclusive") or []
    if reasons and not allow:
        pytest.fail(
            f"{name} held, but the run was inconclusive: " + "; ".join(reasons) + hint,
            pytrace=False,
        )


def resilience_suite(
    adapter: str, *, properties: Sequence[Property | str] = (), **opts: str
) -> type:
    """A test class with one test per property, checked against ``adapter``:
    the built-in ones, then each of your invariants ``properties``
    (``@harness.invariant`` records, or ``"package.module:attr"`` specs,
    checked now: a bad one raises :class:`~harness.UsageError` at import).
    The invariants the adapter's ``properties()`` returns, and installed
    ones, are judged too, and shown in the report (name them here to get a
    test of their own)."""
    from ._properties import resolve_properties

    mine = resolve_properties(properties, installed=False)
    options = {k: str(v) for k, v in opts.items()}

    def make(prop_name: str) -> Any:
        def test(self: Any, request: pytest.FixtureRequest) -> None:
            report = run_suite(adapter, options, request.config, mine)
            judge_property(report, prop_name, request.config)

        test.__name__ = f"test_{prop_name}"
        test.__doc__ = f"The runtime keeps {prop_name} under every generated fault."
        return test

    names = [*PROPERTIES, *(p.name for p in mine)]
    attrs: dict[str, Any] = {f"test_{p}": make(p) for p in names}

    attrs["__doc__"] = f"Resilience properties of {adapter} {opts or ''}".strip()
    return type(f"Resilience_{adapter.replace(':', '_').replace('.', '_')}", (), attrs)
