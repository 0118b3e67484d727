"""The command line and the network backend: which one runs is said, a bad
choice or a dead server the user named is refused before the run (exit 2)."""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from harness import _toxiproxy

ROOT = Path(__file__).resolve().parents[2]


def _harness(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_a_named_server_that_does_not_answer_is_refused_before_the_run(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{_toxiproxy._free_port()}"  # nothing listens there
    proc = _harness(
        "run",
        "--adapter",
        "reference",
        "--report-dir",
        str(tmp_path / "report"),
        cwd=tmp_path,
        HARNESS_TOXIPROXY_URL=dead,
        HARNESS_NETWORK_BACKEND="auto",
    )
    assert proc.returncode == 2, proc.stderr
    assert f"HARNESS_TOXIPROXY_URL={dead!r} does not answer" in proc.stderr
    assert not (tmp_path / "report").exists()  # refused before anything ran


def test_an_unknown_backend_in_the_environment_is_refused(tmp_path: Path) -> None:
    proc = _harness("run", "--adapter", "reference", cwd=tmp_path, HARNESS_NETWORK_BACKEND="netem")
    assert proc.returncode == 2
    assert "HARNESS_NETWORK_BACKEND='netem' is not auto, toxiproxy or kernel" in proc.stderr


def test_list_services_says_which_backend_the_network_faults_run_on(tmp_path: Path) -> None:
    none = _harness(
        "list",
        "services",
        cwd=tmp_path,
        HARNESS_TOXIPROXY_URL="",
        HARNESS_TOXIPROXY_BIN=str(tmp_path / "no-such-server"),
        HARNESS_NETWORK_BACKEND="toxiproxy",
    )
    assert none.returncode == 0, none.stderr
    last = none.stdout.splitlines()[-1]
    assert last.startswith("network faults run on: none: --network-backend toxiproxy, but "), last
    assert "no-such-server is not an executable file" in last


def test_a_server_that_stops_answering_mid_run_is_an_error_within_the_api_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Toxiproxy server that answers its version, then never answers a
    proxy's creation: the call ends with ToxiproxyError after API_TIMEOUT,
    never a hang (toxiproxy-python, used before, set no timeout at all)."""
    release = threading.Event()

    class Stalling(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # /version, and the keeper's /proxies at exit
            body = b"{}" if self.path == "/proxies" else b"2.4.0"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            release.wait(30)  # never answers while the test waits

        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Stalling)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    monkeypatch.setenv(_toxiproxy.ENV_URL, f"http://127.0.0.1:{httpd.server_address[1]}")
    monkeypatch.setattr(_toxiproxy._proxies, "API_TIMEOUT", 0.5)  # read where the Server is
    server = _toxiproxy.Server()
    try:
        started = time.monotonic()
        with pytest.raises(_toxiproxy.ToxiproxyError, match="refused to create a proxy"):
            server.create("postgres", "127.0.0.1:5432", "w1")
        assert time.monotonic() - started < 10
    finally:
        release.set()
        server.close()
        httpd.shutdown()
        httpd.server_close()
