"""The errors the history raises on purpose."""

from __future__ import annotations


class HistoryError(Exception):
    """Root of every error this module raises on purpose."""


class HistoryFormatError(HistoryError, ValueError):
    """A line or a value cannot be an event; ``line`` is its 1-based line (0 if none)."""

    def __init__(self, message: str, line: int = 0) -> None:
        self.line = line
        super().__init__(message)


class HistoryClosedError(HistoryError, RuntimeError):
    """The writer was used after :meth:`HistoryWriter.close`."""
