"""A signal in the first seconds of a run keeps the exit-code contract
(issue 27, defect 8): 130 for SIGINT, 143 for SIGTERM, one line, no
traceback. On ``a4dae93`` a SIGINT while ``harness`` imported the engine
printed a 30-line ``KeyboardInterrupt`` traceback and exited -2 (8 of 31
early-signal tries), and the fork server and a ``--jobs`` job still
importing printed their own.

The signal is sent deterministically: a finder on ``sys.meta_path`` makes
the process signal itself when start-up first imports a given module, at
points from argument parsing to the adapter's runtime. (Before any harness
code runs, in the interpreter's own start, Python's default applies: no
harness code can handle it there.)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from harness._signals import blocked_in_children
from harness.procs import ForkServer

ROOT = Path(__file__).resolve().parents[2]

#: run harness.cli's main as the console script does, after installing a
#: finder that sends this process SIGNAL when MODULE is first imported
_WRAPPER = textwrap.dedent(
    """
    import os, signal, sys

    class _SignalAt:
        def find_spec(self, name, path=None, target=None):
            if name == os.environ["SIGNAL_AT_IMPORT"]:
                sys.meta_path.remove(self)
                os.kill(os.getpid(), getattr(signal, os.environ["SIGNAL_NAME"]))
            return None

    sys.meta_path.insert(0, _SignalAt())
    from harness.cli import main
    sys.exit(main())
    """
)

#: modules start-up imports in this order, from parsing the arguments to
#: loading the reference runtime (each after the handlers are installed)
POINTS = [
    "harness._settings",  # parsing the arguments
    "harness._commands",  # the engine, before any of it
    "pydantic",  # deep inside the engine's imports
    "harness.report",
    "reference_runtime",  # loading the adapter's runtime
]


def _env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CI", "GITHUB_STEP_SUMMARY") and not k.startswith("HARNESS_")
    }
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("module", "sig"),
    [(m, signal.SIGINT) for m in POINTS]
    + [("harness._commands", signal.SIGTERM), ("reference_runtime", signal.SIGTERM)],
    ids=lambda v: v.name if isinstance(v, signal.Signals) else v,
)
def test_a_signal_during_start_up_exits_by_the_contract_without_a_traceback(
    module: str, sig: signal.Signals, tmp_path: Path
) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _WRAPPER, "run", "--adapter", "reference", "--max-examples",
         "1", "--budget", "30", "--report-dir", str(tmp_path / "r")],
        cwd=tmp_path, env=_env(SIGNAL_AT_IMPORT=module, SIGNAL_NAME=sig.name),
        capture_output=True, text=True, timeout=55, check=False,
    )  # fmt: skip
    output = proc.stdout + proc.stderr
    assert proc.returncode == 128 + sig, output
    assert "Traceback" not in output and "KeyboardInterrupt" not in output, output
    assert f"harness: {sig.name}: stopped" in proc.stderr, output


@pytest.mark.timeout(60)
def test_a_child_started_with_signals_held_handles_them_once_it_can(tmp_path: Path) -> None:
    """The mechanism the jobs of ``--jobs N`` start with: a SIGINT sent
    while the child's interpreter starts and imports (tens of
    milliseconds at least) waits, pending, for its handler, which then
    stops it by the contract."""
    code = (
        "from harness._signals import handling_signals\n"
        "from harness._errors import Interrupted\n"
        "import sys, time\n"
        "try:\n"
        "    with handling_signals():\n"
        "        time.sleep(30)\n"
        "except Interrupted as exc:\n"
        "    sys.exit(128 + exc.signum)\n"
    )
    with blocked_in_children():
        child = subprocess.Popen(
            [sys.executable, "-c", code], env=_env(), stderr=subprocess.PIPE, text=True
        )
    child.send_signal(signal.SIGINT)  # still starting: Python has not even imported site
    _, err = child.communicate(timeout=50)
    assert child.returncode == 130, err
    assert "Traceback" not in err, err


@pytest.mark.timeout(60)
def test_the_fork_server_ignores_a_ctrl_c_while_it_starts(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A terminal's Ctrl-C reaches the harness's whole process group, the
    fork server too: sent while the server imports (before it could ignore
    it), it used to kill the server with a traceback."""
    server = ForkServer(preload=[])
    sent: list[int] = []

    def interrupt_the_server_once_it_exists() -> None:
        deadline = time.monotonic() + 30
        while server._proc is None and time.monotonic() < deadline:
            time.sleep(0.0005)
        if server._proc is not None:
            os.kill(server._proc.pid, signal.SIGINT)
            sent.append(server._proc.pid)

    threading.Thread(target=interrupt_the_server_once_it_exists, daemon=True).start()
    try:
        server.start()
        args = {"path": str(tmp_path / "out"), "text": "ok", "env_name": "HOME", "code": 7}
        worker = server.spawn("harness.procs._selftest:write_and_exit", args)
        assert worker.wait(timeout=30).code == 7
    finally:
        server.close()
    assert sent, "the server was interrupted while it started"
    err = capfd.readouterr().err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
