"""A throwaway Prefect server for the reproductions: ``prefect server start``
on a free loopback port, its database in a temporary folder, stopped on exit."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator


@contextlib.contextmanager
def prefect_server() -> Iterator[str]:
    """Start a server; yield its API URL (also set as ``PREFECT_API_URL`` for
    the child processes this one starts: Prefect reads it at import)."""
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    home = tempfile.mkdtemp(prefix="prefect-repro-")
    env = {**os.environ, "PREFECT_HOME": home}
    argv = [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1"]
    argv += ["--port", str(port), "--no-services", "--no-ui", "--analytics-off"]
    log = open(os.path.join(home, "server.log"), "wb")  # noqa: SIM115
    server = subprocess.Popen(argv, env=env, stdout=log, stderr=log, start_new_session=True)
    api = f"http://127.0.0.1:{port}/api"
    try:
        for _ in range(1800):
            with contextlib.suppress(OSError):
                urllib.request.urlopen(f"{api}/health", timeout=5).close()
                break
            time.sleep(0.1)
        os.environ["PREFECT_API_URL"] = api
        yield api
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)
        log.close()
