"""What the approver genuinely said: the decisions the runner delivered.

The runner records every decision message it hands to the runtime as a
``deliver`` invoke event naming its ``variant`` and the ``decision`` it
carries. Only a ``valid`` message (or the same message delivered again) is
the approver speaking; a ``forged``, ``wrong_role`` (or ``wrong_role_above``:
a wrong role on each side of the expected one), ``wrong_params`` or
``cross_tenant`` message may carry any decision, even the opposite of the
approver's, and so may a ``misdirected`` one (genuinely signed, but for
another approval than the one the run waits on: not this run's approver).
Who a message speaks for is the harness's record too: a
decision signed for one tenant (the ``tenant`` the deliver event names, the
tenant whose key the world's authority signed it with) is never the
approver of another tenant's run (``run_tenant``, from the scenario), even
when its signature is genuine. This module reads those events into
:class:`Decisions`, which the approval checker compares with what the
runtime recorded. Events and webhooks delivered the same way (a
``cross_tenant`` event) decide no approval and are left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..history import History
from ..model import EventF
from ._base import vstr

#: Variants of a message the approver did not genuinely send as it reads.
REFUSED = frozenset(
    {"forged", "wrong_role", "wrong_role_above", "wrong_params", "cross_tenant", "misdirected"}
)


@dataclass(frozen=True)
class Delivered:
    """One decision message as the runner delivered it."""

    index: int
    run_id: str
    message_id: str | None
    approval_id: str | None
    #: valid | forged | wrong_role | wrong_role_above | wrong_params |
    #: cross_tenant | misdirected | duplicate | changed_mind
    variant: str
    #: approved | rejected
    decision: str
    #: the approver said it: valid, or a repeat of a valid message
    genuine: bool


@dataclass
class Decisions:
    """Every decision delivered in a history, by run."""

    by_run: dict[str, list[Delivered]] = field(default_factory=dict)
    #: deliver invoke events that lack a variant or a decision (older histories)
    unreadable: dict[str, list[int]] = field(default_factory=dict)

    def delivered_to(self, run_id: str) -> bool:
        return run_id in self.by_run or run_id in self.unreadable

    def genuine_approvals(
        self, run_id: str, approval_id: str | None, before: int | None = None
    ) -> list[Delivered]:
        """Genuine ``approved`` decisions delivered for ``run_id`` (and for
        ``approval_id`` when both it and the delivery name one), only those
        recorded before history index ``before`` when given."""
        return [
            d
            for d in self.by_run.get(run_id, [])
            if d.genuine
            and d.decision == "approved"
            and (approval_id is None or d.approval_id is None or d.approval_id == approval_id)
            and (before is None or d.index < before)
        ]

    def refused_approvals(self, run_id: str, approval_id: str | None) -> list[Delivered]:
        """Non-genuine messages that said ``approved`` for ``run_id``."""
        return [
            d
            for d in self.by_run.get(run_id, [])
            if not d.genuine
            and d.decision == "approved"
            and (approval_id is None or d.approval_id is None or d.approval_id == approval_id)
        ]

    def genuine_decisions(self, run_id: str) -> list[str]:
        return sorted({d.decision for d in self.by_run.get(run_id, []) if d.genuine})


def delivered_decisions(history: History) -> Decisions:
    """The decisions the runner delivered, each marked genuine or not.

    A ``duplicate`` delivery repeats an earlier message (same message id): it
    is genuine exactly when that message was ``valid``.
    """
    out = Decisions()
    valid_ids: set[str] = set()
    for e in history.by_f(EventF.DELIVER):
        if e.type != "invoke":
            continue
        run_id = vstr(e, "run_id")
        if run_id is None:
            continue
        variant, decision = vstr(e, "variant"), vstr(e, "decision")
        message_id = vstr(e, "message_id")
        if vstr(e, "kind") in ("event", "webhook"):
            continue
        if variant is None or decision not in ("approved", "rejected"):
            out.unreadable.setdefault(run_id, []).append(e.index)
            continue
        # Signed for another tenant than the run's: never its approver.
        tenant, run_tenant = vstr(e, "tenant"), vstr(e, "run_tenant")
        own = tenant is None or run_tenant is None or tenant == run_tenant
        if variant == "valid" and message_id is not None and own:
            valid_ids.add(message_id)
        # A changed mind is the approver's too (its first decision counts:
        # resume_equivalence holds the run to it).
        genuine = own and (
            variant in ("valid", "changed_mind")
            or (variant == "duplicate" and message_id in valid_ids)
        )
        out.by_run.setdefault(run_id, []).append(
            Delivered(
                index=e.index,
                run_id=run_id,
                message_id=message_id,
                approval_id=vstr(e, "approval_id"),
                variant=variant,
                decision=str(decision),
                genuine=genuine,
            )
        )
    return out
