"""Behaviour of the spawners in harness.procs: real processes, real signals.

Every spawner runs the same conformance tests (the ``spawner`` fixture); the
fork-server-only tests are about its cleanup paths. No test measures speed:
timed numbers live in benchmarks/kill_cycles.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import harness.procs
from harness.procs import (
    DirectSpawner,
    Exit,
    ForkServer,
    PreloadError,
    Spawner,
    Stopped,
    TargetError,
    WorkerTimeout,
)

T = "harness.procs._selftest:"
WAIT = 20.0  # generous: CI machines stall; a healthy run never waits this long


@pytest.fixture(params=["fork", "direct"])
def spawner(request: pytest.FixtureRequest) -> Iterator[Spawner]:
    made: Spawner = ForkServer(preload=["sqlite3"]) if request.param == "fork" else DirectSpawner()
    with made:
        yield made


def process_state(pid: int) -> str | None:
    """The /proc state letter of ``pid`` (R, S, T, Z, ...), or None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2]


def is_dead(pid: int) -> bool:
    # A zombie is dead too: whoever adopted it may just not have reaped it yet.
    return process_state(pid) in (None, "Z")


def wait_all_dead(pids: list[int], seconds: float = 10.0) -> list[int]:
    """Return the pids still alive after waiting up to ``seconds`` for all to die."""
    deadline = time.monotonic() + seconds
    while True:
        alive = [pid for pid in pids if not is_dead(pid)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.02)


def read_pidfile(path: Path, seconds: float = WAIT) -> int:
    deadline = time.monotonic() + seconds
    while not (path.exists() and path.read_text()):
        assert time.monotonic() < deadline, f"{path} was never written"
        time.sleep(0.01)
    return int(path.read_text())


def test_spawn_runs_the_target_with_its_args_and_env(spawner: Spawner, tmp_path: Path) -> None:
    out, log = tmp_path / "out.txt", tmp_path / "worker.log"
    worker = spawner.spawn(
        T + "write_and_exit",
        {"path": str(out), "text": "hello", "env_name": "CRASH_POINTS", "code": 7},
        env={"CRASH_POINTS": "after_effect_call=3*kill"},
        log=log,
    )
    assert worker.wait(WAIT) == Exit.exited(7)
    assert out.read_text() == "hello|after_effect_call=3*kill"
    assert log.read_text() == "hello\n"
    assert "CRASH_POINTS" not in os.environ


def test_kill_reports_the_worker_killed_by_sigkill(spawner: Spawner) -> None:
    worker = spawner.spawn(T + "sleep_forever")
    assert worker.poll() is None
    worker.kill()
    exit = worker.wait(WAIT)
    assert exit == Exit.killed(signal.SIGKILL)
    assert exit.was_killed and str(exit) == "killed(SIGKILL)"
    assert is_dead(worker.pid)


def test_a_worker_that_stops_itself_is_reported_stopped_and_finishes_after_cont(
    spawner: Spawner, tmp_path: Path
) -> None:
    marker = tmp_path / "resumed"
    worker = spawner.spawn(T + "stop_self_then_exit", {"path": str(marker)})
    assert worker.wait_stopped_or_exit(WAIT) == Stopped(signal.SIGSTOP)
    assert worker.poll() == Stopped(signal.SIGSTOP)
    assert not marker.exists()  # it really is held at the crash point
    worker.cont()
    assert worker.wait(WAIT) == Exit.exited(0)
    assert marker.read_text() == "resumed"


def test_a_wait_right_after_cont_sees_the_worker_end_not_the_stop_it_already_reported(
    spawner: Spawner, tmp_path: Path
) -> None:
    # The 'continued' report arrives some time after SIGCONT: the stop seen
    # before must not be handed out again as if the worker had stopped anew.
    for n in range(5):
        worker = spawner.spawn(T + "stop_self_then_exit", {"path": str(tmp_path / f"r{n}")})
        assert worker.wait_stopped_or_exit(WAIT) == Stopped(signal.SIGSTOP)
        worker.cont()
        assert worker.wait_stopped_or_exit(WAIT) == Exit.exited(0)


def test_stop_and_cont_from_outside_pause_and_resume_the_worker(spawner: Spawner) -> None:
    worker = spawner.spawn(T + "sleep_forever")
    worker.stop()
    assert worker.wait_stopped_or_exit(WAIT) == Stopped(signal.SIGSTOP)
    assert process_state(worker.pid) == "T"
    worker.cont()
    deadline = time.monotonic() + WAIT
    while worker.poll() is not None or process_state(worker.pid) == "T":
        assert time.monotonic() < deadline, "the worker was never reported running again"
        time.sleep(0.01)
    # A stopped worker still dies on SIGKILL.
    worker.stop()
    worker.wait_stopped_or_exit(WAIT)
    worker.kill()
    assert worker.wait(WAIT) == Exit.killed(signal.SIGKILL)


def test_waiting_for_a_running_worker_times_out_as_unknown(spawner: Spawner) -> None:
    worker = spawner.spawn(T + "sleep_forever")
    with pytest.raises(WorkerTimeout) as caught:
        worker.wait(0.05)
    assert isinstance(caught.value, TimeoutError)
    assert caught.value.state == "running"
    worker.kill()
    worker.wait(WAIT)


def test_signals_after_the_worker_ended_are_ignored(spawner: Spawner) -> None:
    worker = spawner.spawn(T + "noop")
    assert worker.wait(WAIT) == Exit.exited(0)
    worker.kill()
    worker.cont()
    assert worker.poll() == Exit.exited(0)


@pytest.mark.parametrize(
    ("target", "says"),
    [
        ("no_such_package.mod:run", "No module named 'no_such_package'"),
        (T + "no_such_function", "no_such_function"),
        (T + "NOT_CALLABLE", "not a function"),
        ("missing_colon", "package.module:function"),
    ],
)
def test_a_target_that_cannot_be_resolved_raises_target_error_saying_why(
    spawner: Spawner, target: str, says: str
) -> None:
    with pytest.raises(TargetError) as caught:
        spawner.spawn(target)
    assert caught.value.target == target
    assert says in str(caught.value)
    # The spawner still works afterwards.
    assert spawner.spawn(T + "noop").wait(WAIT) == Exit.exited(0)


def test_a_target_that_raises_exits_1_with_its_traceback_in_the_log(
    spawner: Spawner, tmp_path: Path
) -> None:
    log = tmp_path / "worker.log"
    worker = spawner.spawn(T + "raise_error", {"message": "boom at step 3"}, log=log)
    assert worker.wait(WAIT) == Exit.exited(1)
    assert "RuntimeError: boom at step 3" in log.read_text()


def test_a_configure_hook_runs_after_the_env_so_a_setting_read_at_import_is_read_again(
    spawner: Spawner, tmp_path: Path
) -> None:
    env = {"HARNESS_SELFTEST_SETTING": "the worker's"}
    seen = {}
    for label, hooks in (("plain", ()), ("configured", (T + "reread_setting",))):
        path = tmp_path / label
        worker = spawner.spawn(T + "write_setting", {"path": str(path)}, env=env, configure=hooks)
        assert worker.wait(WAIT) == Exit.exited(0)
        seen[label] = path.read_text()
    assert seen["configured"] == "the worker's"
    # A forked worker's module was imported by the server, before the env
    # (Prefect's settings); a fresh interpreter had it at import anyway.
    assert seen["plain"] == ("<unset>" if isinstance(spawner, ForkServer) else "the worker's")


def test_a_configure_hook_that_cannot_be_resolved_starts_no_worker_and_one_that_raises_exits_1(
    spawner: Spawner, tmp_path: Path
) -> None:
    with pytest.raises(TargetError, match="no_such_hook"):
        spawner.spawn(T + "noop", configure=(T + "no_such_hook",))
    with pytest.raises(TypeError, match="not the string"):
        spawner.spawn(T + "noop", configure=T + "reread_setting")  # type: ignore[arg-type]
    log = tmp_path / "worker.log"
    worker = spawner.spawn(T + "noop", configure=(T + "fail_to_configure",), log=log)
    assert worker.wait(WAIT) == Exit.exited(1)
    assert "RuntimeError: settings unreadable" in log.read_text()


def test_killing_a_worker_also_kills_its_own_subprocesses(spawner: Spawner, tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    worker = spawner.spawn(T + "spawn_grandchild_and_sleep", {"pidfile": str(pidfile)})
    grandchild = read_pidfile(pidfile)
    assert not is_dead(grandchild)
    worker.kill()
    worker.wait(WAIT)
    assert wait_all_dead([grandchild]) == []


def test_close_kills_the_workers_still_running(tmp_path: Path) -> None:
    for made in (ForkServer(), DirectSpawner()):
        with made as spawner:
            workers = [spawner.spawn(T + "sleep_forever") for _ in range(3)]
            stopped = spawner.spawn(T + "stop_self_then_exit")
            stopped.wait_stopped_or_exit(WAIT)
        for worker in [*workers, stopped]:
            assert worker.poll() == Exit.killed(signal.SIGKILL), made
            assert is_dead(worker.pid)


def test_many_spawn_kill_cycles_leak_no_file_descriptors(spawner: Spawner) -> None:
    cycles = 200 if isinstance(spawner, ForkServer) else 20  # a fresh interpreter is slow
    spawner.spawn(T + "noop").wait(WAIT)  # warm up lazily created fds
    before = len(os.listdir("/proc/self/fd"))
    pids = []
    for _ in range(cycles):
        worker = spawner.spawn(T + "sleep_forever")
        worker.kill()
        assert worker.wait(WAIT) == Exit.killed(signal.SIGKILL)
        pids.append(worker.pid)
    assert len(os.listdir("/proc/self/fd")) == before
    assert wait_all_dead(pids, 1.0) == []


HARNESS_SCRIPT = textwrap.dedent(
    """
    import json, sys, threading, time
    from harness.procs import DirectSpawner, ForkServer

    kind, where = sys.argv[1], sys.argv[2]

    def run():
        spawner = ForkServer(preload=["sqlite3"]) if kind == "fork" else DirectSpawner()
        spawner.start()
        workers = [spawner.spawn("harness.procs._selftest:sleep_forever") for _ in range(3)]
        stopped = spawner.spawn("harness.procs._selftest:stop_self_then_exit")
        stopped.wait_stopped_or_exit(20)
        pids = [w.pid for w in [*workers, stopped]]
        print(json.dumps({"server": getattr(spawner, "pid", None), "workers": pids}), flush=True)
        time.sleep(3600)

    if where == "main":
        run()
    else:
        threading.Thread(target=run, daemon=True).start()
        time.sleep(3600)
    """
)


@pytest.mark.parametrize(
    ("kind", "where"),
    [("fork", "main"), ("fork", "thread"), ("direct", "main")],
    ids=["fork-server-from-main-thread", "fork-server-from-other-thread", "direct"],
)
def test_killing_the_harness_with_sigkill_leaves_no_orphan_workers(kind: str, where: str) -> None:
    # ``with`` closes the pipe and reaps the process (no ResourceWarning).
    with subprocess.Popen(
        [sys.executable, "-c", HARNESS_SCRIPT, kind, where], stdout=subprocess.PIPE, text=True
    ) as harness_proc:
        try:
            assert harness_proc.stdout is not None
            started = json.loads(harness_proc.stdout.readline())
            pids = started["workers"]
            assert [pid for pid in pids if is_dead(pid)] == []
            if started["server"]:
                # The server, its workers, and its spares (forked ahead, unassigned).
                # The first spawn of a new target retires the spares forked before
                # its import: they may still be zombies, not yet reaped, and are
                # left out (they are dead already).
                server = started["server"]
                children = Path(f"/proc/{server}/task/{server}/children").read_text().split()
                assert set(pids) <= {int(pid) for pid in children}
                pids = [server, *(int(pid) for pid in children if not is_dead(int(pid)))]
                assert not is_dead(server)
        finally:
            harness_proc.kill()
    assert wait_all_dead(pids) == []


def test_sigterm_to_the_fork_server_kills_its_workers_and_reports_them() -> None:
    with ForkServer() as server:
        workers = [server.spawn(T + "sleep_forever") for _ in range(3)]
        assert server.pid is not None
        os.kill(server.pid, signal.SIGTERM)
        for worker in workers:
            assert worker.wait(WAIT) == Exit.killed(signal.SIGKILL)
        assert wait_all_dead([server.pid]) == []


def test_a_preload_that_fails_raises_preload_error_naming_the_module() -> None:
    with pytest.raises(PreloadError) as caught:
        ForkServer(preload=["sqlite3", "no_such_module_xyz"]).start()
    assert caught.value.module == "no_such_module_xyz"
    assert "No module named 'no_such_module_xyz'" in str(caught.value)


def test_exit_and_stopped_round_trip_through_json() -> None:
    for value in (Exit.exited(3), Exit.killed(9)):
        assert Exit.from_json(json.loads(json.dumps(value.to_json()))) == value
    assert Stopped.from_json(Stopped(19).to_json()) == Stopped(19)
    with pytest.raises(ValueError):
        Exit(code=0, signal=9)


def test_the_public_names_are_sorted_and_all_exist() -> None:
    assert harness.procs.__all__ == sorted(harness.procs.__all__)
    for name in harness.procs.__all__:
        assert hasattr(harness.procs, name)


def test_a_warm_call_runs_once_in_the_server_and_every_worker_inherits_what_it_built(
    tmp_path: Path,
) -> None:
    warm = [(T + "warm_built", {"key": "app", "value": "graph"})]
    with ForkServer(preload=["sqlite3"], warm=warm) as server:
        texts = []
        for i in range(3):
            out = tmp_path / f"out{i}.txt"
            worker = server.spawn(T + "write_built", {"key": "app", "path": str(out)})
            assert worker.wait(WAIT) == Exit.exited(0)
            texts.append(out.read_text())
    # built once, by the server (not by any worker), before it forked them all
    assert texts == [f"graph built by {server.pid}"] * 3


def test_a_warm_call_that_raises_or_starts_a_thread_stops_the_server_with_preload_error() -> None:
    with pytest.raises(PreloadError) as caught:
        ForkServer(warm=[(T + "warm_built", {"raise": "no app"})]).start()
    assert caught.value.module == T + "warm_built"
    assert "no app" in str(caught.value)
    with pytest.raises(PreloadError, match="started 1 thread"):
        ForkServer(warm=[(T + "warm_built", {"key": "k", "value": "v", "thread": True})]).start()
    with pytest.raises(TypeError, match="JSON"):
        ForkServer(warm=[(T + "warm_built", {"value": object()})])
