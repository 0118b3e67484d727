"""The :class:`History`: an immutable, indexed view of a list of events,
loaded tolerantly (a line that is not an event is kept as a problem)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path

from pydantic import ValidationError

from ..model import Event, EventF
from ._declaration import Declaration
from ._errors import HistoryFormatError
from ._writer import _is_side_effect


class History:
    """An immutable, indexed history.

    Events keep the order given. ``problems`` lists what made the history
    odd: unreadable lines, and indexes that are not 0, 1, 2, ... in order
    (a gap means lost lines). Lookups never raise on odd values: an event
    whose ``run_id`` is not a string is simply not indexed by run.
    """

    __slots__ = ("_by_f", "_by_index", "_by_run", "_events", "_problems")

    def __init__(self, events: Iterable[Event] = (), problems: Iterable[str] = ()) -> None:
        self._events: tuple[Event, ...] = tuple(events)
        found = list(problems)
        self._by_index: dict[int, Event] = {}
        self._by_f: dict[EventF, list[Event]] = {}
        self._by_run: dict[str, list[Event]] = {}
        expected = 0
        for e in self._events:
            if e.index in self._by_index:
                found.append(f"index {e.index} appears more than once")
            elif e.index != expected:
                found.append(f"index {e.index} where {expected} was expected (lost or reordered)")
            expected = e.index + 1
            self._by_index.setdefault(e.index, e)
            self._by_f.setdefault(e.f, []).append(e)
            run_id = e.value.get("run_id")
            if isinstance(run_id, str):
                self._by_run.setdefault(run_id, []).append(e)
        self._problems = tuple(found)

    # -- reading and writing -------------------------------------------------

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, strict: bool = False) -> History:
        """Read a JSONL history. Unreadable lines go to ``problems`` (or raise
        :class:`HistoryFormatError` when ``strict``)."""
        with open(path, "rb") as fh:
            return cls.from_lines(fh, strict=strict, source=str(path))

    @classmethod
    def from_lines(
        cls, lines: Iterable[str | bytes], *, strict: bool = False, source: str = "history"
    ) -> History:
        """Parse JSON Lines (blank lines are skipped). Lines given as bytes
        must be UTF-8: one that is not is a problem like any unreadable line
        (a torn write, a foreign file), not an error that stops the load."""
        events: list[Event] = []
        problems: list[str] = []
        for n, raw in enumerate(lines, start=1):
            if isinstance(raw, bytes):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    msg = (
                        f"{source}:{n} is not UTF-8 text (byte 0x{raw[exc.start]:02x} "
                        f"at column {exc.start + 1})"
                    )
                    if strict:
                        raise HistoryFormatError(msg, n) from exc
                    problems.append(msg)
                    continue
            else:
                line = raw
            if not line.strip():
                continue
            try:
                events.append(Event.model_validate_json(line))
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"]) or "line"
                msg = f"{source}:{n} is not an event ({where}: {first['msg']})"
                if strict:
                    raise HistoryFormatError(msg, n) from exc
                problems.append(msg)
        return cls(events, problems)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the events as JSONL, atomically (a temporary file, then a rename)."""
        target = Path(path)
        tmp = target.with_name(target.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(self.to_jsonl())
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)

    def to_jsonl(self) -> str:
        return "".join(e.model_dump_json() + "\n" for e in self._events)

    # -- views -----------------------------------------------------------------

    @property
    def events(self) -> tuple[Event, ...]:
        return self._events

    @property
    def problems(self) -> tuple[str, ...]:
        """Why this history may be incomplete (empty when it is well formed)."""
        return self._problems

    def __len__(self) -> int:
        return len(self._events)

    def __iter__(self) -> Iterator[Event]:
        return iter(self._events)

    def __repr__(self) -> str:
        return f"<History {len(self._events)} events, {len(self._problems)} problems>"

    def event(self, index: int) -> Event | None:
        """The event with this ``index`` (not position), or None."""
        return self._by_index.get(index)

    def by_f(self, f: EventF | str) -> tuple[Event, ...]:
        """Events about ``f``, in history order."""
        try:
            key = EventF(f)
        except ValueError:
            return ()
        return tuple(self._by_f.get(key, ()))

    def by_run(self, run_id: str) -> tuple[Event, ...]:
        """Events whose ``value.run_id`` is ``run_id``, in history order."""
        return tuple(self._by_run.get(run_id, ()))

    def run_ids(self) -> tuple[str, ...]:
        """Every run id the history mentions, in order of first mention."""
        return tuple(self._by_run)

    def declaration(self) -> Declaration | None:
        """The runtime's declaration (the first ``declaration`` event), or None."""
        found = self.by_f(EventF.DECLARATION)
        if not found:
            return None
        decl = Declaration.from_event(found[0])
        if any(e.value != found[0].value for e in found[1:]):
            extra = "the history holds several declarations that differ; the first is used"
            decl = replace(decl, problems=(*decl.problems, extra))
        return decl

    def submissions(self) -> dict[str, str]:
        """run id -> how its submission ended: ``ok``, ``fail``, ``info`` or
        ``invoke`` (no completion recorded). ``ok`` wins over anything else,
        then ``info``, then ``fail``: one success means the run exists."""
        rank = {"invoke": 0, "fail": 1, "info": 2, "ok": 3}
        out: dict[str, str] = {}
        for e in self.by_f(EventF.SUBMIT):
            run_id = e.value.get("run_id")
            if isinstance(run_id, str) and rank[e.type] >= rank.get(out.get(run_id, ""), -1):
                out[run_id] = e.type
        return out

    def submitted_ok(self) -> tuple[str, ...]:
        """Runs whose submission certainly happened."""
        return tuple(r for r, t in self.submissions().items() if t == "ok")

    def submitted_failed(self) -> tuple[str, ...]:
        """Runs whose submission certainly did not happen (only ``fail`` completions)."""
        return tuple(r for r, t in self.submissions().items() if t == "fail")

    def finals(self) -> dict[str, Event]:
        """run id -> its last ``final`` event."""
        out: dict[str, Event] = {}
        for e in self.by_f(EventF.FINAL):
            run_id = e.value.get("run_id")
            if isinstance(run_id, str):
                out[run_id] = e
        return out

    def tenant_of(self, run_id: str) -> str | None:
        """The tenant any event of the run names (submit, final, transition, effect)."""
        for e in self.by_run(run_id):
            tenant = e.value.get("tenant")
            if isinstance(tenant, str) and e.f is not EventF.MEMORY:
                return tenant
        return None

    def effects(self, *, applied: bool | None = None) -> tuple[Event, ...]:
        """``effect`` events; with ``applied=True`` only new side effects
        (``applied`` and ``side_effect`` both true; a missing ``side_effect``
        counts as true), with ``applied=False`` the others."""
        out = self.by_f(EventF.EFFECT)
        if applied is None:
            return out
        return tuple(e for e in out if _is_side_effect(e) == applied)

    def faults(self, kind: str | None = None) -> tuple[Event, ...]:
        """``fault`` events, optionally only those of ``kind``."""
        return tuple(
            e for e in self.by_f(EventF.FAULT) if kind is None or e.value.get("kind") == kind
        )
