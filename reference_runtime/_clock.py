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
import zlib
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


#: bytes of a clock record: ``"<time> <crc32 of time>"``, padded with spaces
RECORD_SIZE = 48
#: attempts at reading a record that a concurrent write may have torn
_READ_ATTEMPTS = 1000


class FileClock:
    """A virtual clock shared across processes through a small file.

    The controller writes the time with :meth:`set`; readers parse it on every
    :meth:`now`. The file holds one fixed-size record, the time and a CRC-32 of
    its text: :meth:`set` creates the file whole (a temporary file renamed into
    place) and then overwrites the record in place with one ``pwrite``, which
    costs no rename (on ext4, a rename over a file starts a writeback of the
    new one: a millisecond or more on a busy disk). A reader that meets a
    record torn by a write in flight sees its checksum fail and reads again.
    A file holding just a number (written by hand, or by earlier code) is
    read as that number.
    """

    def __init__(self, path: str | os.PathLike[str], start: float | None = None) -> None:
        self.path = Path(path)
        if start is not None:
            self.set(start)

    def now(self) -> float:
        """The time in the file. Raises :class:`ConfigError` when the file
        cannot be read or does not hold a finite number (a wrong ``--clock``
        path: a missing folder, a directory, another file)."""
        for _ in range(_READ_ATTEMPTS):
            try:
                fd = os.open(self.path, os.O_RDONLY)
                try:
                    data = os.read(fd, 4096)
                finally:
                    os.close(fd)
                value = _parse(data)
            except (OSError, UnicodeDecodeError, ValueError) as exc:
                raise ConfigError(
                    f"cannot read the clock file {str(self.path)!r} ({type(exc).__name__}: "
                    f"{exc}); the controlling process must write the time there first "
                    "(FileClock.set), or use --clock system"
                ) from exc
            if value is None:
                continue  # torn by a write in flight: read again
            if not math.isfinite(value):
                raise ConfigError(f"the clock file {str(self.path)!r} holds {value}, not a time")
            return value
        raise ConfigError(
            f"the clock file {str(self.path)!r} holds no consistent time (its checksum never "
            "matched); only FileClock.set may write it"
        )

    def set(self, value: float) -> None:
        record = _record(float(value))
        try:
            fd = os.open(self.path, os.O_WRONLY)
        except FileNotFoundError:
            fd = -1
        if fd >= 0:
            try:
                if os.fstat(fd).st_size == RECORD_SIZE:
                    os.pwrite(fd, record, 0)
                    return
            finally:
                os.close(fd)
        # No file yet, or one of another shape: make it whole, atomically.
        tmp = self.path.with_name(self.path.name + f".{os.getpid()}.tmp")
        tmp.write_bytes(record)
        os.replace(tmp, self.path)

    def advance(self, seconds: float) -> None:
        self.set(self.now() + seconds)


def _record(value: float) -> bytes:
    text = repr(value)
    out = f"{text} {zlib.crc32(text.encode()):08x}".encode()
    if len(out) > RECORD_SIZE:
        raise ValueError(f"a clock time of {len(text)} characters does not fit a record: {text}")
    return out.ljust(RECORD_SIZE)


def _parse(data: bytes) -> float | None:
    """The time in a clock file's bytes; None for a record torn by a write."""
    if len(data) != RECORD_SIZE:
        return float(data)  # just a number
    words = data.decode("utf-8", errors="replace").split()
    if len(words) != 2 or f"{zlib.crc32(words[0].encode()):08x}" != words[1]:
        return None  # a record in the middle of being overwritten
    return float(words[0])
