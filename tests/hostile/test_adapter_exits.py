"""Adapter code that exits, or raises what is not an ``Exception``, is an
adapter error (issue 27, defect 4): ``sys.exit(0)`` in an adapter used to
turn ``harness run`` and ``check-adapter`` into a silent exit 0 with no
report, a green CI job with nothing tested (the boundary caught
``Exception``, and ``SystemExit`` is not one). Now every such escape from
adapter code, in ``run``, ``check-adapter`` and ``replay``, is exit 2 naming
the adapter's call; a ``KeyboardInterrupt`` the adapter raises is its error,
while a real SIGINT during adapter code still stops the run (130).

Most cases call :func:`harness.cli.main` in this process (a toy adapter:
tenths of a second each); one runs ``harness`` as a process, for the exit
status CI sees. On ``a4dae93`` every case here fails: ``main`` returned 0 or
let ``SystemExit``/``KeyboardInterrupt``/``GeneratorExit`` out with a
traceback.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENGINE = ROOT / "tests" / "engine"  # hostile_adapters
for _path in (str(ENGINE), str(ROOT)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from harness._errors import AdapterError, Interrupted  # noqa: E402
from harness._signals import handling_signals  # noqa: E402
from harness.adapters._guard import call  # noqa: E402
from harness.cli import main  # noqa: E402
from harness.model import Quiesce, RunSpec, RunWorker, Scenario, Submit  # noqa: E402

pytestmark = pytest.mark.timeout(120)

SPEC = "hostile_adapters:Misbehaving"


def _cli(
    capsys: pytest.CaptureFixture[str], command: str, tmp_path: Path, where: str, what: str
) -> tuple[int, str]:
    opts = ["--adapter-opt", f"where={where}", "--adapter-opt", f"what={what}"]
    if command == "run":
        argv = ["run", "--adapter", SPEC, *opts, "--max-examples", "2", "--budget", "30",
                "--report-dir", str(tmp_path / "r")]  # fmt: skip
    elif command == "check-adapter":
        argv = ["check-adapter", SPEC, *opts]
    else:
        scenario = Scenario(
            steps=(
                Submit(
                    run=RunSpec(
                        run_id="r1",
                        tenant="acme",
                        workflow="charge",
                        input={"customer_id": "c-1", "amount_cents": 500},
                    )
                ),
                RunWorker(worker_id="w1"),
                Quiesce(),
            )
        )
        file = tmp_path / "scenario.json"
        file.write_text(scenario.model_dump_json())
        argv = ["replay", str(file), "--adapter", SPEC, *opts]
    out = io.StringIO()
    code = main(argv, out=out)
    captured = capsys.readouterr()
    return code, out.getvalue() + captured.out + captured.err


CASES = [
    ("init", "exit0", "Misbehaving(where=..., what=...) raised SystemExit(0)"),
    ("setup", "exit0", "Misbehaving.setup() raised SystemExit(0)"),
    ("observe", "exit0", "_Misbehaving.observe() raised SystemExit(0)"),
    ("submit", "exit3", "_Misbehaving.submit() raised SystemExit(3)"),
    ("declarations", "generator-exit", "_Misbehaving.declarations() raised GeneratorExit"),
    ("observe", "interrupt", "_Misbehaving.observe() raised KeyboardInterrupt though no SIGINT"),
    ("env.close", "base", "_Misbehaving.close() raised BaseException"),
    ("close", "exit0", "Misbehaving.close() raised SystemExit(0)"),
]


@pytest.mark.parametrize(("where", "what", "says"), CASES, ids=[f"{w}-{h}" for w, h, _ in CASES])
def test_an_adapter_that_exits_during_a_run_is_an_adapter_error(
    where: str, what: str, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, text = _cli(capsys, "run", tmp_path, where, what)
    assert code == 2, text
    assert "harness: adapter error: " in text and says in text, text
    assert "Traceback" not in text, text


@pytest.mark.parametrize("command", ["check-adapter", "replay"])
@pytest.mark.parametrize(
    ("where", "what", "says"),
    [
        ("observe", "exit0", "observe() raised SystemExit(0)"),
        ("setup", "interrupt", "setup() raised KeyboardInterrupt"),
        ("submit", "generator-exit", "submit() raised GeneratorExit"),
    ],
)
def test_check_adapter_and_replay_call_an_exit_an_adapter_error(
    command: str,
    where: str,
    what: str,
    says: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, text = _cli(capsys, command, tmp_path, where, what)
    assert code == 2, text
    assert says in text, text
    assert "Traceback" not in text, text


def test_a_real_sigint_during_adapter_code_still_stops_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The user's Ctrl-C arriving while the adapter runs is an interruption
    (130), not the adapter's error: the harness's handler caught it."""
    code, text = _cli(capsys, "run", tmp_path, "observe", "sigint")
    assert code == 130, text
    assert "harness: SIGINT: stopped" in text, text
    assert "adapter error" not in text and "Traceback" not in text, text


def test_keyboard_interrupt_is_the_adapters_only_where_the_harness_handles_sigint() -> None:
    def raises() -> None:
        raise KeyboardInterrupt

    # A library caller without the CLI's handlers: Python's own Ctrl-C, let through.
    with pytest.raises(KeyboardInterrupt) as caught:
        call("X.observe()", raises)
    assert caught.value.__cause__ is None  # as raised: not its own cause
    # Under the handlers a signal raises Interrupted: a KeyboardInterrupt is code's.
    with handling_signals(), pytest.raises(AdapterError, match=r"X\.observe\(\) raised Keyboard"):
        call("X.observe()", raises)

    def interrupted() -> None:
        os.kill(os.getpid(), signal.SIGINT)  # the user's, caught by the handler
        raise AssertionError("the handler raises before this line")

    with pytest.raises(Interrupted), handling_signals():
        call("X.observe()", interrupted)


@pytest.mark.timeout(180)
def test_sys_exit_0_while_the_adapter_module_imports_exits_2_not_0(tmp_path: Path) -> None:
    """As CI runs it: a process whose exit status is the verdict."""
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "GITHUB_STEP_SUMMARY")}
    env["PYTHONPATH"] = os.pathsep.join([str(ENGINE), str(ROOT)])
    env["HOSTILE_IMPORT_EXIT"] = "1"
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--adapter", SPEC, "--max-examples", "1",
         "--report-dir", str(tmp_path / "r")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=170, check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "importing adapter module 'hostile_adapters' raised SystemExit(0)" in proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert not (tmp_path / "r" / "report.json").exists()


def test_a_sys_exit_that_escapes_every_guard_is_not_a_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI's last line of defence: a ``SystemExit`` from adapter code
    the boundary does not wrap (a ``capabilities`` property) exits 2,
    never 0."""
    argv = ["run", "--adapter", "hostile_adapters:ExitingCapabilities", "--max-examples", "1",
            "--report-dir", str(tmp_path / "r")]  # fmt: skip
    code = main(argv, out=io.StringIO())
    err = capsys.readouterr().err
    assert code == 2, err
    assert "SystemExit(0)" in err and "Traceback" not in err, err
