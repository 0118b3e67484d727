from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from reference_runtime import ConfigError
from reference_runtime import crashpoints as cp


@pytest.fixture(autouse=True)
def _disarm() -> Iterator[None]:
    yield
    cp.disarm()


def test_a_disarmed_crash_point_does_nothing() -> None:
    cp.disarm()
    for _ in range(3):
        cp.hit("checkpoint_stmt_1")
    assert cp.hits() == {}


def test_raise_fires_on_the_nth_hit_only() -> None:
    cp.arm("checkpoint_stmt_2=raise@3")
    cp.hit("checkpoint_stmt_2")
    cp.hit("checkpoint_stmt_2")
    with pytest.raises(cp.CrashPointHit) as info:
        cp.hit("checkpoint_stmt_2")
    assert (info.value.site, info.value.hit) == ("checkpoint_stmt_2", 3)
    cp.hit("checkpoint_stmt_2")  # the 4th hit passes


def test_a_simulated_crash_is_not_swallowed_by_except_exception() -> None:
    cp.arm("checkpoint_stmt_1=raise")
    with pytest.raises(cp.CrashPointHit):
        try:
            cp.hit("checkpoint_stmt_1")
        except Exception:  # recovery code must not catch a crash
            pytest.fail("CrashPointHit was caught as an Exception")


@pytest.mark.parametrize(
    "spec",
    [
        "nosuchsite=kill",
        "checkpoint_stmt_1=explode",
        "checkpoint_stmt_1",
        "checkpoint_stmt_1=kill@0",
    ],
)
def test_a_bad_spec_is_a_config_error_naming_the_term(spec: str) -> None:
    with pytest.raises(ConfigError) as info:
        cp.arm(spec)
    assert spec.split("=")[0] in str(info.value)


def test_trace_logs_every_hit_in_order(tmp_path: Path) -> None:
    log = tmp_path / "log"
    cp.arm("", str(log), trace=True)
    cp.hit("checkpoint_stmt_1")
    cp.hit("checkpoint_stmt_2")
    cp.hit("checkpoint_stmt_1")
    lines = [ln.split()[1:] for ln in log.read_text().splitlines()]
    assert lines == [
        ["checkpoint_stmt_1", "1", "trace"],
        ["checkpoint_stmt_2", "1", "trace"],
        ["checkpoint_stmt_1", "2", "trace"],
    ]


def test_kill_is_a_real_sigkill_and_is_logged_first(tmp_path: Path) -> None:
    log = tmp_path / "log"
    code = (
        "from reference_runtime import crashpoints as cp\n"
        f"cp.arm('checkpoint_stmt_1=kill@2', {str(log)!r})\n"
        "cp.hit('checkpoint_stmt_1'); cp.hit('checkpoint_stmt_1')\n"
        "print('survived')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, check=False)
    assert proc.returncode == -signal.SIGKILL
    assert b"survived" not in proc.stdout
    pid, site, n, action = log.read_text().split()
    assert (site, n, action) == ("checkpoint_stmt_1", "2", "kill")
    assert int(pid) != os.getpid()


def test_pause_stops_the_process_until_it_is_continued(tmp_path: Path) -> None:
    code = (
        "from reference_runtime import crashpoints as cp\n"
        "cp.arm('checkpoint_stmt_1=pause')\n"
        "cp.hit('checkpoint_stmt_1')\n"
        "print('continued', flush=True)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    _, status = os.waitpid(proc.pid, os.WUNTRACED)
    assert os.WIFSTOPPED(status)
    os.kill(proc.pid, signal.SIGCONT)
    out, _ = proc.communicate(timeout=30)
    assert out.strip() == b"continued"
    assert proc.returncode == 0
