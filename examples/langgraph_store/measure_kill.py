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

import argparse
import tempfile
import time
from collections import Counter
from importlib import metadata
from pathlib import Path

from harness._engine import Engine
from harness._settings import load_settings
from harness.adapters.langgraph import LangGraphAdapter
from harness.history import History
from harness.model import ArmWorldFault, EventF, Quiesce, RunSpec, RunWorker, Scenario, Submit

from ._memory import SUBSCRIBE

APP = "examples.langgraph_store.naive:APP"
R1 = RunSpec(run_id="r1", tenant="acme", workflow="subscribe", input=SUBSCRIBE.inputs[0])


def kill_after(service: str, action: str) -> Scenario:
    """Kill the worker right after the first call of ``service.action`` applied."""
    return Scenario(
        name=f"kill-after-{action}",
        steps=(
            Submit(run=R1),
            ArmWorldFault(service=service, action=action, nth=1, mode="kill_after_apply"),
            RunWorker(worker_id="w1"),
            Quiesce(),
        ),
    )


KILLS = {
    "charge": kill_after("payments", "charge"),
    "notify": kill_after("email", "notify"),
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


def measure(
    app: str, checkpointer: str, durability: str, scenario: Scenario, runs: int, workdir: Path
) -> Counter[str]:
    adapter = LangGraphAdapter(app=app, checkpointer=checkpointer, durability=durability)
    engine = Engine(adapter, load_settings("dev", start=workdir), workdir=workdir)
    counts: Counter[str] = Counter()
    for _ in range(runs):
        example = engine.execute(scenario)
        counts[pattern(History.load(example.folder / "history.jsonl"))] += 1
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--app", default=APP)
    parser.add_argument("--checkpointer", action="append", choices=("sqlite", "postgres"))
    parser.add_argument("--durability", action="append", choices=("async", "sync"))
    args = parser.parse_args()
    print(f"{args.app}: langgraph {metadata.version('langgraph')}")
    for checkpointer in args.checkpointer or ["sqlite"]:
        for durability in args.durability or ["async", "sync"]:
            for name, scenario in KILLS.items():
                with tempfile.TemporaryDirectory() as tmp:
                    start = time.monotonic()
                    counts = measure(
                        args.app, checkpointer, durability, scenario, args.runs, Path(tmp)
                    )
                    seconds = time.monotonic() - start
                shown = ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))
                print(
                    f"{checkpointer:8} {durability:5} after {name:6} {shown} ({seconds:.0f} s)",
                    flush=True,
                )


if __name__ == "__main__":
    main()
