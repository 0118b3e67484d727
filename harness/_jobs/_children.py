"""Jobs 2..N as child processes: how each is started (its environment,
its own session), signalled, killed when stuck, and read (one JSON object
a line); job 1, the parent's own share, beside them."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from .._errors import Interrupted
from .._signals import blocked_in_children


def _child_env() -> dict[str, str]:
    """This environment, with this process's import path (an adapter spec
    the parent can import, from a test folder pytest put on ``sys.path``,
    the jobs can too)."""
    # What the parent resolved it passes itself: a job must not read the
    # example database again (it would replay its scenarios twice), nor
    # split itself into jobs.
    env = {k: v for k, v in os.environ.items() if k not in ("HARNESS_EXAMPLE_DB", "HARNESS_JOBS")}
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env


class _Job:
    """Job ``k`` of ``n`` (2..N): a process of its own."""

    def __init__(self, k: int, n: int, folder: Path, args: dict[str, Any]) -> None:
        self.k, self.n, self.folder = k, n, folder
        # Started with SIGINT and SIGTERM blocked: one passed on while it
        # starts waits for its handler (harness._job), never a traceback.
        with blocked_in_children():
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "harness._job", json.dumps(args)],
                stdout=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                env=_child_env(),
                # A terminal's Ctrl-C reaches the parent only: it passes the
                # signal on once (two would make a job exit without cleaning up).
                start_new_session=True,
            )
        self.progress: dict[str, Any] | None = None
        self.error: str | None = None
        self.signalled = False
        #: its output has ended (the reader thread said so)
        self.ended = False
        #: when the parent last heard from it (monotonic seconds)
        self.heard = time.monotonic()
        #: how long it had been silent when it was killed as stuck
        self.stuck: tuple[float, float] | None = None

    def signal(self, signum: int) -> None:
        if self.proc.poll() is None and not self.signalled:
            self.signalled = True
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signum)
                # a job someone stopped (SIGSTOP) must run to act on it
                self.proc.send_signal(signal.SIGCONT)

    def kill_stuck(self, silent: float, limit: float) -> None:
        """Kill this job, silent for ``silent`` seconds, over ``limit``."""
        self.stuck = (silent, limit)
        self.kill()
        self.proc.wait()
        # What it started may still hold its output open: nothing it could
        # say now counts, so its output has ended for the parent.
        self.ended = True

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()

    def died(self) -> str | None:
        """Why this job left no report (None: it wrote one)."""
        if (self.folder / "report.json").is_file():
            return None
        if self.stuck is not None:
            silent, limit = self.stuck
            return (
                f"job {self.k} of {self.n} sent nothing for {silent:.0f} s, longer than a job "
                f"may ({limit:.0f} s: the budget and shrink budget of a whole run, plus as long "
                "as this process's own share took), and was killed: its part of the plan was not "
                "run to the end, and is not judged here"
            )
        code = self.proc.returncode
        how = (
            f"was killed by {signal.Signals(-code).name}"
            if code is not None and code < 0 and -code in signal.valid_signals()
            else f"exited with code {code}"
        )
        return (
            f"job {self.k} of {self.n} {how} before writing its report: its part of the plan "
            "was not run to the end, and is not judged here"
        )


class _Own:
    """Job 1: the parent's own share, run in this process."""

    def __init__(self, n: int, folder: Path) -> None:
        self.k, self.n, self.folder = 1, n, folder
        self.progress: dict[str, Any] | None = None
        #: its share is running (a refusal from another job stops it)
        self.running = False

    def died(self) -> str | None:
        """Why the share left no report (None: it wrote one): a signal
        stopped it before its first scenario."""
        if (self.folder / "report.json").is_file():
            return None
        return (
            f"job 1 of {self.n} (the harness process itself) was stopped before writing its "
            "report: its part of the plan was not run to the end, and is not judged here"
        )


class _Refused(Interrupted):
    """Stops the parent's share when another job refused the run (exit 2):
    an :class:`Interrupted`, so that nothing absorbs it on the way out."""


def _read(job: _Job, out: IO[bytes], inbox: queue.Queue[tuple[_Job, Any]]) -> None:
    """Pass job's wire messages to the parent's main thread; None at the end."""
    for raw in out:
        line = raw.decode("utf-8", "replace").rstrip("\n")
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if not isinstance(message, dict):
            message = {"log": f"job {job.k}: {line}"}
        inbox.put((job, message))
    inbox.put((job, None))


def _wait(jobs: Sequence[_Job], seconds: float) -> None:
    for job in jobs:
        try:
            job.proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            job.kill()
            job.proc.wait()
