"""Crash points for an adapter's workers: count hits, stop or kill at the nth, trace.

The ``crash_points`` capability asks two things of an adapter (see
``docs/adapters.md``, "Crash points"):

* ``start_worker(worker_id, crash=CrashSpec(site, nth, action))``: the
  worker passes named sites in the runtime's code; at the ``nth`` hit of
  ``site`` it kills itself (``action="kill"``: SIGKILL, no clean-up) or stops
  (``action="pause"``: SIGSTOP; the harness continues, kills or races it);
* with ``trace_crash_points`` set on the environment, every worker records
  every hit, and ``crash_point_trace()`` returns them in order as
  ``(worker, site, hit)``: the harness's site profile of each workflow.

:class:`CrashPoints` is the worker's half: one per worker process, built
from the ``CrashSpec`` the harness gave ``start_worker`` (passed to the
worker as the spec or its ``model_dump()``), a log path in the
environment's workdir and the trace flag; the runtime's code calls
:meth:`CrashPoints.hit` at each site. :func:`crash_point_trace` and
:func:`read_crash_log` are the environment's half, reading the same log.

The log is one JSON line per event, appended with one ``write`` on an
``O_APPEND`` file, so a line is whole or absent after a SIGKILL and workers
never interleave inside a line. The signal goes to the calling *thread*
(``pthread_kill``), not the process: a process-directed SIGSTOP may be
taken by another thread, and this one would run on until the group stops
-- long enough, measured on LangGraph's background writer threads, to send
the very commit a pause is meant to hold back.

This module is imported by workers: it imports nothing heavy.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["CrashPoints", "crash_point_trace", "read_crash_log"]


def _spec(crash: Any) -> dict[str, Any] | None:
    """``crash`` (a ``CrashSpec``, its ``model_dump()``, or None) as a dict."""
    if crash is None:
        return None
    if hasattr(crash, "model_dump"):
        crash = crash.model_dump()
    if not isinstance(crash, Mapping) or "site" not in crash:
        raise TypeError(
            f"crash spec {crash!r}: pass the CrashSpec start_worker() received, its "
            "model_dump(), or None"
        )
    action = crash.get("action", "kill")
    if action not in ("kill", "pause"):
        raise ValueError(f"crash spec {crash!r}: action must be 'kill' or 'pause'")
    return {"site": str(crash["site"]), "nth": int(crash.get("nth", 1)), "action": action}


class CrashPoints:
    """One worker process's crash points: hit counts per site, the armed
    site, the log.

    ``log``: the crash log's path (a file in the environment's workdir, the
    same for every worker); ``crash``: the ``CrashSpec`` this worker was
    started with (or its ``model_dump()``, or None); ``trace``: record every
    hit (the environment's ``trace_crash_points`` when the worker started);
    ``sites``: the sites the adapter declares (``crash_points()``), to
    refuse a spec aimed at a site this runtime never passes, with the list.

    Hit counts are per process and per site, from 1, as ``CrashSpec.nth``
    counts them; threads share them (a lock).
    """

    def __init__(
        self,
        log: str | os.PathLike[str],
        crash: Any = None,
        *,
        trace: bool = False,
        sites: Iterable[str] | None = None,
    ) -> None:
        self.log = os.fspath(log)
        self.crash = _spec(crash)
        self.trace = bool(trace)
        self.sites = None if sites is None else frozenset(sites)
        aimed = None if self.crash is None else self.crash["site"]
        if aimed is not None and self.sites is not None and aimed not in self.sites:
            raise ValueError(
                f"crash point {aimed!r} is not a site of this adapter; "
                f"its sites are {', '.join(sorted(self.sites)) or 'none'}"
            )
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    @property
    def counts(self) -> dict[str, int]:
        """Hits so far, per site (a copy)."""
        with self._lock:
            return dict(self._counts)

    def armed(self, site: str) -> bool:
        """Whether ``site`` is the one this worker's spec aims at."""
        return self.crash is not None and self.crash["site"] == site

    def hit(self, site: str, details: Callable[[], Mapping[str, Any]] | None = None) -> int:
        """Pass ``site``: count the hit, trace it if tracing, and at the
        spec's ``nth`` hit log the action and kill or stop the calling
        thread's process (a ``pause`` returns once the harness continues
        the worker). ``details``, called only then, adds what the
        environment needs to know of that moment to the log line (e.g. the
        TCP connection in use: ``network_endpoints``). Returns the hit
        number."""
        with self._lock:
            n = self._counts[site] = self._counts.get(site, 0) + 1
        base: dict[str, Any] = {"pid": os.getpid(), "site": site, "hit": n}
        if self.trace:
            self._append({**base, "action": "trace"})
        crash = self.crash
        if crash is None or crash["site"] != site or crash["nth"] != n:
            return n
        extra = dict(details()) if details is not None else {}
        self._append({**base, **extra, "action": crash["action"]})
        signal.pthread_kill(
            threading.get_ident(),
            signal.SIGSTOP if crash["action"] == "pause" else signal.SIGKILL,
        )
        return n

    def _append(self, line: Mapping[str, Any]) -> None:
        data = (json.dumps(line) + "\n").encode()
        fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, data)  # one write: a line survives a SIGKILL after it
        finally:
            os.close(fd)


def read_crash_log(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The crash log's lines, in order (none when it does not exist yet; a
    line torn by a SIGKILL is skipped). Each has ``pid``, ``site``, ``hit``
    and ``action`` (``trace``, ``kill`` or ``pause``), and whatever a
    ``details`` callback added."""
    try:
        with open(path, encoding="utf-8") as fh:
            raw = fh.read().splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in raw:
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(entry, dict):
            out.append(entry)
    return out


def crash_point_trace(path: str | os.PathLike[str]) -> list[tuple[int, str, int]]:
    """Every traced hit in the crash log at ``path``, in order, as
    ``(worker pid, site, hit)``: what an environment's
    ``crash_point_trace()`` returns."""
    return [
        (int(e["pid"]), str(e["site"]), int(e["hit"]))
        for e in read_crash_log(path)
        if e.get("action") == "trace"
    ]
