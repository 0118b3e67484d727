"""The pytest integration end to end, with ``pytester``: a user's test file,
the ``--harness-adapter`` option alone, and JUnit XML."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
from engine_support import BROKEN, subprocess_env

from harness.testing import PROPERTIES

pytestmark = pytest.mark.usefixtures("plugin_env")

SUITE_FILE = f"""
from harness.testing import resilience_suite

TestBrokenRuntime = resilience_suite({BROKEN!r})
"""


def test_a_resilience_suite_fails_exactly_once_effects_and_prints_the_replay(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A normal project layout: the adapter module at the project root, the
    # suite under tests/, and plain ``pytest`` (PYTHONSAFEPATH: ``python -m``
    # must not put the current folder on sys.path, as the pytest script
    # does not). The plugin makes the rootdir importable, keeps the report
    # under it and prints the PYTHONPATH the replay needs.
    monkeypatch.setenv("PYTHONSAFEPATH", "1")
    module, _, cls = BROKEN.partition(":")
    pytester.makepyfile(my_adapter=f"from {module} import {cls} as MyAdapter\n")
    pytester.mkdir("tests")
    (pytester.path / "tests" / "test_resilience.py").write_text(
        SUITE_FILE.replace(repr(BROKEN), repr("my_adapter:MyAdapter"))
    )
    # Not pytester's runner: it puts its folder on PYTHONPATH.
    # The dev profile at a fixed seed: the ci profile's 150 scenarios find the
    # same double charge in a minute, the plugin's path is the same.
    args = ["-v", "-rs", "--harness-profile", "dev", "--harness-seed", "0"]
    args += ["-p", "no:cacheprovider", "tests"]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        cwd=pytester.path,
        env=subprocess_env({"PYTHONSAFEPATH": "1"}),
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = proc.stdout.splitlines()
    result = pytest.RunResult(proc.returncode, lines, proc.stderr.splitlines(), 0.0)
    result.stdout.fnmatch_lines(
        [
            "*::TestBrokenRuntime::test_exactly_once_effects FAILED*",
            "*exactly_once_effects: *payments.charge*applied 2 times*",
            f"*report: {pytester.path / 'reports'}*",
            "*minimal counterexample:*",
            "*arm world fault kill_after_apply on call 1 of payments.charge*",
            "*replay: PYTHONPATH=* harness replay*",
        ]
    )
    assert "cannot import" not in proc.stdout
    outcomes = result.parseoutcomes()
    # The double charge also makes the run diverge from its oracle (the
    # effect twice, another charge ref): resume_equivalence fails with it.
    assert outcomes.get("failed") == 2, outcomes
    result.stdout.fnmatch_lines(["*::test_resume_equivalence FAILED*"])
    # Everything else held, or was not tested (a capability it lacks).
    assert outcomes.get("passed", 0) + outcomes.get("skipped", 0) == len(PROPERTIES) - 2
    result.stdout.fnmatch_lines(
        ["SKIPPED*context_rebuild not tested: the adapter does not declare the context*"]
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_the_fixed_runtime_passes_the_resilience_suite(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HARNESS_MAX_EXAMPLES", "40")  # a passing search runs them all
    pytester.makepyfile(
        test_resilience=f"""
from harness.testing import resilience_suite

TestFixed = resilience_suite({BROKEN!r}, fixed="true")
"""
    )
    result = pytester.runpytest_subprocess("--harness-profile", "ci", "-p", "no:cacheprovider")
    outcomes = result.parseoutcomes()
    assert "failed" not in outcomes, result.stdout.str()
    assert outcomes["passed"] + outcomes.get("skipped", 0) == len(PROPERTIES)
    assert result.ret == pytest.ExitCode.OK


def test_the_harness_adapter_option_collects_the_suite_without_a_test_file(
    pytester: pytest.Pytester,
) -> None:
    junit = pytester.path / "junit.xml"
    result = pytester.runpytest_subprocess(
        "-v",
        "--harness-adapter",
        BROKEN,
        "--harness-profile",
        "dev",
        "--harness-seed",
        "0",
        f"--junitxml={junit}",
        "-p",
        "no:cacheprovider",
    )
    result.stdout.fnmatch_lines(
        [
            f"*collected {len(PROPERTIES)} items*",
            f"harness/{BROKEN}::exactly_once_effects FAILED*",
        ]
    )
    result.stdout.fnmatch_lines(["*replay: *harness replay*"])  # PYTHONPATH=... first
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    cases = list(ET.parse(junit).getroot().iter("testcase"))
    assert sorted(case.get("name", "") for case in cases) == sorted(PROPERTIES)
    assert {case.get("classname") for case in cases} == {f"harness.{BROKEN}"}
    failed = sorted(
        case.get("name", "")
        for case in ET.parse(junit).getroot().iter("testcase")
        if case.find("failure") is not None
    )
    assert "exactly_once_effects" in failed


def test_without_the_harness_adapter_option_the_plugin_adds_nothing(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_a_users_own_scenarios_module_does_not_shadow_the_harness(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The harness installs only ``harness`` and ``reference_runtime`` at the
    top level: a project's ``tests/scenarios.py`` (first on ``sys.path`` for
    its test files) must not be what the harness imports."""
    monkeypatch.setenv("HARNESS_MAX_EXAMPLES", "12")
    pytester.mkdir("tests")
    pytester.path.joinpath("tests", "scenarios.py").write_text(
        "raise ImportError('this is the project\\'s own tests/scenarios.py')\n"
    )
    pytester.path.joinpath("tests", "test_resilience.py").write_text(SUITE_FILE)
    result = pytester.runpytest_subprocess(
        "tests", "-v", "--harness-profile", "ci", "-p", "no:cacheprovider"
    )
    result.stdout.no_fnmatch_line("*tests/scenarios.py*")
    result.stdout.fnmatch_lines(["*::TestBrokenRuntime::test_exactly_once_effects FAILED*"])
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed") == 2, outcomes
    assert "error" not in outcomes and "errors" not in outcomes, outcomes


def test_a_typo_in_harness_adapter_is_one_line_per_property_not_pytest_internals(
    pytester: pytest.Pytester,
) -> None:
    """Issue 13, defect 4: ``--harness-adapter refrence`` printed 7,018 lines."""
    result = pytester.runpytest_subprocess(
        "--harness-adapter", "refrence", "-p", "no:cacheprovider"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*harness: error: adapter 'refrence' is neither*"])
    assert len(result.stdout.lines) < 120, len(result.stdout.lines)
    assert not any("Traceback" in line for line in result.stdout.lines)
    assert result.parseoutcomes().get("failed") == len(PROPERTIES)
