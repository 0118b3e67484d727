"""Errors raised by the process layer (:mod:`harness.procs`).

Every error raised here on purpose derives from :class:`RunnerError`. The tree
keeps apart whose fault it was::

    RunnerError
    ├── TargetError (ValueError)       -- your mistake: the target cannot be resolved
    │                                     (bad "module:function", import failed, not callable)
    ├── PreloadError (ImportError)     -- your mistake: a preload module failed to import,
    │                                     or it started threads (forking would be unsafe)
    ├── SpawnerClosed (RuntimeError)   -- your mistake: the spawner was used after close()
    ├── WorkerTimeout (TimeoutError)   -- the worker did not reach the awaited state in time;
    │                                     its fate is unknown, not failed
    └── SpawnerLost (ConnectionError)  -- the fork server vanished; the workers it owned were
                                          killed with it, their exit status is unknown

A worker that exits non-zero or is killed is not an error: it is an
:class:`~harness.procs.Exit` value. ``WorkerTimeout`` inherits
:class:`TimeoutError` and ``SpawnerLost`` :class:`ConnectionError` so that
callers that map exceptions to *unknown* outcomes recognise them by builtin.
"""

from __future__ import annotations


class RunnerError(Exception):
    """Root of every error the process layer raises on purpose."""


class TargetError(RunnerError, ValueError):
    """A worker target could not be resolved; no worker was started.

    ``target`` is the string that was given and ``detail`` the reason, with the
    traceback of the failed import when there was one.
    """

    def __init__(self, target: str, detail: str) -> None:
        self.target, self.detail = target, detail
        reason = _reason(detail)
        # What and how to fix on the first line (a one-line report shows only
        # that); the traceback of a failed import after it.
        trace = detail.rstrip() if detail.strip() != reason else ""
        super().__init__(
            f"cannot start worker target {target!r}: {reason} (fix the target given to "
            "spawn(): a target is 'package.module:function', importable from the harness's "
            "sys.path, and the function takes one dict argument)" + (f"\n{trace}" if trace else "")
        )


def _reason(detail: str) -> str:
    """The error a failed import's traceback ends with (``detail`` itself
    when it is not a traceback)."""
    lines = [ln.rstrip() for ln in detail.strip().splitlines() if ln.strip()]
    if not lines:
        return "no reason given"
    if not lines[0].startswith("Traceback"):
        return " ".join(ln.strip() for ln in lines)
    errors = [ln for ln in lines[1:] if not ln[0].isspace()]
    return errors[-1] if errors else lines[-1].strip()


class PreloadError(RunnerError, ImportError):
    """A module in ``ForkServer(preload=...)`` failed; the server did not start.

    ``module`` names the module and ``detail`` carries the server's traceback or
    the reason it refused the module.
    """

    def __init__(self, module: str, detail: str) -> None:
        self.module, self.detail = module, detail
        super().__init__(
            f"fork server could not preload {module!r}: {detail.rstrip()}\n"
            "Fix the import, or remove the module from preload= (it is then imported per worker)."
        )


class SpawnerClosed(RunnerError, RuntimeError):
    """The spawner was used after ``close()`` (or before ``start()``)."""


class WorkerTimeout(RunnerError, TimeoutError):
    """A wait ran out of time; the worker's state at that moment is in ``state``.

    This is an *unknown* outcome: the worker is still running (or stopped, when
    waiting for an exit) and may yet do anything.
    """

    def __init__(self, pid: int, awaited: str, timeout: float, state: str) -> None:
        self.pid, self.awaited, self.timeout, self.state = pid, awaited, timeout, state
        super().__init__(
            f"worker {pid} did not {awaited} within {timeout:g}s (it is {state}); "
            "raise the timeout, or check that the target reaches that point"
        )


class SpawnerLost(RunnerError, ConnectionError):
    """The fork server died or its channel broke while workers were tracked.

    The server's workers die with it (parent-death signal), but their exit
    status is unknown. If the server was not killed on purpose, this is a bug
    in the harness: please file it with the server's stderr.
    """
