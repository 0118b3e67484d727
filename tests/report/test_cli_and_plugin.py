"""The report from the command line (replay, progress) and from pytest."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import xmlschema
from engine_support import BROKEN, ENGINE_DIR, harness_cli, replay_argv

from harness import Outcome, load_settings
from harness._commands import _Progress
from harness.outcome import Draft, Tally
from harness.report import REPORT_FILES


def test_replay_reproduces_the_failing_property_and_prints_the_same_counterexample(
    failing_run: tuple[Path, str],
) -> None:
    folder = failing_run[0]
    report = json.loads((folder / "report.json").read_text())
    proc = harness_cli(*replay_argv(report["counterexample"]["replay"]), cwd=folder)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "reproduced: exactly_once_effects" in proc.stdout
    shown = proc.stdout[proc.stdout.index("minimal counterexample:") :].splitlines()
    expected = [f"  {i}. {s}" for i, s in enumerate(report["counterexample"]["steps"], 1)]
    assert shown[1 : 1 + len(expected)] == expected
    assert shown[1 + len(expected)] == f"replay: {report['counterexample']['replay']}"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _outcome(examples: int, failing: bool, planned: int = 20) -> Outcome:
    o = Draft("x", {}, [], load_settings("dev"), 0, examples=examples, planned=planned)
    o.faults_fired["crash_point"] = 3 * examples
    o.tallies["progress"] = Tally(scenarios=examples, exercised=examples)
    if failing:
        o.tallies["exactly_once_effects"] = Tally(scenarios=examples, exercised=1, failed=1)
    return o.freeze()


def test_on_a_terminal_progress_is_a_bar_with_scenarios_faults_and_failing_properties() -> None:
    out = _Terminal()
    with _Progress(out) as progress:
        progress.update(_outcome(5, failing=False))
        progress.update(_outcome(6, failing=True))
        progress.bar.refresh()
    text = out.getvalue()
    assert "6/20" in text
    assert "18 faults fired" in text
    assert "failing: exactly_once_effects" in text
    assert "harness: scenario " not in text, "no log lines on a terminal"


def test_in_a_log_progress_is_a_line_every_25_scenarios_and_at_each_new_failure() -> None:
    out = io.StringIO()
    now = [0.0]
    with _Progress(out, clock=lambda: now[0]) as progress:
        for n in range(1, 52):
            now[0] = 2.0 * n  # a scenario every 2 s
            progress.update(_outcome(n, failing=n >= 30, planned=100))
    lines = out.getvalue().splitlines()
    assert [line.split(" (")[0] for line in lines] == [
        "harness: scenario 1 of 100",
        "harness: scenario 25 of 100",
        "harness: scenario 30 of 100",
        "harness: scenario 50 of 100",
    ]
    assert lines[2].endswith("90 faults fired; failing: exactly_once_effects")
    # the time so far, and the time left at this pace, from the plan
    assert "(50 s elapsed, about 2 min 30 s left; slowest" in lines[1]
    assert "(1 min 40 s elapsed, about 1 min 40 s left; slowest" in lines[3]
    assert "\x1b[" not in out.getvalue(), "no terminal escapes in a log"


SUITE_FILE = f"""
from harness.testing import resilience_suite

TestBrokenRuntime = resilience_suite({BROKEN!r})
"""


@pytest.mark.usefixtures("plugin_env")
def test_pytest_with_a_report_dir_writes_the_four_files_and_ends_failures_with_replay(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_resilience=SUITE_FILE)
    reports = pytester.path / "reports"
    result = pytester.runpytest_subprocess(
        "--harness-profile",
        "dev",
        "--harness-seed",
        "0",
        "--harness-report-dir",
        str(reports),
        "-p",
        "no:cacheprovider",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    folder = reports / "broken_runtime_BrokenAdapter"
    for name in REPORT_FILES:
        assert (folder / name).is_file(), name
    xmlschema.XMLSchema(str(Path(__file__).with_name("junit.xsd"))).validate(
        str(folder / "junit.xml")
    )
    lines = result.stdout.lines
    header = next(
        i for i, line in enumerate(lines) if "TestBrokenRuntime.test_exactly_once_effects" in line
    )
    section = []
    for line in lines[header + 1 :]:
        if line.startswith(("____", "====")):
            break
        section.append(line)
    body = [line for line in section if line.strip()]
    assert any("#6 world info effect" in line for line in body), body
    assert any(f"report: {folder / 'report.html'}" in line for line in body), body
    assert body[-1] == (
        f"replay: PYTHONPATH={ENGINE_DIR} harness replay {folder} --adapter {BROKEN}"
    ), body
