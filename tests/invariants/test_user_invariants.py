"""A user's invariant, written outside the harness, is a property like the ten.

The refund desk (``examples/invariants``) with its seeded mistake refunds an
order past its total; every built-in property holds, and only the user's
invariant ``refunds_never_exceed_the_order_total`` (defined in the
example's test file) fails. The search finds it by sampling, shrinks it,
the replay command names the invariant and reproduces it, and every report
format has its line. Without the mistake it passes with its exercised
count; an invariant that raises is ``unknown`` with its traceback; a bad
``--property`` is exit 2. Each search is small (seconds).
"""

from __future__ import annotations

import io
import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import harness
from examples.invariants.refund_desk import RefundDesk
from examples.invariants.test_refund_desk import refunds_never_exceed_the_order_total
from harness.checkers import BUILTIN
from harness.cli import main
from harness.history import History
from harness.report import Report, load_report, report_schema
from harness.testing import resilience_suite

SPEC = "examples.invariants.refund_desk:RefundDesk"
NAME = "refunds_never_exceed_the_order_total"
PROPERTY = f"examples.invariants.test_refund_desk:{NAME}"
ROOT = Path(__file__).resolve().parents[2]


@harness.invariant
def never_divides_by_zero_but_does(view: harness.ScenarioView) -> object:
    """A buggy invariant: it raises on every scenario."""
    return len(view.runs) / 0


class HookedDesk(RefundDesk):
    """The correct desk, its invariant registered by the adapter itself."""

    def properties(self) -> list[harness.Property]:
        return [refunds_never_exceed_the_order_total]


@pytest.fixture(scope="module")
def many_runs() -> Iterator[None]:
    # Three runs a scenario: two tenants, so two of them share one, and a
    # sampled scenario of three runs always puts two refunds on one order.
    old = os.environ.get("HARNESS_MAX_RUNS")
    os.environ["HARNESS_MAX_RUNS"] = "3"
    yield
    if old is None:
        del os.environ["HARNESS_MAX_RUNS"]
    else:
        os.environ["HARNESS_MAX_RUNS"] = old


@pytest.fixture(scope="module")
def found(tmp_path_factory: pytest.TempPathFactory, many_runs: None) -> Report:
    """The mistaken desk, searched by sampling alone (no targeted schedule):
    what the invariant finds there the shrinker has to make small."""
    return harness.run(
        SPEC,
        options={"mistake": "true"},
        seed=0,
        max_examples=8,
        budget=60,
        targeted=False,
        properties=[refunds_never_exceed_the_order_total],
        report_dir=tmp_path_factory.mktemp("found") / "report",
    )


@pytest.fixture(scope="module")
def held(tmp_path_factory: pytest.TempPathFactory) -> Report:
    """The correct desk, whose adapter registers the invariant."""
    return harness.run(
        HookedDesk(),
        seed=0,
        max_examples=6,
        budget=60,
        report_dir=tmp_path_factory.mktemp("held") / "report",
    )


def _by_name(report: Report) -> dict[str, Any]:
    return {p.name: p for p in report.properties}


def _cli(*args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(args), out=out)
    return code, out.getvalue() + capsys.readouterr().err


# -- the mistake: found by the invariant alone, shrunk, replayed -------------------


def test_only_the_users_invariant_fails_the_mistaken_desk(found: Report) -> None:
    props = _by_name(found)
    assert found.verdict == "fail"
    assert [p.name for p in found.properties if p.verdict == "fail"] == [NAME]
    for name in ("exactly_once_effects", "resume_equivalence", "progress", "legal_transitions"):
        assert props[name].verdict == "pass", props[name]
    mine = props[NAME]
    assert mine.source == "run" and mine.spec == PROPERTY
    assert mine.doc == "The refunds of an order never add up to more than its total."
    assert "more than its total of 1000" in mine.message
    assert mine.witness and mine.counterexample == "."


def test_the_sampled_counterexample_is_shrunk_to_two_refunds_of_one_order(found: Report) -> None:
    ce = found.counterexample
    assert ce is not None and ce.counterexample_for == [NAME]
    assert ce.fully_shrunk
    submits = [s for s in ce.steps if s.startswith("submit")]
    assert len(submits) == 2, ce.steps
    # the shrinker ran more scenarios than the search planned
    assert found.scenarios > (found.searched_scenarios or 0)
    # the witness is the two refunds, in the counterexample's own history
    assert found.folder is not None
    history = History.load(found.folder / "history.jsonl")
    witness = [history.event(i) for i in _by_name(found)[NAME].witness]
    assert [e.value["kind"] for e in witness if e is not None] == ["payments.refund"] * 2


def test_the_invariant_judges_the_kept_history_again_by_itself(found: Report) -> None:
    assert found.folder is not None
    history = History.load(found.folder / "history.jsonl")
    result = refunds_never_exceed_the_order_total.judge(history, None)
    assert result.verdict.value == "fail" and result.witness
    answer = refunds_never_exceed_the_order_total(harness.ScenarioView(history))
    assert isinstance(answer, harness.checkers.Violated)


def test_the_replay_command_names_the_invariant_and_reproduces_it(
    found: Report, capsys: pytest.CaptureFixture[str]
) -> None:
    ce = found.counterexample
    assert ce is not None
    words = shlex.split(ce.replay)
    words = words[words.index("harness") :]
    assert words[words.index("--property") + 1] == PROPERTY
    code, text = _cli(*words[1:], capsys=capsys)
    assert code == 1, text
    assert f"reproduced: {NAME} failed" in text


def test_a_replay_that_does_not_name_the_invariant_says_how_to(
    found: Report, capsys: pytest.CaptureFixture[str]
) -> None:
    assert found.folder is not None
    code, text = _cli(
        "replay", str(found.folder), "--adapter", SPEC, "--adapter-opt", "mistake=true",
        capsys=capsys,
    )  # fmt: skip
    assert code == 0, text  # every built-in property holds
    assert f"add --property {PROPERTY}" in text


def test_a_rerendered_report_names_the_invariant_as_data_and_trust_replays_it(
    found: Report, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert found.folder is not None
    copy = tmp_path / "copy"
    shutil.copytree(found.folder, copy)
    code, text = _cli("report", str(copy), capsys=capsys)
    assert code == 1, text
    summary = (copy / "summary.md").read_text()
    assert f'and invariants ["{PROPERTY}"]' in summary and "--trust-adapter" in summary
    code, text = _cli("replay", str(copy), "--trust-adapter", capsys=capsys)
    assert code == 1, text
    assert "importing the recorded invariants (--property " in text
    assert f"reproduced: {NAME} failed" in text


def test_every_report_format_has_the_invariants_line(found: Report) -> None:
    folder = found.folder
    assert folder is not None
    data = json.loads((folder / "report.json").read_text())
    jsonschema.validate(data, report_schema())
    (mine,) = [p for p in data["properties"] if p["name"] == NAME]
    assert mine["verdict"] == "fail" and mine["source"] == "run"
    junit = (folder / "junit.xml").read_text()
    assert f'<testcase name="{NAME}"' in junit
    case = junit.split(f'<testcase name="{NAME}"')[1].split("</testcase>")[0]
    assert "<failure" in case and "more than its total" in case
    assert f"`{NAME}` (your invariant) | ❌ fail" in (folder / "summary.md").read_text()
    html = (folder / "report.html").read_text()
    assert f"<code>{NAME}</code><br><span" in html and "your invariant" in html


@pytest.mark.slow
def test_the_jobs_of_a_split_search_judge_it_and_the_merge_keeps_its_line(
    tmp_path: Path, many_runs: None
) -> None:
    # the command line (a fresh process): --jobs 2 imports the invariant in each job
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--adapter", SPEC,
         "--adapter-opt", "mistake=true", "--property", PROPERTY, "--seed", "0",
         "--max-examples", "6", "--jobs", "2", "--report-dir", str(tmp_path / "report")],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = load_report(tmp_path / "report")
    mine = _by_name(report)[NAME]
    assert report.merged is not None and mine.verdict == "fail"  # two jobs, merged
    assert mine.source == "run" and mine.spec == PROPERTY
    assert report.counterexample is not None
    assert f"--property {PROPERTY}" in report.counterexample.replay
    assert "replay: PYTHONPATH=. harness replay" in proc.stdout
    assert f"  fail       {NAME} (your invariant)" in proc.stdout


# -- without the mistake: earned, with its count -------------------------------------


def test_the_correct_desk_passes_the_invariant_with_its_exercised_count(held: Report) -> None:
    mine = _by_name(held)[NAME]
    assert held.verdict == "pass", held.inconclusive
    assert mine.verdict == "pass" and mine.source == "adapter"
    assert 0 < mine.exercised <= mine.scenarios == held.scenarios
    assert mine.counts.get("held") == mine.exercised
    assert f"exercised it ({mine.scenarios} run)" in mine.message


# -- a buggy invariant: unknown, with its traceback, never a crash -------------------


def test_an_invariant_that_raises_is_unknown_with_its_traceback(
    tmp_path: Path,
) -> None:
    report = harness.run(
        SPEC,
        seed=0,
        max_examples=2,
        budget=60,
        properties=[never_divides_by_zero_but_does],
        report_dir=tmp_path / "report",
    )
    props = _by_name(report)
    boom = props["never_divides_by_zero_but_does"]
    assert boom.verdict == "unknown" and report.verdict == "unknown"
    assert boom.traceback is not None
    assert boom.traceback.startswith("Traceback (most recent call last):\n")
    assert boom.traceback.endswith("ZeroDivisionError: division by zero")
    assert "test_user_invariants.py" in boom.traceback
    assert "Traceback" not in boom.message and "raised ZeroDivisionError" in (boom.reason or "")
    assert props["exactly_once_effects"].verdict == "pass"  # the run went on
    (why,) = [r for r in report.inconclusive if "never_divides_by_zero_but_does" in r]
    assert "could not be judged" in why and "Traceback" not in why
    folder = tmp_path / "report"
    assert "ZeroDivisionError" in (folder / "junit.xml").read_text()
    assert "ZeroDivisionError" in (folder / "summary.md").read_text()
    assert "the invariant raised: traceback" in (folder / "report.html").read_text()


# -- naming them: CLI, list, suite ------------------------------------------------


@pytest.mark.parametrize(
    ("prop", "said"),
    [
        ("examples.invariants.nowhere:x", "cannot import module 'examples.invariants.nowhere'"),
        ("examples/invariants/test_refund_desk.py:x", "a file path is not a spec"),
        ("examples.invariants.refund_desk:worker_main", "decorate it with @harness.invariant"),
        ("examples.invariants.test_refund_desk:refund_never_exceeds_the_order_total", PROPERTY),
    ],
)
def test_a_bad_property_exits_2_saying_what_to_fix(
    prop: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, text = _cli("run", "--adapter", SPEC, "--property", prop, capsys=capsys)
    assert code == 2, text
    assert said in text


def test_an_invariant_named_like_a_built_in_or_needing_an_unknown_capability_is_refused() -> None:
    clash = harness.invariant(name="progress")(lambda view: True)
    with pytest.raises(TypeError, match="lower_snake_case"):
        harness.invariant(lambda view: True)  # a lambda has no name to give it
    with pytest.raises(harness.UsageError, match="has the name of a built-in property"):
        harness.run(SPEC, properties=[clash])
    with pytest.raises(harness.UsageError, match="capability 'operation', which does not exist"):
        harness.run(
            SPEC, properties=[harness.invariant(name="typo", needs="operation")(lambda v: True)]
        )


def test_harness_list_properties_shows_the_users_invariants(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, text = _cli("list", "properties", "--property", PROPERTY, capsys=capsys)
    assert code == 0, text
    lines = text.splitlines()
    assert [line.split()[0] for line in lines[: len(BUILTIN)]] == list(BUILTIN)
    (mine,) = [line for line in lines if line.startswith(NAME)]
    assert "The refunds of an order never add up to more than its total" in mine
    assert "your invariant: --property" in mine


def test_resilience_suite_gives_each_invariant_a_test_of_its_own() -> None:
    suite = resilience_suite(SPEC, properties=[refunds_never_exceed_the_order_total])
    assert hasattr(suite, f"test_{NAME}") and hasattr(suite, "test_progress")
    with pytest.raises(harness.UsageError, match="cannot import module"):
        resilience_suite(SPEC, properties=["nowhere.at_all:x"])


SUITE = f"""
from examples.invariants.test_refund_desk import refunds_never_exceed_the_order_total
from harness.testing import resilience_suite

TestDesk = resilience_suite(
    {SPEC!r}, properties=[refunds_never_exceed_the_order_total], mistake="true"
)
"""


@pytest.mark.slow
@pytest.mark.parametrize("how", ["suite", "plugin"])
def test_pytest_gives_the_invariant_a_test_that_fails_with_its_replay(
    how: str, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("HARNESS_MAX_EXAMPLES", "6")
    monkeypatch.setenv("HARNESS_MAX_RUNS", "3")
    monkeypatch.setenv("HARNESS_SEED", "0")
    if how == "suite":
        pytester.makepyfile(test_desk=SUITE)
        args: list[str] = []
    else:
        pytester.makepyfile(test_nothing="def test_nothing():\n    pass\n")
        args = ["--harness-adapter", SPEC, "--harness-adapter-opt", "mistake=true",
                "--harness-property", PROPERTY]  # fmt: skip
    result = pytester.runpytest_subprocess(*args, "-p", "no:cacheprovider", "-rA")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    failed = [line for line in result.stdout.lines if line.startswith("FAILED")]
    assert len(failed) == 1 and NAME in failed[0], failed
    assert any(f"--property {PROPERTY}" in line for line in result.stdout.lines)


def test_the_built_in_records_keep_the_verdict_rules_tables() -> None:
    from harness.outcome import NEEDS_CAPABILITY, NEEDS_FAMILY

    assert {name: cap.value for name, cap in NEEDS_CAPABILITY.items()} == {
        "approval_integrity": "approvals",
        "memory_safety": "memory_injection",
        "migration_safety": "version_switch",
        "context_rebuild": "context",
        "state_equivalence": "durable_state",
        "effects_accounted": "operations",
    }
    assert NEEDS_FAMILY == {"memory_safety": "memory", "migration_safety": "migration"}
    assert all(p.builtin and p.doc for p in BUILTIN.values())
    result = BUILTIN["progress"](harness.ScenarioView(History([])))
    assert result.name == "progress"  # a built-in record answers a view too


def test_the_view_is_read_only_and_holds_only_applied_effects(found: Report) -> None:
    assert found.folder is not None
    history = History.load(found.folder / "history.jsonl")
    view = harness.ScenarioView(history)
    applied = [e for e in history.effects() if e.value.get("applied")]
    assert [e.index for e in view.effects] == [e.index for e in applied]
    run = next(iter(view.runs.values()))
    assert run.workflow == "refund" and run.state is harness.RunState.COMPLETED
    with pytest.raises(TypeError):
        run.input["amount_cents"] = 0  # type: ignore[index]
    with pytest.raises(TypeError):
        view.runs["r9"] = run  # type: ignore[index]


def test_harness_list_properties_shows_the_adapters_invariants(
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec = f"{HookedDesk.__module__}:HookedDesk"
    code, text = _cli("list", "properties", "--adapter", spec, capsys=capsys)
    assert code == 0, text
    (mine,) = [line for line in text.splitlines() if line.startswith(NAME)]
    assert f"your invariant: adapter {spec}" in mine
    code, text = _cli("list", "faults", "--property", PROPERTY, capsys=capsys)
    assert code == 2 and "go with 'harness list properties'" in text


def test_an_installed_package_registers_invariants_under_the_entry_point_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # a real distribution on the path, as pip would install one
    dist = tmp_path / "desk_invariants-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: desk-invariants\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[harness.properties]\ndesk = {PROPERTY}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    code, text = _cli("list", "properties", capsys=capsys)
    assert code == 0, text
    (mine,) = [line for line in text.splitlines() if line.startswith(NAME)]
    assert "your invariant: installed" in mine
    (dist / "entry_points.txt").write_text("[harness.properties]\nbad = nowhere.at_all:x\n")
    code, text = _cli("list", "properties", capsys=capsys)
    assert code == 2 and "entry point 'bad' (nowhere.at_all:x)" in text
