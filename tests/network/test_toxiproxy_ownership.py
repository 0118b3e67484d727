"""Nothing of the Toxiproxy backend outlives its harness: the server it
started and the proxies it made are gone at a normal exit, and within
seconds of a SIGKILL mid-fault (its keeper sees the pipe close); on a
user's server, its proxies are deleted and the server is left running."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import _toxiproxy

pytestmark = pytest.mark.usefixtures("toxiproxy")

ROOT = Path(__file__).resolve().parents[2]
#: A harness process in the middle of a partition: a worker's proxies made,
#: one switched off. It says where everything is, then waits to be killed
#: (or, given "exit" on stdin, ends normally).
HARNESS = textwrap.dedent(
    """
    import json, sys
    from harness import _toxiproxy
    srv = _toxiproxy.server()
    urls = _toxiproxy.route_worker(
        object(), "n0", {"postgres": "postgresql://postgres@127.0.0.1:5432/test",
                         "redis": "redis://127.0.0.1:6379/0"})
    routes = _toxiproxy.current().proxy_names()
    route = next(iter(srv._scopes.values())).all[0]
    srv.set_enabled(route, False)  # mid-partition
    print(json.dumps({"pid": srv.server_pid, "api": srv.api, "prefix": srv.prefix,
                      "keeper": srv.keeper.pid, "proxies": routes}), flush=True)
    sys.stdin.readline()
    """
)
#: seconds within which what a killed harness left must be gone (a bound:
#: the test waits for it to go, and fails only past this)
GONE_WITHIN = 5.0


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def _answers(api: str) -> bool:
    try:
        with urllib.request.urlopen(f"{api}/version", timeout=2):
            return True
    except OSError:
        return False


def _proxies(api: str, prefix: str) -> list[str]:
    with urllib.request.urlopen(f"{api}/proxies", timeout=10) as r:
        return [name for name in json.load(r) if name.startswith(prefix)]


def _start(env: dict[str, str]) -> tuple[subprocess.Popen[str], dict[str, object]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HARNESS],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, "the harness process did not start its server"
    return proc, json.loads(line)


def _until(done: object, within: float = GONE_WITHIN) -> float | None:
    """Seconds until ``done()`` held (polled), or None past ``within``."""
    start = time.monotonic()
    while time.monotonic() - start < within:
        if done():  # type: ignore[operator]
            return time.monotonic() - start
        time.sleep(0.02)
    return None


@pytest.fixture
def owned_binary() -> str:
    source = _toxiproxy.server_source()
    if not (isinstance(source, tuple) and source[0] == "bin"):
        pytest.skip(f"needs a toxiproxy-server binary ({_toxiproxy.ENV_BIN}); got {source}")
    return source[1]


@pytest.mark.parametrize("end", ["sigkill", "exit"])
def test_a_server_the_harness_started_goes_with_it(owned_binary: str, end: str) -> None:
    proc, said = _start({_toxiproxy.ENV_URL: "", _toxiproxy.ENV_BIN: owned_binary})
    pid, api = int(str(said["pid"])), str(said["api"])
    assert _alive(pid) and _answers(api)
    assert len(list(said["proxies"])) == 2, said  # type: ignore[call-overload]
    if end == "sigkill":
        os.kill(proc.pid, signal.SIGKILL)
    proc.communicate("exit\n", timeout=60)  # a killed one reads nothing
    took = _until(lambda: not _alive(pid) and not _alive(int(str(said["keeper"]))))
    assert took is not None, f"the server {pid} outlived its harness by {GONE_WITHIN} s"
    assert not _answers(api)


@pytest.fixture
def user_server(owned_binary: str, tmp_path: Path) -> Iterator[str]:
    """A Toxiproxy server the test runs, as a user would."""
    port = _toxiproxy._free_port()
    server = subprocess.Popen(
        [owned_binary, "-host", "127.0.0.1", "-port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    api = f"http://127.0.0.1:{port}"
    try:
        assert _until(lambda: _answers(api), 20.0) is not None, "the user's server did not start"
        yield api
    finally:
        server.kill()
        server.wait()


def test_on_a_users_server_a_killed_harness_leaves_no_proxy_and_the_server_runs(
    user_server: str,
) -> None:
    proc, said = _start({_toxiproxy.ENV_URL: user_server, _toxiproxy.ENV_BIN: ""})
    assert said["pid"] is None  # not the harness's to stop
    prefix = str(said["prefix"])
    assert len(_proxies(user_server, prefix)) == 2
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    took = _until(lambda: not _proxies(user_server, prefix))
    assert took is not None, f"proxies {prefix}* outlived their harness by {GONE_WITHIN} s"
    assert _answers(user_server)
