"""The command line says what it takes and what was meant (issue 29's CLI
polish; issue 27, defect 10: ``--shard ''``).

Each case calls :func:`harness.cli.main` in this process (or ``harness`` in
a subprocess where what was imported is the point), and checks the exit
code, the message and that no traceback is shown.
"""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from harness._commands import _Progress
from harness._settings import Settings
from harness.cli import _parser, main
from harness.outcome import Draft


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    out = io.StringIO()
    code = main(list(args), out=out)
    captured = capsys.readouterr()
    return code, out.getvalue() + captured.out, captured.err


def _refused(code: int, err: str, *says: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err
    for fragment in says:
        assert fragment in err, (fragment, err)


@pytest.mark.parametrize("value", ["", " ", "/4", "none"])
def test_an_empty_or_partial_shard_is_refused_not_taken_for_the_whole_search(
    capsys: pytest.CaptureFixture[str], value: str, tmp_path: Path
) -> None:
    """``--shard "$CI_NODE_INDEX/$CI_NODE_TOTAL"`` with the variables unset
    once ran the whole search on every machine, exit 0."""
    code, _, err = _cli(
        capsys, "run", "--adapter", "reference", "--shard", value, "--report-dir", str(tmp_path)
    )
    _refused(code, err, "--shard", "K/N")
    assert not (tmp_path / "report.json").exists()


def test_a_mistyped_option_gets_a_suggestion(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(capsys, "run", "--adapter", "reference", "--max-exampls", "3")
    _refused(code, err, "--max-exampls: did you mean --max-examples?")


def test_an_abbreviated_option_is_not_taken_for_another(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A prefix would change meaning when an option is added: refused."""
    code, _, err = _cli(capsys, "run", "--adapter", "reference", "--max-ex", "3")
    _refused(code, err, "unrecognized arguments: --max-ex")


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("referenc", "did you mean 'reference'?"),
        ("langgrah", "did you mean 'langgraph'?"),
        ("openai-agents", "did you mean 'openai_agents'?"),
        # a shipped name that loads, given no app: what its options must name
        ("langgraph", "it takes --adapter-opt app=package.module:APP (a LangGraphApp)"),
        ("a b", "package.module:attr"),
        ("pkg.mod:", "package.module:attr"),
    ],
)
def test_a_mistyped_adapter_gets_a_suggestion(
    capsys: pytest.CaptureFixture[str], spec: str, says: str
) -> None:
    code, _, err = _cli(capsys, "check-adapter", spec)
    _refused(code, err, says)


def test_a_file_path_as_adapter_says_how_to_name_the_module(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "my_adapter.py").write_text("class QueueAdapter:\n    pass\n")
    monkeypatch.chdir(tmp_path)
    for spec, good in (
        ("./my_adapter.py:QueueAdapter", "my_adapter:QueueAdapter"),
        ("my_adapter.py", "my_adapter:QueueAdapter"),  # the class read from the file
    ):
        code, _, err = _cli(capsys, "run", "--adapter", spec)
        _refused(code, err, "is a file path", f"PYTHONPATH=. harness run --adapter {good}")


def test_a_malformed_spec_is_refused_before_the_engine_is_imported(tmp_path: Path) -> None:
    """A typo took seconds to reject on a loaded machine: the engine (and
    Hypothesis) was imported first."""
    code = (
        "import sys\n"
        "from harness.cli import main\n"
        "rc = main(['run', '--adapter', 'not a spec'])\n"
        "heavy = [m for m in ('hypothesis', 'harness.session', 'harness._commands') "
        "if m in sys.modules]\n"
        "print(rc, heavy)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert proc.stdout.strip() == "2 []", proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr


def test_replay_options_without_an_adapter_are_refused_not_ignored(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = _cli(capsys, "replay", str(tmp_path), "--adapter-opt", "bug=")
    _refused(code, err, "without --adapter", "--adapter NAME --adapter-opt")


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    code, out, _ = _cli(capsys, "--version")
    assert code == 0
    assert version("stateful-agent-harness") in out


def _subparser(name: str) -> argparse.ArgumentParser:
    parser = _parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices[name]
    raise AssertionError(name)


@pytest.mark.parametrize("command", ["run", "replay", "merge", "check-adapter"])
def test_every_option_has_help(command: str) -> None:
    for action in _subparser(command)._actions:
        assert action.help, (command, action.option_strings or action.dest)


def test_run_help_gives_defaults_exit_codes_and_examples(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = _cli(capsys, "run", "--help")
    assert code == 0
    text = " ".join(out.split())
    for fragment in (
        "max examples: dev 12, ci 150, thorough 400",
        "budget seconds: dev 60, ci 180, thorough 3600",
        "default: reports",
        "exit codes:",
        "130",
        "examples:",
        "harness run --adapter reference",
    ):
        assert fragment in text, fragment


def test_list_adapters_names_every_shipped_adapter_and_its_extra(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from harness.adapters._specs import SHIPPED

    code, out, _ = _cli(capsys, "list", "adapters")
    assert code == 0
    assert out.splitlines()[0].startswith("reference ")
    for name, shipped in SHIPPED.items():
        line = next(ln for ln in out.splitlines() if ln.startswith(f"{name} "))
        assert shipped.target in line
        if shipped.extra:
            assert f"stateful-agent-harness[{shipped.extra}]" in line
    assert {"langgraph", "openai_agents", "dbos", "temporal"} <= set(SHIPPED)


def test_a_missing_client_library_asks_for_the_extra_not_the_url(tmp_path: Path) -> None:
    """``backend=postgres`` without psycopg installed blamed the URL."""
    code = (
        "import sys\n"
        "sys.modules['psycopg'] = None  # as if the postgres extra were not installed\n"
        "from harness.cli import main\n"
        "sys.exit(main(['check-adapter', 'reference', '--adapter-opt', 'backend=postgres', "
        "'--adapter-opt', 'postgres_url=postgresql://u@127.0.0.1:1/x']))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert "pip install 'stateful-agent-harness[postgres,redis]'" in proc.stderr
    assert "check the URL" not in proc.stderr


def test_progress_counts_one_fault_in_the_singular() -> None:
    out = io.StringIO()
    outcome = Draft(
        adapter="x", adapter_options={}, capabilities=[], settings=Settings(), seed=0
    )
    outcome.examples = 1
    outcome.faults_fired = Counter({"crash": 1})
    _Progress(out).update(outcome.freeze())
    assert "1 fault fired" in out.getvalue(), out.getvalue()
    assert "1 faults" not in out.getvalue()


def test_the_time_left_is_paced_by_the_scenarios_not_the_start_up() -> None:
    """Loading the adapter and the fault-free probe took 10 min here, then
    a scenario every 2 s: the time left is the scenarios' (2 min 30 s for
    75 more), not 10 min per scenario (the first ETA said 25 min for a 2 min
    run)."""
    out = io.StringIO()
    now = [0.0]
    outcome = Draft(
        adapter="x", adapter_options={}, capabilities=[], settings=Settings(), seed=0
    )
    outcome.planned = 100
    progress = _Progress(out, clock=lambda: now[0])
    for n in range(1, 26):
        now[0] = 600.0 + 2.0 * n
        outcome.examples = n
        progress.update(outcome.freeze())
    first, last = out.getvalue().splitlines()
    assert "left" not in first, first  # one scenario gives no pace yet
    assert "(10 min 50 s elapsed, about 2 min 30 s left;" in last, last


def test_a_sentence_never_says_all_0_or_all_1() -> None:
    """A passing property with nothing of its kind said "All 0 applied
    effects ... matched"; one with one said "All 1 run ended"."""
    from harness.checkers._base import every

    assert every(0, "applied effect") == "0 applied effects"
    assert every(1, "run") == "1 run"
    assert every(3, "run") == "All 3 runs"


def test_the_summary_gives_the_time_since_the_start_beside_the_searchs() -> None:
    """The progress lines count from the command's start, the summary gave
    the search's own seconds: 10 min elapsed, then "in 95.0 s"."""
    from harness._commands import _summary
    from harness.report._schema import AdapterInfo, Report

    report = Report(
        verdict="pass",
        seed=0,
        profile="dev",
        adapter=AdapterInfo(
            spec="reference", options={}, name="reference", description={}, capabilities=[]
        ),
        duration_seconds=95.0,
        scenarios=1,
        properties=[],
        other_failures=[],
        faults={},
        crash_points={},
        absorbed_duplicates=0,
        not_tested=[],
        counterexample=None,
    )
    out = io.StringIO()
    _summary(out, report, Path("r"), wall=650.0)
    first = out.getvalue().splitlines()[0]
    assert first == (
        "harness: 1 scenario in 95.0 s (10 min 50 s since harness started); verdict: PASS"
    )
