"""Adapters whose declarations contradict what their runtime does (the toy of
docs/adapters.md, misdeclared): the probe before a search must refuse them."""

from __future__ import annotations

from pathlib import Path

from examples.minimal_adapter.adapter import ToyAdapter, ToyEnvironment
from harness.adapters import Observation, WorkflowSpec
from harness.model import RunState

CHARGE = {"customer_id": "c-1", "amount_cents": 500}


class DeclaresRefund(ToyAdapter):
    """Declares ``payments.refund``; the toy calls ``payments.charge``."""

    def workflows(self) -> list[WorkflowSpec]:
        return [WorkflowSpec(name="charge", inputs=(CHARGE,), effects=("payments.refund",))]


class DeclaresNothing(ToyAdapter):
    """Declares no effect at all; the toy charges."""

    def workflows(self) -> list[WorkflowSpec]:
        return [WorkflowSpec(name="charge", inputs=(CHARGE,))]


class DeclaresMore(ToyAdapter):
    """Declares ``payments.refund`` besides the ``payments.charge`` the toy
    makes: its runs complete without the refund (the runtime skipped it, or
    the declaration is wrong: a run cannot tell)."""

    def workflows(self) -> list[WorkflowSpec]:
        return [
            WorkflowSpec(
                name="charge", inputs=(CHARGE,), effects=("payments.charge", "payments.refund")
            )
        ]


class _Stalling(ToyEnvironment):
    """Every run reads as ``pending`` forever (a worker polling the wrong
    queue, say)."""

    def observe(self) -> Observation:
        obs = super().observe()
        runs = tuple(r.model_copy(update={"state": RunState.PENDING}) for r in obs.runs)
        return obs.model_copy(update={"runs": runs})


class NeverFinishes(ToyAdapter):
    """Its runs never leave ``pending``."""

    def open(self, workdir: Path, *, seed: int) -> ToyEnvironment:
        return _Stalling(workdir, self.keyed)


__all__ = ["DeclaresMore", "DeclaresNothing", "DeclaresRefund", "NeverFinishes"]
