"""A worker target for ``test_kit_routing``: real code the fork server
imports (this folder is on ``sys.path`` under pytest, and the fork server
inherits ``sys.path``)."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any


def connect_twice(args: dict[str, Any]) -> int:
    """Open a fresh Postgres connection to ``args["url"]``, say where its
    socket goes; wait for the file ``args["go"]``; open another fresh one
    and say the same (or the error). One JSON line each, to ``args["out"]``."""
    import psycopg

    out = Path(args["out"])
    for i in (1, 2):
        if i == 2:
            deadline = time.monotonic() + 30.0
            while not Path(args["go"]).exists() and time.monotonic() < deadline:
                time.sleep(0.01)
        try:
            with psycopg.connect(args["url"], connect_timeout=5) as conn:
                conn.execute("SELECT 1").fetchone()
                with socket.socket(fileno=conn.pgconn.socket) as sock:
                    try:
                        peer = sock.getpeername()[1]
                    finally:
                        sock.detach()  # the fd stays psycopg's
            line = {"i": i, "ok": True, "peer": peer}
        except psycopg.OperationalError as exc:
            line = {"i": i, "ok": False, "error": str(exc)}
        with out.open("a") as fh:
            fh.write(json.dumps(line) + "\n")
    return 0
