"""CPU of a running process tree, by kind of process, sampled from ``/proc``.

:class:`TreeSampler` reads every descendant of a root pid every
``interval`` seconds in a thread of its own and keeps each process's last
reading. :meth:`TreeSampler.by_kind` then splits the tree's CPU (user +
system) into:

- ``parent``: the root itself;
- ``fork server``: ``harness.procs._forkserver`` processes, their own CPU;
- ``workers``: what the fork servers reaped (their children's CPU from
  ``/proc``: every worker, spare and orphan they waited for) and the live
  workers at the last reading;
- ``toxiproxy-server``, ``keeper`` (the Toxiproxy keeper), ``other``;
- ``parent's commands``: what the root reaped while its fork server and
  keeper still ran (the short-lived commands it ran: ``ss``, say).

A process's last reading misses what it spent after it (at most one
interval); the tree's exact total comes from ``os.wait4`` of the root, and
the caller may put what the readings missed on the parent. Timed numbers
belong in the benchmarks, never in the tests.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def _read(pid: int) -> tuple[int, str, float, float, str] | None:
    """(ppid, comm, own CPU s, reaped children's CPU s, cmdline) of ``pid``."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        cmd = raw.replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None
    comm = stat[stat.index("(") + 1 : stat.rindex(")")]
    f = stat.rsplit(")", 1)[1].split()
    own = (int(f[11]) + int(f[12])) / TICK
    children = (int(f[13]) + int(f[14])) / TICK
    return int(f[1]), comm, own, children, cmd


def kind_of(pid: int, root: int, comm: str, cmd: str, parent_cmd: str) -> str:
    if pid == root:
        return "parent"
    if "toxiproxy" in comm:
        return "toxiproxy-server"
    # a worker is forked from its server: it has the server's command line
    if "harness.procs._forkserver" in parent_cmd:
        return "workers"
    if "harness.procs._forkserver" in cmd:
        return "fork server"
    if " -I -S -c " in cmd:
        return "keeper"
    return f"other ({comm})"


class TreeSampler:
    """Samples the descendants of ``root`` until :meth:`stop`."""

    def __init__(self, root: int, interval: float = 0.1) -> None:
        self.root, self.interval = root, interval
        #: pid -> (kind, own CPU s, reaped children's CPU s, parent pid, scan
        #: number), the last reading
        self.last: dict[int, tuple[str, float, float, int, int]] = {}
        self._scans = 0
        #: the root's reaped children's CPU at the last reading where its
        #: long-lived children (fork server, keeper) were all still alive:
        #: the short-lived commands it ran (``ss``, say)
        self.commands = 0.0
        self._long_lived: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _scan(self) -> None:
        self._scans += 1
        procs: dict[int, tuple[int, str, float, float, str]] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                got = _read(int(entry.name))
                if got is not None:
                    procs[int(entry.name)] = got
        tree = {self.root}
        grew = True
        while grew:
            grew = False
            for pid, (ppid, *_rest) in procs.items():
                if ppid in tree and pid not in tree:
                    tree.add(pid)
                    grew = True
        for pid in tree:
            if pid not in procs:
                continue
            ppid, comm, own, children, cmd = procs[pid]
            # this scan's: pids are reused within a long run on a busy machine
            parent_cmd = procs[ppid][4] if ppid in procs else ""
            kind = kind_of(pid, self.root, comm, cmd, parent_cmd)
            if not cmd and pid in self.last:
                # a zombie has no command line; it is the process read before
                # (its pid is not reused until it is reaped)
                kind = self.last[pid][0]
            self.last[pid] = (kind, own, children, ppid, self._scans)
            if ppid == self.root and kind in ("fork server", "keeper"):
                self._long_lived.add(pid)
        if self.root in procs and self._long_lived <= tree:
            self.commands = procs[self.root][3]

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._scan()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def by_kind(self) -> dict[str, float]:
        """CPU seconds by kind of process, from the last readings."""
        out: dict[str, float] = {}
        for kind, own, children, ppid, scan in self.last.values():
            if kind == "workers":
                # counted live only if alive at its server's last reading:
                # one reaped before that is in the server's children already
                server = self.last.get(ppid)
                if server is not None and server[4] != scan:
                    continue
            out[kind] = out.get(kind, 0.0) + own
            if kind == "fork server":
                out["workers"] = out.get("workers", 0.0) + children
        out["parent's commands"] = self.commands
        return out
