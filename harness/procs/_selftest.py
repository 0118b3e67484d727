"""Tiny worker targets for the process layer's tests and ``benchmarks/kill_cycles.py``.

Each takes the args dict that :meth:`Spawner.spawn` passes and behaves as its
docstring says; none imports anything heavy.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any


def write_and_exit(args: dict[str, Any]) -> int:
    """Write ``args["text"]`` and the env var ``args["env_name"]`` to ``args["path"]``,
    print ``args["text"]`` to stdout, then exit with ``args.get("code", 0)``."""
    value = os.environ.get(args["env_name"], "<unset>")
    Path(args["path"]).write_text(f"{args['text']}|{value}")
    print(args["text"], flush=True)
    return int(args.get("code", 0))


def sleep_forever(args: dict[str, Any]) -> None:
    """Sleep until killed; with ``args["pidfile"]``, first write the pid there."""
    if "pidfile" in args:
        Path(args["pidfile"]).write_text(str(os.getpid()))
    while True:
        time.sleep(3600)


def stop_self_then_exit(args: dict[str, Any]) -> int:
    """Stop at a "crash point" (SIGSTOP to self), then exit ``args.get("code", 0)``
    once continued; with ``args["path"]``, write "resumed" there after the stop."""
    os.kill(os.getpid(), signal.SIGSTOP)
    if "path" in args:
        Path(args["path"]).write_text("resumed")
    return int(args.get("code", 0))


def spawn_grandchild_and_sleep(args: dict[str, Any]) -> None:
    """Start a ``sleep`` subprocess, write its pid to ``args["pidfile"]``, sleep forever."""
    child = subprocess.Popen(["sleep", "3600"])
    Path(args["pidfile"]).write_text(str(child.pid))
    while True:
        time.sleep(3600)


def raise_error(args: dict[str, Any]) -> None:
    """Raise ``RuntimeError(args["message"])``: the worker exits 1 with a traceback."""
    raise RuntimeError(args["message"])


def noop(args: dict[str, Any]) -> None:
    """Return at once (exit 0)."""


NOT_CALLABLE = 42


#: read once, when this module is imported, as some frameworks read their
#: settings (Prefect): a forked worker's env comes too late for it
SETTING = os.environ.get("HARNESS_SELFTEST_SETTING", "<unset>")


def reread_setting() -> None:
    """A configuration hook: read :data:`SETTING` again from the environment."""
    global SETTING
    SETTING = os.environ.get("HARNESS_SELFTEST_SETTING", "<unset>")


def fail_to_configure() -> None:
    """A configuration hook that raises."""
    raise RuntimeError("settings unreadable")


def write_setting(args: dict[str, Any]) -> None:
    """Write :data:`SETTING` as this worker holds it to ``args["path"]``."""
    Path(args["path"]).write_text(SETTING)


#: what :func:`warm_built` built, by key: a fork server's warm call fills it
#: before it forks, so its workers find it here without building it
BUILT: dict[str, str] = {}


def warm_built(args: dict[str, Any]) -> None:
    """A warm call (``ForkServer(warm=...)``): keep ``args["value"]`` and the
    building process's pid under ``args["key"]``, or raise ``args["raise"]``,
    or start a thread if ``args["thread"]``."""
    if "raise" in args:
        raise RuntimeError(args["raise"])
    if args.get("thread"):
        import threading

        threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
    BUILT[args["key"]] = f"{args['value']} built by {os.getpid()}"


def write_built(args: dict[str, Any]) -> None:
    """Write what :data:`BUILT` holds under ``args["key"]`` (or ``<none>``) to ``args["path"]``."""
    Path(args["path"]).write_text(BUILT.get(args["key"], "<none>"))
