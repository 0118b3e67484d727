"""The run-level lifecycle of an adapter (issue 18): ``setup()`` once before
anything else of the run, ``close()`` once at its end; what ``setup()``
leaves reaches ``open()`` and, through spawn arguments and ``env=``, the
workers -- also in a second run of the same process, whose fork server was
started by the first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from engine_support import subprocess_env

import harness

ROOT = Path(__file__).resolve().parents[2]


def _events(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_setup_runs_first_and_its_state_reaches_open_and_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lifecycle_adapters import SetupAdapter

    log = tmp_path / "events.jsonl"
    monkeypatch.setenv("LIFECYCLE_LOG", str(log))
    tokens = []
    for i in range(2):  # the second run reuses the fork server the first started
        start = len(_events(log)) if log.exists() else 0
        report = harness.run(
            SetupAdapter(),
            profile="dev",
            seed=0,
            max_examples=2,
            report_dir=tmp_path / f"r{i}",
        )
        assert report.verdict == "pass"
        events = _events(log)[start:]
        kinds = [e["event"] for e in events]
        assert kinds[0] == "setup" and kinds[-1] == "close", kinds
        assert kinds.count("setup") == 1 and kinds.count("close") == 1
        token = events[0]["token"]
        assert all(e["pid"] == os.getpid() for e in events if e["event"] != "worker")
        assert {e["token"] for e in events if e["event"] in ("open", "close")} == {token}
        workers = [e for e in events if e["event"] == "worker"]
        assert workers, "the run started workers"
        assert all(e["pid"] != os.getpid() for e in workers)
        assert {(e["arg"], e["env"]) for e in workers} == {(token, token)}
        tokens.append(token)
    assert tokens[0] != tokens[1]


@pytest.mark.parametrize("command", ["run", "check-adapter"])
def test_a_setup_that_raises_is_an_adapter_error_and_close_still_runs(
    command: str, tmp_path: Path
) -> None:
    log = tmp_path / "events.jsonl"
    env = subprocess_env({"LIFECYCLE_LOG": str(log)})
    env["PYTHONPATH"] += os.pathsep + str(ROOT)
    argv = [sys.executable, "-m", "harness.cli", command]
    if command == "run":
        argv += ["--adapter", "lifecycle_adapters:SetupRaises", "--max-examples", "2"]
        argv += ["--report-dir", str(tmp_path / "r")]
    else:
        argv += ["lifecycle_adapters:SetupRaises"]
    proc = subprocess.run(
        argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert (
        "harness: adapter error: SetupRaises.setup() raised ConnectionRefusedError: "
        "the runtime's server did not start on port 7233"
    ) in proc.stderr
    assert "Traceback" not in proc.stderr
    assert [e["event"] for e in _events(log)] == ["setup", "close"], "no open() after it"


def test_check_adapter_names_a_run_retried_forever_with_the_runtimes_message(
    tmp_path: Path,
) -> None:
    """``RunState.RETRYING`` with the runtime's ``error``: never a finished
    run, and the message says why (issue 18)."""
    from lifecycle_adapters import NONDETERMINISM

    env = subprocess_env()
    env["PYTHONPATH"] += os.pathsep + str(ROOT)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "check-adapter",
            "lifecycle_adapters:RetryingForever",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    said = "ended retrying (raw status 'failing'): neither terminal nor a legitimate wait; "
    assert said + NONDETERMINISM in proc.stdout
    assert "runs that do not finish" in proc.stdout
    assert "illegal transitions" not in proc.stdout and "wrong effect" not in proc.stdout
