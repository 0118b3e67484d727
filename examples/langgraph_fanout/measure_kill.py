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

from ._fanout import REFUND_ORDER

APP = "examples.langgraph_fanout.naive:APP"
R1 = RunSpec(run_id="r1", tenant="acme", workflow="refund_order", input=REFUND_ORDER.inputs[0])


def kill_after(service: str, action: str, nth: int) -> Scenario:
    """Kill the worker right after the ``nth`` call of ``service.action`` applied."""
    return Scenario(
        name=f"kill-after-{action}-{nth}",
        steps=(
            Submit(run=R1),
            ArmWorldFault(service=service, action=action, nth=nth, mode="kill_after_apply"),
            RunWorker(worker_id="w1"),
            Quiesce(),
        ),
    )


KILLS = {
    "first refund": kill_after("payments", "refund", 1),
    "last refund": kill_after("payments", "refund", 3),
    "notify in total": kill_after("email", "notify", 1),
}


def refunds_per_line(history: History) -> str:
    """``sku=n`` for each line: refunds the world applied (not deduplicated)."""
    n: Counter[str] = Counter()
    for e in history.by_f(EventF.EFFECT):
        v = e.value
        if v.get("kind") == "payments.refund" and v.get("applied") and not v.get("deduplicated"):
            n[str(v["request"]["sku"])] += 1
    return " ".join(f"{sku}={n[sku]}" for sku in sorted(n))


def measure(
    app: str, checkpointer: str, durability: str, scenario: Scenario, runs: int, workdir: Path
) -> Counter[str]:
    adapter = LangGraphAdapter(app=app, checkpointer=checkpointer, durability=durability)
    engine = Engine(adapter, load_settings("dev", start=workdir), workdir=workdir)
    counts: Counter[str] = Counter()
    for _ in range(runs):
        example = engine.execute(scenario)
        counts[refunds_per_line(History.load(example.folder / "history.jsonl"))] += 1
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
                    f"{checkpointer:8} {durability:5} after {name:15} {shown} ({seconds:.0f} s)",
                    flush=True,
                )


if __name__ == "__main__":
    main()
