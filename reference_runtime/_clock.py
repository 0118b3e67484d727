"""Injectable clocks.

Leases, approval expiry, ``wake_at`` and retention all read a :class:`Clock`,
never ``time.time()`` directly, so that a test or a harness can make time a
parameter. :class:`FileClock` lets a controlling process set the time seen by
worker processes it cannot reach otherwise (the harness writes the file).
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Protocol, runtime_checkable

from ._errors import ConfigError


@runtime_checkable
class Clock(Protocol):
    """A source of the current time, in seconds since the epoch."""

    def now(self) -> float: ...


class SystemClock:
    """The wall clock (the default in production)."""

    def now(self) -> float:
        return time.time()


class ManualClock:
    """A clock that moves only when told to (in-process tests)."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"a clock cannot move backwards by advance(); got {seconds}")
        self._now += seconds

    def set(self, value: float) -> None:
        self._now = value


class FileClock:
    """A virtual clock shared across processes through a small file.

    The controller writes the time with :meth:`set`; readers parse it on every
    :meth:`now`. Writes are atomic (write to a temporary file, then rename), so a
    reader never sees a torn value even if the writer is killed.
    """

    def __init__(self, path: str | os.PathLike[str], start: float | None = None) -> None:
        self.path = Path(path)
        if start is not None:
            self.set(start)

    def now(self) -> float:
        """The time in the file. Raises :class:`ConfigError` when the file
        cannot be read or does not hold a finite number (a wrong ``--clock``
        path: a missing folder, a directory, another file)."""
        try:
            value = float(self.path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise ConfigError(
                f"cannot read the clock file {str(self.path)!r} ({type(exc).__name__}: "
                f"{exc}); the controlling process must write the time there first "
                "(FileClock.set), or use --clock system"
            ) from exc
        if not math.isfinite(value):
            raise ConfigError(f"the clock file {str(self.path)!r} holds {value}, not a time")
        return value

    def set(self, value: float) -> None:
        tmp = self.path.with_name(self.path.name + f".{os.getpid()}.tmp")
        tmp.write_text(repr(float(value)))
        os.replace(tmp, self.path)

    def advance(self, seconds: float) -> None:
        self.set(self.now() + seconds)
