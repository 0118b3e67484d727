"""What every checker shares: the signature, the findings collector, the guard.

A checker is a pure function ``(history, oracle) -> PropertyResult``. It
collects *findings* -- failures (with the events that prove them), unknowns
(with the reason and the events that explain it), counts and notes -- and
turns them into one verdict: any failure makes it ``fail``, else any unknown
makes it ``unknown``, else ``pass``. Each checker also says how much it had
to judge (``evidence``: effects, runs, transitions...); a ``pass`` with no
evidence held vacuously, and the search reports such a property as not
exercised rather than passed. The witness of a failure is the
evidence of the earliest one (the smallest proof); the message names every
violation (the first few in full).

:func:`guarded` wraps each checker so that it never raises: an exception is
a bug in the harness and becomes ``unknown`` with a request to file it; a
history with unreadable lines or lost indexes turns a ``pass`` into
``unknown``, because the hole may hide a violation (a ``fail`` stands: its
witness events are there). A checker that compares against the oracle
(``compares``) reads ``unknown`` when the oracle carries a
:data:`DISAGREEMENT` note: the workload's fault-free runs did not agree with
each other, so a difference from one of them proves nothing, and an
agreement with it is luck (see ``harness.session._oracle``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

from ..history import History
from ..model import Event, EventF, PropertyResult, RunState, Verdict

Checker = Callable[[History, History | None], PropertyResult]

#: how many violations a message spells out before "and N more"
_SHOWN = 3

#: the key of the note an oracle carries when its workload's fault-free runs
#: disagreed (the value: the first difference and how to fix it)
DISAGREEMENT = "oracle_disagreement"
#: the count a result judged against such an oracle carries: the search
#: verdict (``harness.outcome``) reads it as "could not be judged"
DISAGREED = "oracle_disagreed"


def oracle_disagreement(oracle: History | None) -> str | None:
    """Why ``oracle`` cannot be trusted: the :data:`DISAGREEMENT` notes it
    carries (one per workflow whose fault-free runs disagreed), joined; None
    when it carries none."""
    if oracle is None:
        return None
    found = [
        str(e.value[DISAGREEMENT])
        for e in oracle.by_f(EventF.NOTE)
        if isinstance(e.value.get(DISAGREEMENT), str)
    ]
    return "; ".join(dict.fromkeys(found)) or None


class Findings:
    """Mutable collector of one checker's evidence; :meth:`result` freezes it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.failures: list[tuple[str, tuple[int, ...]]] = []
        self.unknowns: list[tuple[str, tuple[int, ...]]] = []
        self.notes: list[str] = []
        self.counts: dict[str, int] = {}

    def fail(self, message: str, witness: Iterable[int]) -> None:
        self.failures.append((message, tuple(sorted(set(witness)))))

    def unknown(self, message: str, witness: Iterable[int] = ()) -> None:
        self.unknowns.append((message, tuple(sorted(set(witness)))))

    def note(self, message: str) -> None:
        self.notes.append(message)

    def count(self, key: str, n: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + n

    def zero(self, *keys: str) -> None:
        """Make sure ``keys`` are reported, even when nothing was counted."""
        for key in keys:
            self.counts.setdefault(key, 0)

    def result(self, pass_message: str, *, evidence: int = 0) -> PropertyResult:
        """The verdict; ``evidence`` is how many things were judged (0: the
        history gave this property nothing to judge, and ``pass_message``
        says why)."""
        notes = "".join(f" {_sentence(n)}" for n in self.notes)
        if self.failures:
            ordered = sorted(self.failures, key=lambda f: f[1] or (1 << 62,))
            head = plural(len(ordered), "violation")
            message = _summary(head, [m for m, _ in ordered])
            return PropertyResult(
                name=self.name,
                verdict=Verdict.FAIL,
                message=message + notes,
                witness=ordered[0][1],
                counts=dict(sorted(self.counts.items())),
                evidence=max(evidence, 1),
            )
        if self.unknowns:
            head = plural(len(self.unknowns), "reason") + " it cannot be judged"
            message = _summary(head, [m for m, _ in self.unknowns])
            witness = sorted({i for _, w in self.unknowns for i in w})
            return PropertyResult(
                name=self.name,
                verdict=Verdict.UNKNOWN,
                message=message + notes,
                witness=tuple(witness),
                counts=dict(sorted(self.counts.items())),
                evidence=evidence,
            )
        return PropertyResult(
            name=self.name,
            verdict=Verdict.PASS,
            message=_sentence(pass_message) + notes,
            counts=dict(sorted(self.counts.items())),
            evidence=evidence,
        )


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else text + "."


def _summary(head: str, messages: list[str]) -> str:
    n = len(messages)
    shown = "; ".join(m.rstrip(".") for m in messages[:_SHOWN])
    more = f"; and {n - _SHOWN} more" if n > _SHOWN else ""
    return f"{head}: {shown}{more}."


def guarded(
    name: str, *, uses_oracle: bool = False, compares: bool = False
) -> Callable[[Checker], Checker]:
    """Make a checker total: exceptions and odd histories become ``unknown``.
    ``compares``: its verdict is a comparison with the oracle, so an oracle
    whose fault-free runs disagreed makes it ``unknown`` (see
    :func:`untrusted`)."""

    def wrap(fn: Checker) -> Checker:
        @functools.wraps(fn)
        def checker(history: History, oracle: History | None) -> PropertyResult:
            try:
                result = fn(history, oracle)
            except Exception as exc:  # a checker must never take the report down
                return PropertyResult(
                    name=name,
                    verdict=Verdict.UNKNOWN,
                    message=(
                        f"the {name} checker crashed on this history "
                        f"({type(exc).__name__}: {exc}); this is a bug in the harness, "
                        "please file it with the history attached."
                    ),
                )
            if compares:
                result = untrusted(result, oracle)
            holes = [*history.problems]
            if (uses_oracle or compares) and oracle is not None:
                holes += [f"oracle: {p}" for p in oracle.problems]
            if holes and result.verdict is Verdict.PASS:
                shown = "; ".join(holes[:_SHOWN]) + (
                    f"; and {len(holes) - _SHOWN} more" if len(holes) > _SHOWN else ""
                )
                return result.model_copy(
                    update={
                        "verdict": Verdict.UNKNOWN,
                        "message": (
                            f"{result.message} But the history is incomplete or malformed "
                            f"({shown}), so a violation may be hidden."
                        ),
                    }
                )
            return result

        return checker

    return wrap


def untrusted(result: PropertyResult, oracle: History | None) -> PropertyResult:
    """``result`` as ``unknown`` when it was judged against an ``oracle``
    whose fault-free runs disagreed (:func:`oracle_disagreement`), counted
    as :data:`DISAGREED`; what it would have said is kept in the message.
    A result that judged nothing (a pass without evidence) stays as it is:
    it compared nothing."""
    why = oracle_disagreement(oracle)
    if why is None or (result.verdict is Verdict.PASS and result.evidence == 0):
        return result
    message = (
        "Not judged: it compares with the fault-free run of the same workload, and the "
        f"fault-free runs disagree with each other: {why.rstrip('.')}."
    )
    if result.verdict is Verdict.FAIL:
        message += f" (Against the first of them it would fail: {result.message.rstrip('.')}.)"
    return result.model_copy(
        update={
            "verdict": Verdict.UNKNOWN,
            "message": message,
            "counts": {**result.counts, DISAGREED: 1},
        }
    )


# -- reading values leniently ----------------------------------------------------


def vstr(e: Event, key: str) -> str | None:
    x = e.value.get(key)
    return x if isinstance(x, str) else None


def vint(e: Event, key: str) -> int | None:
    x = e.value.get(key)
    return x if isinstance(x, int) and not isinstance(x, bool) else None


def vnum(e: Event, key: str) -> float | None:
    x = e.value.get(key)
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else None


def vstrs(e: Event, key: str) -> list[str] | None:
    x = e.value.get(key)
    if isinstance(x, list) and all(isinstance(i, str) for i in x):
        return list(x)
    return None


def final_state(e: Event) -> RunState | None:
    """The normalized state of a ``final`` event (None if it is not one)."""
    state = e.value.get("state")
    try:
        return RunState(state) if isinstance(state, str) else None
    except ValueError:
        return None


def short(value: Any, limit: int = 80) -> str:
    """``repr`` cut to ``limit`` characters, for messages."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def every(n: int, noun: str) -> str:
    """``All 3 runs`` at the head of a sentence, but ``1 run`` and
    ``0 runs`` (never "All 0 applied effects")."""
    return f"All {plural(n, noun)}" if n > 1 else plural(n, noun)
