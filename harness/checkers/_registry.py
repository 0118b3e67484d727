"""The registry of checkers and the one call that runs them."""

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
from ._resume import check_resume_equivalence
from ._state import check_state_equivalence
from ._transitions import check_legal_transitions

#: Every property, by name, in report order.
CHECKERS: dict[str, Checker] = {
    "exactly_once_effects": check_exactly_once_effects,
    "resume_equivalence": check_resume_equivalence,
    "progress": check_progress,
    "legal_transitions": check_legal_transitions,
    "approval_integrity": check_approval_integrity,
    "memory_safety": check_memory_safety,
    "migration_safety": check_migration_safety,
    "context_rebuild": check_context_rebuild,
    "state_equivalence": check_state_equivalence,
    "effects_accounted": check_effects_accounted,
}


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


def merge_verdicts(verdicts: Iterable[Verdict]) -> Verdict:
    """The overall verdict, by Jepsen's priority pass < unknown < fail
    (``pass`` for no verdicts at all)."""
    out = Verdict.PASS
    for v in verdicts:
        out = out.merge(v)
    return out
