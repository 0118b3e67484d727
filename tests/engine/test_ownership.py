"""Resources belong to whoever holds their lock, across PID namespaces.

Two CI containers on one database service, or one ``$TMPDIR``, see each
other's pids as dead: a janitor that judged liveness by pid dropped a live
run's schema and scratch folder (issue 13, defect 3). These tests put the
owner and the sweeper in different PID namespaces (``unshare``) and check
that what is held survives and what a SIGKILLed run left is swept.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis

from harness import _janitor

UNSHARE = ["unshare", "--pid", "--fork", "--mount-proc"]


def _can_unshare() -> bool:
    if shutil.which("unshare") is None:
        return False
    done = subprocess.run([*UNSHARE, "true"], capture_output=True, timeout=30)
    return done.returncode == 0


needs_unshare = pytest.mark.skipif(
    not _can_unshare(), reason="needs `unshare --pid` (root or user namespaces)"
)

#: Holds one deployment until told to go on, then uses it and closes it.
OWNER = textwrap.dedent(
    """
    import json, os, sys
    from harness import _janitor
    from harness._janitor import _redis
    from harness.adapters.reference._deployment import Deployment
    if os.environ.get("ALIVE_TTL"):
        _redis.ALIVE_TTL = float(os.environ["ALIVE_TTL"])  # where RedisLease reads it
    backend, postgres_url, redis_url = sys.argv[1], sys.argv[2] or None, sys.argv[3] or None
    folder = _janitor.scratch_dir()
    d = Deployment(
        folder / "env", backend=backend, queue="redis" if redis_url else "store",
        postgres_url=postgres_url, redis_url=redis_url,
    )
    def one(run_id):
        d.submit("research", {"topic": "tides", "sources": 2, "requester": "u-1"},
                 tenant="acme", run_id=run_id)
        return d.drive(run_id)
    assert one("before") == "Completed"
    print(json.dumps({"folder": str(folder), "tag": d.tag, "pid": os.getpid()}), flush=True)
    sys.stdin.readline()  # hold everything until the test says go on
    assert one("after") == "Completed", "the deployment no longer works"
    (folder / "still-mine").write_text("x")
    d.close()
    print("done", flush=True)
    """
)


def _env(tmp: Path) -> dict[str, str]:
    # A private TMPDIR: the sweeps see only this test's folders.
    return {**os.environ, "TMPDIR": str(tmp)}


def _start_owner(
    tmp: Path, backend: str, pg: str, rd: str, *, namespace: bool = False, ttl: str = ""
) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    argv = [sys.executable, "-c", OWNER, backend, pg, rd]
    proc = subprocess.Popen(
        [*UNSHARE, *argv] if namespace else argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**_env(tmp), "ALIVE_TTL": ttl},
        start_new_session=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.wait(30)
        pytest.fail(f"the owner died before holding anything (exit {proc.returncode})")
    return proc, json.loads(line)


def _finish_owner(proc: subprocess.Popen[str]) -> tuple[int, str]:
    out, _ = proc.communicate("go\n", timeout=120)
    return proc.returncode, out


@pytest.fixture
def owners() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.communicate(timeout=30)


def _schema_exists(url: str, name: str) -> bool:
    with psycopg.connect(url) as c:
        row = c.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (name,)).fetchone()
    return row is not None


def _keys(url: str, tag: str) -> list[bytes]:
    client = redis.Redis.from_url(url)
    try:
        return sorted(client.scan_iter(match=f"rr:{tag}:*"))
    finally:
        client.close()


def _harness_run(tmp: Path, *opts: str, namespace: bool = False) -> subprocess.Popen[str]:
    argv = [
        sys.executable,
        "-c",
        "import sys; from harness.cli import main; sys.exit(main())",
        "run",
        "--adapter",
        "reference",
        *(a for o in opts for a in ("--adapter-opt", o)),
        "--max-examples",
        "3",
        "--report-dir",
        str(tmp / f"report-{time.monotonic_ns()}"),
    ]
    return subprocess.Popen(
        [*UNSHARE, *argv] if namespace else argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(tmp),
        start_new_session=True,
    )


def _passed(proc: subprocess.Popen[str], timeout: float = 300) -> None:
    out, err = proc.communicate(timeout=timeout)
    # 0 pass, 3 inconclusive (3 examples leave a family unexercised); never a
    # failed property (1), a usage error (2) or a traceback.
    assert proc.returncode in (0, 3), f"exit {proc.returncode}\n{out}\n{err}"
    assert "Traceback" not in err, err


# -- (a) two runs in different PID namespaces ----------------------------------------


@needs_unshare
@pytest.mark.slow  # a whole harness run on Postgres and Redis beside a live deployment
@pytest.mark.postgres
@pytest.mark.redis
def test_a_harness_run_in_another_pid_namespace_keeps_a_live_run_s_schema_keys_and_folder(
    tmp_path: Path, postgres_url: str, redis_url: str, owners: list[subprocess.Popen[str]]
) -> None:
    owner, held = _start_owner(tmp_path, "postgres", postgres_url, redis_url)
    owners.append(owner)
    keys = _keys(redis_url, held["tag"])
    assert keys, "the owner's workers left no Redis key to protect"
    second = _harness_run(
        tmp_path,
        "backend=postgres",
        f"postgres_url={postgres_url}",
        "queue=redis",
        f"redis_url={redis_url}",
        namespace=True,
    )
    _passed(second)
    assert _schema_exists(postgres_url, held["tag"])
    assert set(keys) <= set(_keys(redis_url, held["tag"]))
    assert Path(held["folder"]).is_dir()
    code, out = _finish_owner(owner)
    assert code == 0 and "done" in out
    assert not _schema_exists(postgres_url, held["tag"])
    assert _keys(redis_url, held["tag"]) == []


@needs_unshare
@pytest.mark.slow  # two whole harness runs side by side
def test_a_sweep_in_another_pid_namespace_leaves_a_live_sqlite_run_alone(tmp_path: Path) -> None:
    first = _harness_run(tmp_path)
    try:
        deadline = time.monotonic() + 120
        while not list(tmp_path.glob("harness-*/oracle-*")):  # its scratch folder is in use
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "the run never started an example"
            time.sleep(0.05)
        sweep = subprocess.run(
            [*UNSHARE, sys.executable, "-c", "from harness import _janitor; _janitor.sweep()"],
            env=_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert sweep.returncode == 0, sweep.stderr
        _passed(first)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.communicate(timeout=30)


@needs_unshare
def test_a_sweep_in_another_pid_namespace_keeps_a_live_deployment_s_folder(
    tmp_path: Path, owners: list[subprocess.Popen[str]]
) -> None:
    owner, held = _start_owner(tmp_path, "sqlite", "", "")
    owners.append(owner)
    sweep = subprocess.run(
        [*UNSHARE, sys.executable, "-c", "from harness import _janitor; _janitor.sweep()"],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert sweep.returncode == 0, sweep.stderr
    assert Path(held["folder"], "env", "runtime.db").is_file()
    code, out = _finish_owner(owner)
    assert code == 0 and "done" in out, out


# -- (b) a SIGKILLed owner's resources are swept -----------------------------------------


def _sweep_until(gone: Any, postgres_url: str | None, redis_url: str | None, root: Path) -> None:
    """Sweep as the next run does until ``gone()``: the server notices a dead
    client's connection (and frees its locks) a moment after the kill."""
    deadline = time.monotonic() + 15
    while True:
        _janitor.sweep(postgres_url, redis_url)
        _janitor.sweep_folders(root)
        if gone() or time.monotonic() > deadline:
            return
        time.sleep(0.2)


@needs_unshare
@pytest.mark.postgres
@pytest.mark.redis
def test_what_a_sigkilled_run_in_another_pid_namespace_held_is_swept_by_the_next_run(
    tmp_path: Path, postgres_url: str, redis_url: str, owners: list[subprocess.Popen[str]]
) -> None:
    owner, held = _start_owner(
        tmp_path, "postgres", postgres_url, redis_url, namespace=True, ttl="1"
    )
    owners.append(owner)
    assert _keys(redis_url, held["tag"])
    os.killpg(owner.pid, signal.SIGKILL)  # the whole container goes
    owner.wait(30)
    folder, tag = Path(held["folder"]), held["tag"]

    def gone() -> bool:
        return not (folder.exists() or _schema_exists(postgres_url, tag) or _keys(redis_url, tag))

    _sweep_until(gone, postgres_url, redis_url, tmp_path)
    assert not _schema_exists(postgres_url, tag)
    assert _keys(redis_url, tag) == []
    assert not folder.exists()


@needs_unshare
@pytest.mark.postgres
@pytest.mark.redis
def test_a_sweep_in_another_pid_namespace_keeps_what_a_live_owner_holds_past_its_ttl(
    tmp_path: Path, postgres_url: str, redis_url: str, owners: list[subprocess.Popen[str]]
) -> None:
    owner, held = _start_owner(tmp_path, "postgres", postgres_url, redis_url, ttl="1")
    owners.append(owner)
    keys = _keys(redis_url, held["tag"])
    time.sleep(2.5)  # past the alive key's TTL: only its renewal keeps it
    code = "import sys; from harness import _janitor; _janitor.sweep(sys.argv[1], sys.argv[2])"
    sweep = subprocess.run(
        [*UNSHARE, sys.executable, "-c", code, postgres_url, redis_url],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert sweep.returncode == 0, sweep.stderr
    assert _schema_exists(postgres_url, held["tag"])
    assert set(keys) <= set(_keys(redis_url, held["tag"]))
    assert Path(held["folder"]).is_dir()
    code_, out = _finish_owner(owner)
    assert code_ == 0 and "done" in out, out


# -- (c) probe and profile folders -----------------------------------------------------


@pytest.mark.slow  # a harness run killed during its probe, then swept
def test_probe_and_profile_folders_of_a_sigkilled_run_are_swept(tmp_path: Path) -> None:
    # A quick probe may end (and remove its folder) between the look that
    # saw the folder and the kill: then the run is started again, up to
    # three times, until the kill lands while the folder is there.
    left: list[Path] = []
    for _ in range(3):
        run = _harness_run(tmp_path)
        try:
            deadline = time.monotonic() + 120
            while not list(tmp_path.glob("harness-pro*-*")):
                assert run.poll() is None, run.communicate()
                assert time.monotonic() < deadline, "no probe or profile folder appeared"
                time.sleep(0.02)
        finally:
            if run.poll() is None:
                os.killpg(run.pid, signal.SIGKILL)
            run.communicate(timeout=30)
        # A kill between a folder's mkdir and its lock leaves a folder the
        # harness cannot prove it made, which is kept by design (see the
        # unlocked-folder test below): that run does not count, so it is
        # removed here and the run is started again.
        left = list(tmp_path.glob("harness-pro*-*"))
        for folder in [f for f in left if not (f / _janitor.LOCK_NAME).exists()]:
            shutil.rmtree(folder)
            left.remove(folder)
        if left:
            break
    assert left
    # The run's fork server lives in a session of its own and exits when it
    # sees its parent die: on a loaded machine a moment after the SIGKILL,
    # and until then it still holds the folder's lock (seen in CI; 15 s were
    # not enough with four test workers and the ADK and Prefect suites on 2 cores).
    deadline = time.monotonic() + 45
    _janitor.sweep_folders(tmp_path)
    while list(tmp_path.glob("harness-*")) and time.monotonic() < deadline:
        time.sleep(0.2)
        _janitor.sweep_folders(tmp_path)
    assert list(tmp_path.glob("harness-*")) == []


# -- folders without an ownership lock ------------------------------------------------


def test_an_unlocked_scratch_folder_is_never_swept(tmp_path: Path) -> None:
    """No lock file, no proof the harness made it: however old, whatever its
    name (earlier versions' pid-tagged folders included), it is kept."""
    dead_pid = 2**22 + 17  # above pid_max's default: nobody has it
    young = tmp_path / f"harness-{dead_pid}_abcd1234"
    old = tmp_path / f"harness-{dead_pid}_efgh5678"
    old_probe = tmp_path / "harness-probe-ijkl9012"
    report = tmp_path / "harness-mnop3456"  # a report folder of harness.testing
    for folder in (young, old, old_probe, report):
        folder.mkdir()
    hours_ago = time.time() - 2 * 3600
    for folder in (old, old_probe, report):
        os.utime(folder, (hours_ago, hours_ago))
    assert _janitor.sweep_folders(tmp_path) == []
    assert young.is_dir() and old.is_dir() and old_probe.is_dir() and report.is_dir()


@needs_unshare
def test_a_scratch_folder_is_kept_while_its_lock_is_held_and_swept_once_its_holder_dies(
    tmp_path: Path,
) -> None:
    # In a PID namespace of its own, the holder's pid means nothing here.
    holder = subprocess.Popen(
        [
            *UNSHARE,
            sys.executable,
            "-c",
            "import sys; from harness import _janitor; "
            "print(_janitor.scratch_dir(), flush=True); sys.stdin.readline()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=_env(tmp_path),
        start_new_session=True,
    )
    with holder:
        assert holder.stdout is not None
        folder = Path(holder.stdout.readline().strip())
        assert _janitor.sweep_folders(tmp_path) == []
        assert folder.is_dir()
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait(10)
        gone: list[str] = []
        deadline = time.monotonic() + 10
        while not gone and time.monotonic() < deadline:  # the holder exits a moment later
            gone = _janitor.sweep_folders(tmp_path)
            time.sleep(0.05)
        assert gone == [folder.name]
        assert not folder.exists()
