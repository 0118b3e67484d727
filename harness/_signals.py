"""Interruption: SIGINT and SIGTERM stop a run cleanly; a second one at once.

CI cancels a job with SIGTERM, a person with Ctrl-C. The first signal
raises :class:`~harness._errors.Interrupted` in the main thread, so the
search stops, workers are killed and environments closed by the ``finally``
blocks on the way out, and a partial report marked ``interrupted`` is
written; the process exits 130 (SIGINT) or 143 (SIGTERM). Code that must not
be cut halfway (closing an environment, dropping a schema, writing the
report) runs inside :func:`shielded`: a signal arriving there is held until
the block ends. A second signal exits at once (``os._exit``) with one line.

Start-up is covered too. ``harness`` (``harness.cli.main``) installs the
handlers before it parses its arguments or imports the engine (the CLI's
module imports little for that reason), so a Ctrl-C while it starts exits
130 with one line, not a ``KeyboardInterrupt`` traceback. Only the
interpreter's own start, before any harness code runs, is left to Python.
Processes the harness starts do not stop on a terminal's Ctrl-C: their
parent decides. Jobs of ``--jobs N`` run in sessions of their own and are
started with SIGINT and SIGTERM blocked (:func:`blocked_in_children`), so
the signal their parent passes on during their start-up waits for their
handlers; the fork server is started the same way and then ignores SIGINT.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

from ._errors import Interrupted

_state: dict[str, Any] = {"installed": False, "shield": 0, "pending": None, "got": None}

#: the signals that stop a run
STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})


def exit_code(signum: int) -> int:
    """The shell's convention: 128 + the signal's number (130, 143)."""
    return 128 + signum


def _handler(signum: int, frame: FrameType | None) -> None:
    if _state["got"] is not None:
        name = signal.Signals(signum).name
        os.write(2, f"harness: {name} again: exiting now, without cleaning up\n".encode())
        os._exit(exit_code(signum))
    _state["got"] = signum
    if _state["shield"]:
        _state["pending"] = signum  # raised when the shielded block ends
        return
    raise Interrupted(signum)


@contextlib.contextmanager
def handling_signals() -> Iterator[None]:
    """Turn SIGINT and SIGTERM into :class:`Interrupted` while the block runs
    (main thread only; elsewhere, a no-op)."""
    if threading.current_thread() is not threading.main_thread() or _state["installed"]:
        yield
        return
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    _state.update(installed=True, got=None, pending=None, shield=0)
    for s in previous:
        signal.signal(s, _handler)
    previous_hook = sys.unraisablehook

    def quiet_lost_interrupt(unraisable: Any) -> None:
        # The handler's Interrupted raised where Python can only print it
        # (a finalizer, an isinstance check inside one): it is not lost,
        # check_interrupted raises it again between steps, so printing a
        # traceback for it would only alarm.
        if isinstance(unraisable.exc_value, Interrupted):
            return
        previous_hook(unraisable)

    sys.unraisablehook = quiet_lost_interrupt
    mask = None
    try:
        # A process started with these signals blocked (a job of --jobs N:
        # see blocked_in_children) has held them through its start-up; they
        # reach the handler now, inside this block.
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, ())
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        yield
    finally:
        if mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        for s, h in previous.items():
            signal.signal(s, h)
        sys.unraisablehook = previous_hook
        # The signal belonged to this block, which has now ended (by raising
        # Interrupted, caught by the caller): later code in the same process,
        # another harness run under pytest, must not see it as its own.
        _state.update(installed=False, got=None, pending=None)


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """Hold an interruption until this block has finished."""
    _state["shield"] += 1
    try:
        yield
    finally:
        _state["shield"] -= 1
        pending = _state["pending"]
        if pending is not None and not _state["shield"]:
            _state["pending"] = None
            raise Interrupted(pending)


@contextlib.contextmanager
def blocked_in_children() -> Iterator[None]:
    """Start child processes inside this block: they begin with SIGINT and
    SIGTERM blocked (a signal mask is inherited through ``fork`` and
    ``exec``), so a signal sent to one while its interpreter starts and
    imports waits, pending, until the child handles it (its
    :func:`handling_signals` unblocks them) instead of killing it or
    printing a ``KeyboardInterrupt`` traceback. This process holds a signal
    that comes meanwhile for the few milliseconds of the block, then handles
    it as usual."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def signal_received() -> int | None:
    """The signal this process's handler caught and has not yet seen
    through (None: none came, or no handler is installed)."""
    got: int | None = _state["got"]
    return got


def sigint_is_ours() -> bool:
    """Whether SIGINT now reaches :func:`_handler` (which raises
    :class:`Interrupted`, never ``KeyboardInterrupt``): while it does, a
    ``KeyboardInterrupt`` is raised by code, not by a Ctrl-C."""
    return bool(_state["installed"]) and signal.getsignal(signal.SIGINT) is _handler


def check_interrupted() -> None:
    """Raise :class:`Interrupted` if a signal came and was lost on the way (a
    handler's exception raised where Python ignores it, such as inside an
    ``isinstance`` check): the runner and the engine call this between steps."""
    got = _state["got"]
    if got is not None and not _state["shield"]:
        raise Interrupted(got)
