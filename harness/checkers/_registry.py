"""The registry of properties and the one call that runs the built-in ones.

Every built-in property is a :class:`~harness.checkers._property.Property`
record in :data:`BUILTIN`: its checker, the capability it needs and the
fault family that exercises it (the verdict rules in ``harness.outcome``
read them from here). A user's invariants are records of the same type; the
engine judges them after these, by the same rules.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..history import History
from ..model import PropertyResult, Verdict
from ._accounted import check_effects_accounted
from ._approvals import check_approval_integrity
from ._base import Checker
from ._context import check_context_rebuild
from ._exactly_once import check_exactly_once_effects
from ._memory import check_memory_safety
from ._migration import check_migration_safety
from ._progress import check_progress
from ._property import Property
from ._resume import check_resume_equivalence
from ._state import check_state_equivalence
from ._transitions import check_legal_transitions


def _builtin(checker: Checker, needs: str | None = None, family: str | None = None) -> Property:
    name = checker.__name__.removeprefix("check_")
    return Property(
        name=name,
        check=checker,
        needs=() if needs is None else (needs,),
        family=family,
        doc=(checker.__doc__ or "").strip(),
        builtin=True,
        origin="built in",
    )


#: Every built-in property, by name, in report order, with the capability
#: without which it has nothing to judge and the fault family (the kind it
#: arms) that exercises it.
BUILTIN: dict[str, Property] = {
    p.name: p
    for p in (
        _builtin(check_exactly_once_effects),
        _builtin(check_resume_equivalence),
        _builtin(check_progress),
        _builtin(check_legal_transitions),
        _builtin(check_approval_integrity, needs="approvals"),
        _builtin(check_memory_safety, needs="memory_injection", family="memory"),
        _builtin(check_migration_safety, needs="version_switch", family="migration"),
        _builtin(check_context_rebuild, needs="context"),
        _builtin(check_state_equivalence, needs="durable_state"),
        _builtin(check_effects_accounted, needs="operations"),
    )
}

#: Every built-in checker, by name, in report order.
CHECKERS: dict[str, Checker] = {name: p.check for name, p in BUILTIN.items()}


def check_all(
    history: History, oracle: History | None, only: Iterable[str] | None = None
) -> list[PropertyResult]:
    """Run the checkers (all, or those named in ``only``) in registry order.

    Never raises for an odd history (each checker answers ``unknown``);
    raises :class:`ValueError` for a name in ``only`` that is not a checker,
    because that is a mistake in the caller, not a finding.
    """
    names = list(CHECKERS)
    if only is not None:
        wanted = set(only)
        unknown = sorted(wanted - set(CHECKERS))
        if unknown:
            raise ValueError(
                f"no checker named {', '.join(map(repr, unknown))}; "
                f"choose among {', '.join(CHECKERS)}"
            )
        names = [n for n in names if n in wanted]
    return [CHECKERS[n](history, oracle) for n in names]


def check_properties(
    history: History, oracle: History | None, properties: Iterable[Property] = ()
) -> list[PropertyResult]:
    """Every built-in property, then each of ``properties`` (a user's
    invariants), in that order. Never raises for what a property does."""
    return [*check_all(history, oracle), *(p.judge(history, oracle) for p in properties)]


def merge_verdicts(verdicts: Iterable[Verdict]) -> Verdict:
    """The overall verdict, by Jepsen's priority pass < unknown < fail
    (``pass`` for no verdicts at all)."""
    out = Verdict.PASS
    for v in verdicts:
        out = out.merge(v)
    return out
