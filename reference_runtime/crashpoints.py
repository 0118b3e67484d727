"""Named failpoints at every persistence and effect boundary.

In the style of fail-rs and gofail: code calls :func:`hit` with a site name;
nothing happens unless that site is *armed*. Arming is done by configuration
-- the ``RR_CRASHPOINTS`` environment variable, read once per process, or
:func:`arm` -- with a list of ``site=action[@n]`` terms separated by ``;``:

* ``kill``  -- SIGKILL this process (the real thing: no cleanup, no flush);
* ``exit``  -- ``os._exit(137)``;
* ``raise`` -- raise :class:`CrashPointHit` (for in-process tests);
* ``pause`` -- SIGSTOP this process; the controller resumes it with SIGCONT.
  This is how a harness holds a worker at a precise point (a barrier) to
  build races and zombies deterministically.

``@n`` fires on the n-th hit of that site in this process only (default: the
first). ``RR_CRASHPOINT_TRACE=1`` (or ``arm(..., trace=True)``) appends every
hit of every site to the log, with its action ``trace``: that is how a harness
enumerates the (site, n) pairs a workload passes through, to then kill at each.

Before acting, the site, hit number and action are appended to the file named
by ``RR_CRASHPOINT_LOG`` (if set), so the controller learns which fault
actually fired; an appended line survives SIGKILL of the writer.

Code that holds a resource a controller may want to act on while the
process is stopped (a storage connection) describes it with :func:`where`:
a site that fires inside the block appends the description to its log line
(``key=value`` words), so the controller learns, say, which TCP connection a
worker paused inside a transaction is using.

Disarmed cost: one test of a module-level boolean.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ._errors import ConfigError

ENV_SPEC = "RR_CRASHPOINTS"
ENV_LOG = "RR_CRASHPOINT_LOG"
ENV_TRACE = "RR_CRASHPOINT_TRACE"
ACTIONS = ("kill", "exit", "raise", "pause")

#: Every crash point the runtime declares, with what sits on each side of it.
SITES: dict[str, str] = {}


def declare(name: str, doc: str) -> str:
    """Register a site so it can be listed and armed; returns the name."""
    SITES[name] = doc
    return name


class CrashPointHit(BaseException):
    """Raised by the ``raise`` action. A BaseException so that ordinary
    ``except Exception`` recovery code cannot swallow a simulated crash."""

    def __init__(self, site: str, hit: int) -> None:
        self.site, self.hit = site, hit
        super().__init__(f"crash point {site!r} fired on hit {hit}")


@dataclass(frozen=True)
class Arm:
    site: str
    action: str
    nth: int = 1


_armed: dict[str, Arm] = {}
_counts: dict[str, int] = {}
_log_path: str | None = None
_active = False  # some site armed, or tracing on: the only check on the fast path
_trace = False


def parse(spec: str) -> list[Arm]:
    """Parse ``"site=action[@n];..."``; raises ConfigError naming the bad term."""
    arms: list[Arm] = []
    for raw in spec.split(";"):
        term = raw.strip()
        if not term:
            continue
        site, sep, rest = term.partition("=")
        action, _, nth_s = rest.partition("@")
        if not sep or not site or action not in ACTIONS:
            raise ConfigError(
                f"bad crash point term {term!r} in {spec!r}: expected 'site=action[@n]' "
                f"with action one of {', '.join(ACTIONS)}"
            )
        if site not in SITES:
            raise ConfigError(
                f"unknown crash point {site!r}; known sites: {', '.join(sorted(SITES))}"
            )
        try:
            nth = int(nth_s) if nth_s else 1
        except ValueError:
            nth = 0
        if nth < 1:
            raise ConfigError(f"bad hit number in {term!r}: '@n' needs an integer n >= 1")
        arms.append(Arm(site, action, nth))
    return arms


def arm(spec: str, log_path: str | None = None, *, trace: bool = False) -> None:
    """Replace the armed set with ``spec`` and reset hit counters."""
    global _log_path, _active, _trace
    arms = parse(spec)
    if trace and not log_path:
        raise ConfigError("crash point tracing needs a log file (RR_CRASHPOINT_LOG)")
    _armed.clear()
    _counts.clear()
    _armed.update({a.site: a for a in arms})
    _log_path = log_path
    _trace = trace
    _active = bool(_armed) or trace


def disarm() -> None:
    arm("")


def arm_from_env() -> None:
    """Arm from ``RR_CRASHPOINTS`` / ``RR_CRASHPOINT_LOG`` (call after importing
    every module that declares sites)."""
    arm(
        os.environ.get(ENV_SPEC, ""),
        os.environ.get(ENV_LOG),
        trace=os.environ.get(ENV_TRACE, "") == "1",
    )


def hits() -> dict[str, int]:
    """Hit counts of armed (or, when tracing, all) sites in this process."""
    return dict(_counts)


#: describers of what the code passing a site holds (see :func:`where`)
_where: list[Callable[[], str]] = []


@contextlib.contextmanager
def _describing(describe: Callable[[], str]) -> Iterator[None]:
    _where.append(describe)
    try:
        yield
    finally:
        _where.pop()


def where(describe: Callable[[], str]) -> contextlib.AbstractContextManager[None]:
    """While the block runs, a site that fires (not a traced pass) adds
    ``describe()`` -- ``key=value`` words, no newline -- to its log line.
    Free when nothing is armed: ``describe`` is only called when a site fires."""
    if not _active:
        return contextlib.nullcontext()
    return _describing(describe)


def _details() -> str:
    words = []
    for describe in _where:
        try:
            words.append(describe())
        except Exception:  # a description must never change what the site does
            continue
    return " ".join(w for w in words if w)


def _log(site: str, n: int, action: str) -> None:
    if _log_path:
        extra = "" if action == "trace" else _details()
        line = f"{os.getpid()} {site} {n} {action}{' ' + extra if extra else ''}\n"
        fd = os.open(_log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)


def hit(site: str) -> None:
    """Pass a crash point. Free unless some site is armed or tracing is on."""
    if not _active:
        return
    a = _armed.get(site)
    if a is None and not _trace:
        return
    n = _counts.get(site, 0) + 1
    _counts[site] = n
    if _trace:
        _log(site, n, "trace")
    if a is None or n != a.nth:
        return
    _log(site, n, a.action)
    if a.action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif a.action == "exit":
        os._exit(137)
    elif a.action == "pause":
        os.kill(os.getpid(), signal.SIGSTOP)
    else:
        raise CrashPointHit(site, n)


# Sites inside a checkpoint write. Backends call hit("checkpoint_stmt_<n>")
# before the n-th statement of Store.commit (n counted from 1).
for _i in range(1, 9):
    declare(f"checkpoint_stmt_{_i}", f"inside a checkpoint transaction, before statement {_i}")
# ... and this one once every statement has run, before the COMMIT is sent:
# a worker paused here holds a transaction whose COMMIT is its next message.
declare("checkpoint_stmt_commit", "inside a checkpoint transaction, all written, before COMMIT")
