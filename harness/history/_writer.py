"""The runner's append-only pen: :class:`HistoryWriter` assigns indexes
and flushes every line, so what the harness saw survives its being killed."""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from pydantic import ValidationError

from ..model import Event, EventF, EventType
from ._errors import HistoryClosedError, HistoryFormatError


def _utf8(value: Any) -> Any:
    """``value`` (plain JSON) with every string UTF-8 can carry. A lone
    surrogate (a runtime decoded bytes with ``surrogateescape``, or sliced a
    UTF-16 pair) cannot be written as UTF-8 JSON: it is recorded as the
    text of its escape, ``\\ud800``, and the rest of the string is kept."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
        return value
    if isinstance(value, dict):
        return {_utf8(k): _utf8(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_utf8(v) for v in value]
    return value


def _is_side_effect(e: Event) -> bool:
    return e.value.get("applied") is True and e.value.get("side_effect", True) is True


class HistoryWriter:
    """Append-only JSONL writer that assigns indexes and flushes every line.

    Opening an existing file continues it: the next index follows the
    highest readable one, and a half-written last line (the harness was
    killed mid-write) is closed with a newline so it cannot swallow the next
    event -- it stays a readable problem for :meth:`History.load`. With
    ``fsync=True`` every line is also forced to disk. Safe to share between
    threads; one writer per file.
    """

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self.path = Path(path)
        self._fsync = fsync
        self._lock = threading.Lock()
        self._next = 0
        needs_newline = False
        if self.path.exists():
            text = self.path.read_text(encoding="utf-8", errors="replace")
            needs_newline = bool(text) and not text.endswith("\n")
            for line in text.splitlines():
                try:
                    self._next = max(self._next, Event.model_validate_json(line).index + 1)
                except ValidationError:
                    continue
        self._fh: IO[str] | None = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
        if needs_newline:
            self._fh.write("\n")
            self._fh.flush()

    @property
    def next_index(self) -> int:
        return self._next

    def append(
        self,
        type: EventType | str,
        f: EventF | str,
        process: str,
        value: Mapping[str, Any] | None,
        time: float,
    ) -> Event:
        """Record one event and return it (with its ``index``).

        ``value`` must be plain JSON (no NaN, no sets, string keys); it is
        copied, so later changes to it do not change the record. Raises
        :class:`HistoryFormatError` for a value or field that cannot be an
        event, :class:`HistoryClosedError` after :meth:`close`.
        """
        try:
            text = json.dumps(dict(value or {}), allow_nan=False)
            copied = json.loads(text)
            if "\\ud" in text:  # a surrogate, paired or not: look closer
                copied = _utf8(copied)
        except (TypeError, ValueError) as exc:
            raise HistoryFormatError(
                f"cannot record a {f} event: its value is not plain JSON ({exc}); "
                "use dict/list/str/int/float/bool/None with string keys"
            ) from exc
        process = _utf8(process)
        if isinstance(time, float) and not math.isfinite(time):
            raise HistoryFormatError(f"cannot record a {f} event at time {time!r}")
        with self._lock:
            if self._fh is None:
                raise HistoryClosedError(f"history writer for {self.path} is closed")
            try:
                event = Event.model_validate(
                    {
                        "index": self._next,
                        "time": time,
                        "process": process,
                        "type": type,
                        "f": f,
                        "value": copied,
                    }
                )
            except ValidationError as exc:
                raise HistoryFormatError(f"cannot record event: {exc}") from exc
            self._fh.write(event.model_dump_json() + "\n")
            self._fh.flush()
            if self._fsync:
                os.fsync(self._fh.fileno())
            self._next += 1
            return event

    def close(self) -> None:
        """Close the file; idempotent."""
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
