"""Properties as records, and the user's own invariants.

A :class:`Property` is one record: its ``name``, its ``check``, what it
``needs`` (capabilities the adapter must declare), the fault ``family`` that
exercises it (if one does), and its ``doc``. The ten built-in properties are
such records (their ``check`` is a checker, ``(history, oracle) ->
PropertyResult``), and so is every invariant a user writes::

    import harness

    @harness.invariant
    def refunds_never_exceed_the_order_total(view: harness.ScenarioView):
        \"\"\"The refunds of an order never add up to more than its total.\"\"\"
        ...
        return harness.violated("order o-1: refunded 1200 of 1000", *events)
        ...
        return harness.held(len(orders))   # how many orders it judged

A user's ``check`` receives a :class:`ScenarioView`, a read-only view of one
scenario's history: the runs (each with its input, its final state, output
and ledger, its durable state where the adapter offers it) and the world's
ledger of the effects it applied. It returns :func:`held` (with how many
things it judged: ``held(0, why)`` held vacuously, and a search reports a
property that only ever held vacuously as not exercised), :func:`violated`
(with the witness events), or ``True``/``False``. An exception, or any other
return value, is a bug in the invariant, not a finding: the scenario's
verdict is ``unknown`` and the traceback is kept in the report. Like the
built-in checkers, an invariant is a pure function of what was recorded:
``harness replay`` re-checks it on the kept counterexample.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, overload

from ..history import History
from ..model import Event, EventF, PropertyResult, RunState, Verdict
from ._base import untrusted

#: where a property's message ends and the invariant's traceback begins
TRACEBACK_MARK = "\nTraceback (most recent call last):\n"

#: what a property's name may be: it names a JUnit test case, a pytest test
#: and a report line
_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")

#: the longest traceback kept in a message (the end is kept: the raise)
_TRACEBACK_CHARS = 4000


def split_traceback(text: str) -> tuple[str, str | None]:
    """``text`` without the traceback an invariant's ``unknown`` carries,
    and that traceback (None: none)."""
    head, mark, tail = text.partition(TRACEBACK_MARK)
    if not mark:
        return text, None
    return head, mark.lstrip("\n") + tail


# -- what an invariant returns ----------------------------------------------------


@dataclass(frozen=True)
class Held:
    """The invariant held on this scenario, judging ``evidence`` things
    (0: there was nothing to judge, and ``message`` says why)."""

    evidence: int = 1
    message: str = ""


@dataclass(frozen=True)
class Violated:
    """The invariant was violated; ``witness``: the indexes of the history
    events that prove it."""

    message: str
    witness: tuple[int, ...] = ()


def held(evidence: int = 1, message: str = "") -> Held:
    """The invariant held, having judged ``evidence`` things in this
    scenario (orders, runs, tickets...). ``held(0, "no order was refunded")``
    held vacuously: it does not count as exercised."""
    if isinstance(evidence, bool) or not isinstance(evidence, int) or evidence < 0:
        raise TypeError(f"held(evidence) takes a count >= 0, got {evidence!r}")
    return Held(evidence, message)


def violated(message: str, *witness: Event | int | Iterable[Event | int]) -> Violated:
    """The invariant was violated: ``message`` says how, ``witness`` gives
    the events (or their indexes, or iterables of either) that prove it."""
    if not isinstance(message, str) or not message.strip():
        raise TypeError("violated(message, *witness) needs a message saying what was violated")
    found: set[int] = set()
    for w in witness:
        for item in (w,) if isinstance(w, Event | int) else w:
            if isinstance(item, Event):
                found.add(item.index)
            elif isinstance(item, int) and not isinstance(item, bool):
                found.add(item)
            else:
                raise TypeError(f"a witness is an Event or an event index, got {item!r}")
    return Violated(message, tuple(sorted(found)))


# -- the read-only view of one scenario ---------------------------------------------


@dataclass(frozen=True)
class Effect:
    """One request the world applied (a new effect, not a duplicate it
    absorbed): the world's ledger, as the history recorded it."""

    index: int
    kind: str
    run_id: str | None
    tenant: str | None
    request: Mapping[str, Any]
    outcome: Any
    external_ref: str | None
    idempotency_key: str | None
    business_key: str | None
    event: Event


@dataclass(frozen=True)
class Run:
    """One submitted run: its workload, and how it ended.

    ``state`` is None when the run has no ``final`` event (the scenario
    ended before it was observed); ``operations`` is the runtime's ledger of
    the run (None without the ``operations`` capability); ``durable`` its
    durable state snapshot (None without ``durable_state``)."""

    run_id: str
    tenant: str | None
    workflow: str | None
    input: Mapping[str, Any]
    state: RunState | None
    output: Any
    error: str | None
    raw_status: str | None
    operations: tuple[Mapping[str, Any], ...] | None
    durable: Any
    #: the ``submit`` invoke, the ``final`` and ``state`` events (witnesses)
    submitted: Event | None
    final: Event | None
    state_event: Event | None


def _frozen(value: Any) -> Any:
    """``value`` as a read-only structure (dicts as mapping proxies, lists
    as tuples): an invariant cannot change what the next one reads."""
    if isinstance(value, dict):
        return MappingProxyType({k: _frozen(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


class ScenarioView:
    """A read-only view of one scenario, for an invariant.

    - :attr:`runs`: every submitted run by id (:class:`Run`), in order;
    - :attr:`effects`: the world's ledger of applied effects, in order
      (:class:`Effect`); :meth:`effects_of` filters it;
    - :attr:`capabilities`: what the adapter declared;
    - :attr:`history`: every event (``harness.History``), and
      :attr:`oracle`, the fault-free run of the same workload (None when
      there is none), for what the records above leave out. An invariant
      that reads :attr:`oracle` compares with it: where the workload's
      fault-free runs disagreed with each other, its verdict is
      ``unknown``, as the built-in comparing properties' are.

    Every value is read-only (mappings are proxies, lists tuples).
    """

    def __init__(self, history: History, oracle: History | None = None) -> None:
        self.history = history
        self._oracle = oracle
        #: whether the invariant read :attr:`oracle` (see the class docstring)
        self.read_oracle = False
        decl = history.declaration()
        caps = decl.capabilities if decl is not None else None
        self.capabilities: frozenset[str] = frozenset(caps or ())
        self.effects: tuple[Effect, ...] = tuple(
            Effect(
                index=e.index,
                kind=_str(e.value.get("kind")) or "",
                run_id=_str(e.value.get("run_id")),
                tenant=_str(e.value.get("tenant")),
                request=_frozen(e.value.get("request") or {}),
                outcome=_frozen(e.value.get("outcome")),
                external_ref=_str(e.value.get("external_ref")),
                idempotency_key=_str(e.value.get("idempotency_key")),
                business_key=_str(e.value.get("business_key")),
                event=e,
            )
            for e in history.effects(applied=True)
        )
        self.runs: Mapping[str, Run] = MappingProxyType(_runs(history))

    @property
    def oracle(self) -> History | None:
        """The fault-free run of the same workload (None when there is none)."""
        self.read_oracle = True
        return self._oracle

    def effects_of(self, kind: str | None = None, *, run_id: str | None = None) -> list[Effect]:
        """The applied effects of ``kind`` (``service.action``) and/or of
        run ``run_id``, in order."""
        return [
            e
            for e in self.effects
            if (kind is None or e.kind == kind) and (run_id is None or e.run_id == run_id)
        ]

    def __repr__(self) -> str:
        return f"ScenarioView({len(self.runs)} runs, {len(self.effects)} applied effects)"


def _runs(history: History) -> dict[str, Run]:
    submitted: dict[str, Event] = {}
    for e in history.by_f(EventF.SUBMIT):
        run_id = _str(e.value.get("run_id"))
        if e.type == "invoke" and run_id is not None:
            submitted.setdefault(run_id, e)
    finals = history.finals()
    states = {
        run_id: e
        for e in history.by_f(EventF.STATE)
        if (run_id := _str(e.value.get("run_id"))) is not None
    }
    out: dict[str, Run] = {}
    for run_id in [*submitted, *(r for r in finals if r not in submitted)]:
        sub, fin, st = submitted.get(run_id), finals.get(run_id), states.get(run_id)
        v = fin.value if fin is not None else {}
        try:
            state = RunState(v["state"]) if isinstance(v.get("state"), str) else None
        except ValueError:
            state = None
        ops = v.get("operations")
        out[run_id] = Run(
            run_id=run_id,
            tenant=_str((sub.value if sub else v).get("tenant")),
            workflow=_str(sub.value.get("workflow")) if sub else None,
            input=_frozen(sub.value.get("input") or {}) if sub else MappingProxyType({}),
            state=state,
            output=_frozen(v.get("output")),
            error=_str(v.get("error")),
            raw_status=_str(v.get("raw_status")),
            operations=tuple(_frozen(o) for o in ops) if isinstance(ops, list) else None,
            durable=_frozen(st.value.get("state")) if st is not None else None,
            submitted=sub,
            final=fin,
            state_event=st,
        )
    return out


# -- the record --------------------------------------------------------------------


@dataclass(frozen=True)
class Property:
    """One property: a built-in checker or a user's invariant.

    ``check``: for a built-in (``builtin=True``), a checker ``(history,
    oracle) -> PropertyResult``; for an invariant, a function of a
    :class:`ScenarioView` (see the module). ``needs``: capability names
    (``harness list`` shows them; ``"operations"``, ``"durable_state"``...)
    without which it has nothing to judge: an adapter that does not declare
    one gets ``not_tested`` with the reason. ``family``: the fault family
    that exercises it (its verdict is ``not_tested`` when the run switched
    the family off). ``spec``: where it is imported from
    (``package.module:attr``), so that a replay command, and the jobs of
    ``--jobs N``, can load it again (None: it cannot be).
    """

    name: str
    check: Callable[..., Any]
    needs: tuple[str, ...] = ()
    family: str | None = None
    doc: str = ""
    spec: str | None = None
    builtin: bool = False
    #: what the record was made from, for messages (``@invariant`` sets it)
    origin: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise TypeError(
                f"a property's name is lower_snake_case, at most 64 characters (it names a "
                f"test case and a report line); got {self.name!r}"
            )
        if not callable(self.check):
            raise TypeError(f"property {self.name}: check must be callable, got {self.check!r}")
        needs = (self.needs,) if isinstance(self.needs, str) else tuple(self.needs)
        if not all(isinstance(n, str) for n in needs):
            raise TypeError(f"property {self.name}: needs is capability names, got {needs!r}")
        object.__setattr__(self, "needs", needs)

    def __call__(self, view: ScenarioView) -> Any:
        """Its own answer on ``view`` (for an invariant's unit tests): what
        the invariant returns; a built-in's ``PropertyResult``."""
        if self.builtin:
            return self.check(view.history, view.oracle)
        return self.check(view)

    @property
    def summary(self) -> str:
        """The first line of :attr:`doc`."""
        return (self.doc.strip().splitlines() or [""])[0]

    def judge(self, history: History, oracle: History | None) -> PropertyResult:
        """This property's verdict on one scenario. Never raises for what
        the check does: an invariant that raises, or returns something else
        than held / violated / a bool, is ``unknown`` with the traceback."""
        if self.builtin:
            result: PropertyResult = self.check(history, oracle)
            return result
        return _judge_invariant(self, history, oracle)


def _judge_invariant(p: Property, history: History, oracle: History | None) -> PropertyResult:
    view = ScenarioView(history, oracle)
    result = _judged(p, view)
    return untrusted(result, oracle) if view.read_oracle else result


def _judged(p: Property, view: ScenarioView) -> PropertyResult:
    history = view.history
    missing = [n for n in p.needs if n not in view.capabilities]
    if missing:
        return PropertyResult(
            name=p.name,
            verdict=Verdict.PASS,
            message=f"It needs the {', '.join(missing)} capability, which the adapter does "
            "not declare: nothing to judge.",
            counts={"idle": 1},
        )
    try:
        answer = p.check(view)
    except Exception as exc:  # the invariant's bug, not a finding: never a crash
        return _raised(p, exc)
    if answer is True:
        answer = Held()
    elif answer is False:
        answer = Violated(f"{p.name} returned False")
    if isinstance(answer, Violated):
        bad = [i for i in answer.witness if history.event(i) is None]
        witness = tuple(i for i in answer.witness if i not in bad)
        note = f" (witness indexes {bad} are not in the history)" if bad else ""
        return PropertyResult(
            name=p.name,
            verdict=Verdict.FAIL,
            message=answer.message.strip() + note,
            witness=witness,
            counts={"violated": 1},
            evidence=1,
        )
    if not isinstance(answer, Held):
        return PropertyResult(
            name=p.name,
            verdict=Verdict.UNKNOWN,
            message=f"the invariant {p.name} returned {answer!r}, not harness.held(...), "
            "harness.violated(...) or a bool: return one of those (a bug in the invariant, "
            "not a finding).",
            counts={"unknown": 1},
        )
    if answer.evidence == 0:
        message = answer.message or f"{p.name} had nothing to judge in this scenario"
    else:
        message = answer.message or f"{p.name} held ({answer.evidence} judged)"
    if history.problems:
        shown = "; ".join(history.problems[:3])
        return PropertyResult(
            name=p.name,
            verdict=Verdict.UNKNOWN,
            message=f"{message.rstrip('.')}. But the history is incomplete or malformed "
            f"({shown}), so a violation may be hidden.",
            counts={"unknown": 1},
            evidence=answer.evidence,
        )
    return PropertyResult(
        name=p.name,
        verdict=Verdict.PASS,
        message=message if message.endswith(".") else message + ".",
        counts={"held": 1} if answer.evidence else {"idle": 1},
        evidence=answer.evidence,
    )


def _raised(p: Property, exc: Exception) -> PropertyResult:
    frames = traceback.extract_tb(exc.__traceback__)
    at = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    tb = "".join(traceback.format_exception(exc)).strip()
    if len(tb) > _TRACEBACK_CHARS:
        tb = "...\n" + tb[-_TRACEBACK_CHARS:]
    head = tb.removeprefix(TRACEBACK_MARK.strip("\n")).lstrip("\n")
    return PropertyResult(
        name=p.name,
        verdict=Verdict.UNKNOWN,
        message=f"the invariant {p.name} raised {type(exc).__name__}: {exc}{at} (a bug in "
        f"the invariant, not a finding: fix it and replay){TRACEBACK_MARK}{head}",
        counts={"unknown": 1},
    )


# -- the decorator -----------------------------------------------------------------


@overload
def invariant(fn: Callable[[ScenarioView], Any], /) -> Property: ...


@overload
def invariant(
    *,
    name: str | None = None,
    needs: str | Iterable[str] = (),
    family: str | None = None,
    doc: str | None = None,
) -> Callable[[Callable[[ScenarioView], Any]], Property]: ...


def invariant(
    fn: Callable[[ScenarioView], Any] | None = None,
    /,
    *,
    name: str | None = None,
    needs: str | Iterable[str] = (),
    family: str | None = None,
    doc: str | None = None,
) -> Property | Callable[[Callable[[ScenarioView], Any]], Property]:
    """Make ``fn`` (a function of a :class:`ScenarioView`) a :class:`Property`.

    Bare (``@harness.invariant``) or with arguments
    (``@harness.invariant(needs="operations")``). The name is the
    function's, the doc its docstring, unless given. The result is the
    property record: pass it to ``harness.run(..., properties=[...])``,
    ``resilience_suite(..., properties=[...])``, an adapter's
    ``properties()``, or name it on the command line (``--property
    module:attr``); calling it runs ``fn``.
    """

    def make(f: Callable[[ScenarioView], Any]) -> Property:
        if not callable(f):
            raise TypeError(f"@invariant decorates a function of a ScenarioView, got {f!r}")
        module = getattr(f, "__module__", None)
        qual = getattr(f, "__qualname__", "")
        spec = None
        if module and module != "__main__" and qual and "<" not in qual:
            spec = f"{module}:{qual}"
        return Property(
            name=name or str(getattr(f, "__name__", "")),
            check=f,
            needs=(needs,) if isinstance(needs, str) else tuple(needs),
            family=family,
            doc=doc if doc is not None else (f.__doc__ or "").strip(),
            spec=spec,
            origin=spec or repr(f),
        )

    if fn is not None:
        return make(fn)
    return make
