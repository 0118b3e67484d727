"""How many memory items a kill leaves in the customer's store namespace, counted.

    PYTHONPATH=. python -m examples.langgraph_store.measure_kill --runs 10 \\
        --app examples.langgraph_store.naive:APP --checkpointer sqlite \\
        --durability async --durability sync

One run of the subscription (``subscribe`` puts a memory item and charges,
then ``welcome`` notifies). A worker is SIGKILLed right after the world
applied the charge (inside ``subscribe``, after its store write) or the
notification (inside ``welcome``), and workers then run until nothing moves.
Prints, per kill point, the number of items in the run's namespace at the
end (from the run's durable state, as ``state_equivalence`` sees it) and the
number of charges the world applied, as a count of patterns.
"""

from __future__ import annotations

from examples._measure import kill_after, main
from harness.history import History
from harness.model import EventF, RunSpec

from ._memory import SUBSCRIBE

APP = "examples.langgraph_store.naive:APP"
R1 = RunSpec(run_id="r1", tenant="acme", workflow="subscribe", input=SUBSCRIBE.inputs[0])

KILLS = {
    "charge": kill_after(R1, "payments", "charge"),
    "notify": kill_after(R1, "email", "notify"),
}


def pattern(history: History) -> str:
    """``memories=n charges=m`` at the end of the run."""
    state = next(e.value["state"] for e in history.by_f(EventF.STATE))
    charges = sum(
        1
        for e in history.by_f(EventF.EFFECT)
        if e.value.get("kind") == "payments.charge"
        and e.value.get("applied")
        and not e.value.get("deduplicated")
    )
    return f"memories={len(state['__store__'])} charges={charges}"


if __name__ == "__main__":
    main(__doc__ or "", APP, KILLS, pattern)
