"""``junit.xml`` (validated against the JUnit XSD) and ``summary.md``."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema
from engine_support import BROKEN, ENGINE_DIR, subprocess_env

XSD = Path(__file__).resolve().parent / "junit.xsd"


@pytest.fixture(scope="module")
def schema() -> xmlschema.XMLSchema:
    return xmlschema.XMLSchema(str(XSD))


def test_the_failing_runs_junit_validates_against_the_junit_xsd(
    failing_run: tuple[Path, str], schema: xmlschema.XMLSchema
) -> None:
    schema.validate(str(failing_run[0] / "junit.xml"))


def test_the_passing_runs_junit_validates_against_the_junit_xsd(
    passing_run: Path, schema: xmlschema.XMLSchema
) -> None:
    schema.validate(str(passing_run / "junit.xml"))


def test_the_xsd_rejects_a_testcase_without_a_name(schema: xmlschema.XMLSchema) -> None:
    bad = (
        '<testsuites><testsuite name="s" tests="1">'
        '<testcase classname="c"/></testsuite></testsuites>'
    )
    assert not schema.is_valid(bad)


def test_junit_has_one_case_per_property_named_by_adapter_variant(
    failing_run: tuple[Path, str],
) -> None:
    root = ET.parse(failing_run[0] / "junit.xml").getroot()
    cases = root.findall("./testsuite/testcase")
    assert len(cases) == 10
    assert {c.get("classname") for c in cases} == {"harness.broken[fixed=false]"}
    # skipped: the six properties whose capabilities the broken runtime
    # lacks (approvals, memory, migration, context, durable state, operations)
    # are not_tested
    assert root.get("failures") == "2" and root.get("skipped") == "6"
    skipped = {c.get("name"): c.find("skipped") for c in cases if c.find("skipped") is not None}
    assert set(skipped) == {
        "approval_integrity",
        "memory_safety",
        "migration_safety",
        "context_rebuild",
        "state_equivalence",
        "effects_accounted",
    }
    assert all((s.get("message") or "").startswith("not tested: ") for s in skipped.values())


def test_a_junit_failure_shows_the_witness_and_ends_with_the_replay_command(
    failing_run: tuple[Path, str],
) -> None:
    folder = failing_run[0]
    root = ET.parse(folder / "junit.xml").getroot()
    case = next(c for c in root.iter("testcase") if c.get("name") == "exactly_once_effects")
    failure = case.find("failure")
    assert failure is not None and failure.text is not None
    assert "applied 2 times" in (failure.get("message") or "")
    assert "#6 world info effect" in failure.text
    assert failure.text.rstrip().splitlines()[-1] == (
        # broken_runtime comes from PYTHONPATH: the command says so
        f"replay: PYTHONPATH={ENGINE_DIR} harness replay {folder} --adapter {BROKEN}"
    )


def test_summary_md_names_the_verdict_the_failures_and_the_replay(
    failing_run: tuple[Path, str],
) -> None:
    folder = failing_run[0]
    text = (folder / "summary.md").read_text()
    assert text.startswith("### ❌ harness: FAIL -- broken (fixed=False)")
    assert "| `exactly_once_effects` | ❌ fail |" in text
    assert f"```sh\nPYTHONPATH={ENGINE_DIR} harness replay {folder} --adapter {BROKEN}\n```" in text
    # a row per property, the counterexample, and a line each for what fired,
    # what was excused, armed and never fired, and not tested: one screen
    assert len(text.splitlines()) < 45, "a step summary should stay short"
    assert "Commit x fault pairs" not in text  # none offered to this adapter: noise


def test_the_cli_appends_the_summary_to_github_step_summary(tmp_path: Path) -> None:
    target = tmp_path / "step-summary.md"
    target.write_text("earlier step\n")
    env = subprocess_env({"GITHUB_STEP_SUMMARY": str(target)})
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "run",
            "--adapter",
            BROKEN,
            "--adapter-opt",
            "fixed=true",
            "--profile",
            "ci",
            "--max-examples",
            "5",
            "--report-dir",
            str(tmp_path / "run"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = target.read_text()
    assert text.startswith("earlier step\n### ✅ harness: PASS -- broken (fixed=True)")
    assert text.endswith((tmp_path / "run" / "summary.md").read_text())


def test_a_property_with_its_own_counterexample_is_shown_with_that_one_only(
    failing_run: tuple[Path, str],
) -> None:
    # A property whose minimal counterexample is kept in failures/1 must be
    # shown with failures/1's steps and replay command: its witness indexes
    # that folder's history, and the primary's replay would not reproduce it.
    from harness.report import load_report
    from harness.report._junit import failure_body
    from harness.report._schema import OtherFailure

    stored = load_report(failing_run[0])
    assert stored.counterexample is not None
    prop = next(p for p in stored.properties if p.verdict == "fail")
    other = OtherFailure(
        failed_properties=[prop.name],
        counterexample_for=[prop.name],
        steps=["submit refund run r9 for globex", "start worker w4"],
        replay="harness replay somewhere/failures/1 --adapter x",
        folder="failures/1",
    )
    own = prop.model_copy(update={"counterexample": "failures/1", "witness": []})
    report = stored.model_copy(update={"other_failures": [other]})
    text = failure_body(report, own, None)
    assert "1. submit refund run r9 for globex" in text
    assert text.rstrip().splitlines()[-1] == f"replay: {other.replay}"
    assert stored.counterexample.replay not in text
    assert not any(step in text for step in stored.counterexample.steps)
