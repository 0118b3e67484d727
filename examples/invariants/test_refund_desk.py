"""Your own invariant, in your own test file: nothing in the harness changes.

The refund desk (``refund_desk.py``) must never refund an order more than
its total. No built-in property knows what an order is; this invariant
does. ``resilience_suite`` gives it a test of its own beside the built-in
ones::

    PYTHONPATH=. pytest examples/invariants/test_refund_desk.py

or, from the command line::

    PYTHONPATH=. harness run --adapter examples.invariants.refund_desk:RefundDesk \\
        --property examples.invariants.test_refund_desk:refunds_never_exceed_the_order_total
"""

from __future__ import annotations

from collections import defaultdict

import harness
from harness.testing import resilience_suite


@harness.invariant
def refunds_never_exceed_the_order_total(view: harness.ScenarioView) -> object:
    """The refunds of an order never add up to more than its total."""
    orders: dict[tuple[str, str], list[int]] = defaultdict(list)  # effect indexes
    totals: dict[tuple[str, str], int] = {}
    amounts: dict[int, int] = {}
    for effect in view.effects_of("payments.refund"):
        run = view.runs.get(effect.run_id or "")
        if run is None:
            continue
        key = (run.tenant or "", str(run.input["order"]))
        totals[key] = int(run.input["total_cents"])
        orders[key].append(effect.index)
        amounts[effect.index] = int(effect.request["amount_cents"])
    for (tenant, order), refunds in orders.items():
        refunded = sum(amounts[i] for i in refunds)
        if refunded > totals[(tenant, order)]:
            return harness.violated(
                f"order {order} of {tenant}: refunded {refunded} cents in {len(refunds)} "
                f"refunds, more than its total of {totals[(tenant, order)]}",
                refunds,
            )
    if not orders:
        return harness.held(0, "no order was refunded")
    return harness.held(len(orders), f"{len(orders)} refunded orders within their totals")


TestRefundDesk = resilience_suite(
    "examples.invariants.refund_desk:RefundDesk",
    properties=[refunds_never_exceed_the_order_total],
)
