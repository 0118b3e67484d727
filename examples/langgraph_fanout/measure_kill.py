"""What a kill at each effect of the fan-out does to ``naive.py``, counted per line.

    PYTHONPATH=. python -m examples.langgraph_fanout.measure_kill --runs 10 \\
        --checkpointer sqlite --durability async --durability sync

One run of order ``o-1`` (lines mug, tea, pot: three parallel ``Send``
branches, then ``total``). A worker is SIGKILLed right after the world
applied one call -- the first refund (the other branches may not have called
yet), the third refund (the two other branches had called by then), or the
notification in ``total`` (every branch had finished) -- and workers then run
until nothing moves. Prints, per kill point, how many refunds of each line the
world applied, as a count of patterns (``mug=1 pot=2 tea=1: 10`` means the
killed branch ran again and its siblings did not, ten times in ten). A line
refunded twice although its refund had been applied before the kill is a
branch LangGraph ran again: its writes were not saved, or not used.
"""

from __future__ import annotations

from collections import Counter

from examples._measure import kill_after, main
from harness.history import History
from harness.model import EventF, RunSpec

from ._fanout import REFUND_ORDER

APP = "examples.langgraph_fanout.naive:APP"
R1 = RunSpec(run_id="r1", tenant="acme", workflow="refund_order", input=REFUND_ORDER.inputs[0])

KILLS = {
    "first refund": kill_after(R1, "payments", "refund", 1),
    "last refund": kill_after(R1, "payments", "refund", 3),
    "notify in total": kill_after(R1, "email", "notify", 1),
}


def refunds_per_line(history: History) -> str:
    """``sku=n`` for each line: refunds the world applied (not deduplicated)."""
    n: Counter[str] = Counter()
    for e in history.by_f(EventF.EFFECT):
        v = e.value
        if v.get("kind") == "payments.refund" and v.get("applied") and not v.get("deduplicated"):
            n[str(v["request"]["sku"])] += 1
    return " ".join(f"{sku}={n[sku]}" for sku in sorted(n))


if __name__ == "__main__":
    main(__doc__ or "", APP, KILLS, refunds_per_line)
