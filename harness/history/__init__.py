"""Histories: the JSON Lines record of one scenario, read and written.

A :class:`History` is an immutable, indexed view of a list of
:class:`~harness.model.Event` values -- what checkers are pure functions of.
A :class:`HistoryWriter` is the runner's append-only pen: it assigns
``index``, writes one line per event and flushes it, so that whatever the
harness saw survives the harness being killed.

Reading is tolerant on purpose: a line that is not an event (say, the half
line a killed harness left behind, or bytes that are not UTF-8) or a gap in
the indexes does not stop the load; it is kept in :attr:`History.problems`,
and the checkers answer *unknown* where such a hole could hide a violation.
``History.load(path, strict=True)`` raises instead. Writing never fails on
text a runtime returned: a lone surrogate is recorded as its ``\\udXXX``
escape.

Errors::

    HistoryError
    ├── HistoryFormatError (ValueError)   -- your data: a line is not an event (strict
    │                                        load), or a value given to ``append`` is not
    │                                        plain JSON
    └── HistoryClosedError (RuntimeError) -- your code: ``append`` after ``close``

The field layout of each event kind is the contract in ``docs/history.md``.
"""

from ._declaration import DELIVERY_MODES, Declaration
from ._errors import HistoryClosedError, HistoryError, HistoryFormatError
from ._history import History
from ._writer import HistoryWriter

__all__ = [
    "DELIVERY_MODES",
    "Declaration",
    "History",
    "HistoryClosedError",
    "HistoryError",
    "HistoryFormatError",
    "HistoryWriter",
]
