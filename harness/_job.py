"""One job of ``harness run --jobs N``: ``python -m harness._job ARGS``.

Started by :mod:`harness._jobs` (never by hand) for K from 2 to N (job 1
is the harness process itself): runs shard K of N of the
search ``ARGS`` (a JSON object: ``harness._jobs.job_args``) into a
folder of its own, writing one JSON object per line on stdout (the wire
:mod:`harness._jobs` describes). Its exit code is ``harness run``'s: 0, 1
or 3 by the verdict, 2 when it refused the run, 130 / 143 when a signal
stopped it (its partial report written first).

Its parent starts it with SIGINT and SIGTERM blocked (``_signals.
blocked_in_children``): one passed on while it starts waits until
:func:`main` handles it, so a job stopped early prints nothing. When its
parent dies, however it dies, the job gets SIGTERM (``PR_SET_PDEATHSIG``):
it stops and cleans up as on any SIGTERM, and says nothing on the closed
wire (a ``BrokenPipeError`` there is the parent's death, not an error).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from . import _api as api
from ._api import PREPARED
from ._errors import AdapterError, HarnessError, Interrupted, UsageError
from ._jobs import job_settings, progress_message
from ._signals import exit_code, handling_signals
from .model import Verdict
from .outcome import Outcome
from .procs._wire import PR_SET_PDEATHSIG, prctl

_EXIT = {Verdict.FAIL.value: 1, Verdict.UNKNOWN.value: 3}

#: the parent has closed the wire (it died): nothing more is sent
_wire = {"closed": False}


def _send(message: dict[str, Any]) -> None:
    if _wire["closed"]:
        return
    try:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):  # ValueError: stdout already closed
        _close_wire()


def _close_wire() -> None:
    """Nobody reads the wire any more: send the rest (and what Python
    flushes at exit) nowhere, quietly."""
    _wire["closed"] = True
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _die_with(parent: int | None) -> bool:
    """SIGTERM for this job when ``parent`` dies (Linux); False if it is
    gone already."""
    if parent is None:
        return True
    prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    return os.getppid() == parent


def _progress(o: Outcome) -> None:
    _send({"progress": progress_message(o)})


def _wait_for(prepared: Path, parent: int) -> bool:
    """Wait until the parent has written ``prepared`` (its probe, see
    ``harness._api.Session.prepare``); False if the parent is gone first (a
    parent that fails kills its jobs; one killed cannot)."""
    while not (prepared / PREPARED).is_file():
        if os.getppid() != parent:
            return False
        time.sleep(0.02)  # a signal raises Interrupted here
    return True


def main(argv: list[str]) -> int:
    args = json.loads(argv[0])
    prepared = None if args.get("prepared") is None else Path(args["prepared"])
    if not _die_with(args.get("parent")):
        _close_wire()
        return exit_code(signal.SIGTERM)  # the parent died before we started
    try:
        # The signals held since the start reach the handler here, inside
        # this try (see the module's docstring).
        with handling_signals():
            try:
                report = api.run_job(
                    args["adapter"],
                    args["options"],
                    job_settings(args),
                    args["scenarios"],
                    prepared=prepared,
                    queue=None if args.get("queue") is None else Path(args["queue"]),
                    # the adapter loads while the parent probes; then wait for it
                    ready=None if prepared is None else lambda: _wait_for(prepared, args["parent"]),
                    log=lambda text: _send({"log": text}),
                    progress=_progress,
                    properties=args.get("properties") or (),
                )
            except (UsageError, AdapterError) as exc:
                _send({"error": str(exc)})
                return 2
            except HarnessError as exc:
                _send({"error": f"internal error (please file a bug): {exc}"})
                return 2
    except Interrupted as exc:
        return exit_code(exc.signum)
    return _EXIT.get(report.verdict, 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
