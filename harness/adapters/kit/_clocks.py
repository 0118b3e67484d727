"""The kit's clocks: a constant time, or a virtual one in a file workers read."""

from __future__ import annotations

import math
import os
from pathlib import Path

#: The constant time of a runtime without a clock (keeps histories reproducible).
EPOCH = 1_700_000_000.0


class ConstantClock:
    """A time that never moves: for runtimes without the ``clock`` capability
    (the harness never advances it)."""

    def __init__(self, at: float = EPOCH) -> None:
        self.at = float(at)

    def now(self) -> float:
        """The constant time."""
        return self.at


class FileClock:
    """A virtual time in a small file, shared by the harness and workers.

    The environment creates it with ``start`` and forwards
    ``advance_clock(seconds)`` to :meth:`advance`; a worker opens it by
    :attr:`path` (without ``start``) and calls :meth:`now`, which reads the
    file each time. Writes replace the file atomically: a reader never sees
    a torn time.
    """

    def __init__(self, path: str | os.PathLike[str], start: float | None = None) -> None:
        self.path = Path(path)
        if start is not None:
            self.set(start)

    def now(self) -> float:
        """The time in the file (``OSError``/``ValueError`` if none was set)."""
        return float(self.path.read_text(encoding="utf-8"))

    def set(self, value: float) -> None:
        """Set the time to ``value`` (a finite number)."""
        if not math.isfinite(value):
            raise ValueError(f"a clock time must be finite, got {value!r}")
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(repr(float(value)), encoding="utf-8")
        os.replace(tmp, self.path)

    def advance(self, seconds: float) -> None:
        """Move the time forward by ``seconds`` (>= 0: virtual time never goes back)."""
        if not seconds >= 0:
            raise ValueError(f"the clock only moves forward, got {seconds!r} seconds")
        self.set(self.now() + seconds)
