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

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from pydantic import ValidationError

from .model import Event, EventF, EventType

__all__ = [
    "DELIVERY_MODES",
    "Declaration",
    "History",
    "HistoryClosedError",
    "HistoryError",
    "HistoryFormatError",
    "HistoryWriter",
]

#: Delivery promises a runtime may declare per effect kind.
DELIVERY_MODES: tuple[str, ...] = ("exactly_once", "at_least_once", "at_most_once")
_DEFAULT_DELIVERY = "exactly_once"


class HistoryError(Exception):
    """Root of every error this module raises on purpose."""


class HistoryFormatError(HistoryError, ValueError):
    """A line or a value cannot be an event; ``line`` is its 1-based line (0 if none)."""

    def __init__(self, message: str, line: int = 0) -> None:
        self.line = line
        super().__init__(message)


class HistoryClosedError(HistoryError, RuntimeError):
    """The writer was used after :meth:`HistoryWriter.close`."""


# -- the declaration -----------------------------------------------------------


@dataclass(frozen=True)
class Declaration:
    """What the runtime promised, read leniently from a ``declaration`` event.

    Fields that are missing take their documented defaults; fields of the wrong
    shape are dropped and described in ``problems`` (checkers that depend on
    them answer *unknown*).
    """

    index: int
    #: effect kind -> "exactly_once" | "at_least_once" | "at_most_once"
    delivery: Mapping[str, str] = field(default_factory=dict)
    #: raw status -> legal successors; None when the runtime has no table
    transitions: Mapping[str, frozenset[str]] | None = None
    #: effect kind -> approval action
    needs_approval: Mapping[str, str] = field(default_factory=dict)
    #: capability names; None when the declaration does not say
    capabilities: frozenset[str] | None = None
    adapter: str | None = None
    #: workflow -> the trust floor its runs read memory at: one number, or
    #: {namespace template -> number} (``WorkflowSpec.memory_floor``)
    memory_floors: Mapping[str, float | Mapping[str, float]] = field(default_factory=dict)
    #: workflow -> the longest its runs wait, in seconds (``WorkflowSpec.max_wait_seconds``)
    max_waits: Mapping[str, float] = field(default_factory=dict)
    problems: tuple[str, ...] = ()

    def delivery_for(self, kind: str) -> str:
        """The declared delivery of ``kind`` (``exactly_once`` when undeclared)."""
        return self.delivery.get(kind, _DEFAULT_DELIVERY)

    def memory_floor(
        self, workflow: str, run_input: Mapping[str, Any], namespace: str
    ) -> float | None:
        """The trust floor a run of ``workflow`` with ``run_input`` reads
        ``namespace`` at, or None when its workflow declares none there (a
        per-namespace floor is a template over the run's input, as
        ``MemoryTarget``: an input field it names but the input lacks is
        left as written)."""
        floor = self.memory_floors.get(workflow)
        if floor is None or isinstance(floor, float):
            return floor
        fields = _Fields(run_input)
        for template, at in floor.items():
            try:
                if template.format_map(fields) == namespace:
                    return at
            except (ValueError, LookupError, AttributeError):
                continue  # validated where it was declared; a hand-made history may differ
        return None

    def has_capability(self, name: str) -> bool:
        return self.capabilities is not None and name in self.capabilities

    @classmethod
    def from_event(cls, event: Event) -> Declaration:
        v, problems = event.value, []
        delivery: dict[str, str] = {}
        raw = v.get("delivery", {})
        if isinstance(raw, dict):
            for kind, mode in raw.items():
                if mode in DELIVERY_MODES:
                    delivery[str(kind)] = str(mode)
                else:
                    problems.append(
                        f"delivery of {kind!r} is {mode!r}, not one of {', '.join(DELIVERY_MODES)}"
                    )
        elif raw is not None:
            problems.append(f"delivery is {type(raw).__name__}, not an object")
        transitions: dict[str, frozenset[str]] | None = None
        raw = v.get("transitions")
        if isinstance(raw, dict):
            transitions = {}
            for src, dsts in raw.items():
                if isinstance(dsts, list) and all(isinstance(d, str) for d in dsts):
                    transitions[str(src)] = frozenset(dsts)
                else:
                    problems.append(f"transitions[{src!r}] is not a list of statuses")
        elif raw is not None:
            problems.append(f"transitions is {type(raw).__name__}, not an object or null")
        needs: dict[str, str] = {}
        raw = v.get("needs_approval", {})
        if isinstance(raw, dict):
            needs = {str(k): str(a) for k, a in raw.items()}
        elif isinstance(raw, list):  # a bare list of kinds: each kind is its own action
            needs = {str(k): str(k) for k in raw}
        elif raw is not None:
            problems.append(f"needs_approval is {type(raw).__name__}, not an object")
        capabilities: frozenset[str] | None = None
        raw = v.get("capabilities")
        if isinstance(raw, list):
            capabilities = frozenset(str(c) for c in raw)
        elif raw is not None:
            problems.append(f"capabilities is {type(raw).__name__}, not a list")
        adapter = v.get("adapter")
        floors: dict[str, float | Mapping[str, float]] = {}
        raw = v.get("memory_floors")
        if isinstance(raw, dict):
            for workflow, floor in raw.items():
                parsed = _floor(floor)
                if parsed is None:
                    problems.append(
                        f"memory_floors[{workflow!r}] is {floor!r}, not a trust from 0 to 1 "
                        "or a mapping of namespaces to one"
                    )
                else:
                    floors[str(workflow)] = parsed
        elif raw is not None:
            problems.append(f"memory_floors is {type(raw).__name__}, not an object")
        waits: dict[str, float] = {}
        raw = v.get("max_waits")
        if isinstance(raw, dict):
            for workflow, seconds in raw.items():
                ok = isinstance(seconds, int | float) and not isinstance(seconds, bool)
                if ok and math.isfinite(seconds) and seconds > 0:
                    waits[str(workflow)] = float(seconds)
                else:
                    problems.append(
                        f"max_waits[{workflow!r}] is {seconds!r}, not a positive number of seconds"
                    )
        elif raw is not None:
            problems.append(f"max_waits is {type(raw).__name__}, not an object")
        return cls(
            index=event.index,
            delivery=delivery,
            transitions=transitions,
            needs_approval=needs,
            capabilities=capabilities,
            adapter=adapter if isinstance(adapter, str) else None,
            memory_floors=floors,
            max_waits=waits,
            problems=tuple(problems),
        )


def _trust(x: Any) -> float | None:
    ok = isinstance(x, int | float) and not isinstance(x, bool) and 0.0 <= x <= 1.0
    return float(x) if ok else None


def _floor(x: Any) -> float | dict[str, float] | None:
    """A declared floor as recorded, or None if it is not one."""
    if not isinstance(x, dict):
        return _trust(x)
    out = {str(ns): _trust(at) for ns, at in x.items()}
    if not out or any(at is None for at in out.values()):
        return None
    return {ns: at for ns, at in out.items() if at is not None}


class _Fields(dict[str, Any]):
    """A run's input for ``str.format_map``: a missing field stays as written."""

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


# -- the history -----------------------------------------------------------------


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


# -- the writer -----------------------------------------------------------------


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
