"""What a kill right after the refund was applied does to ``naive.py``, counted.

    PYTHONPATH=. python -m examples.langgraph_refund.measure_kill --runs 30 \\
        --checkpointer sqlite --checkpointer postgres --durability async --durability sync

Runs the scenario of ``tests/langgraph`` (the run stops at the approval; the
worker that resumes it is SIGKILLed right after the payment service applied
the refund; workers then run until nothing moves) ``--runs`` times per
checkpointer and durability, checks each history, and prints one line each:
how many runs refunded twice (``exactly_once_effects`` failed), how many were
left stuck (``progress`` failed: a thread that ended without an outcome), and
how many did something else. Postgres needs ``HARNESS_POSTGRES_URL``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import Counter
from importlib import metadata
from pathlib import Path

from harness import Engine, load_settings
from harness.adapters.langgraph import LangGraphAdapter
from harness.model import (
    Approve,
    ArmWorldFault,
    Quiesce,
    RunSpec,
    RunWorker,
    Scenario,
    Submit,
    Verdict,
)

APP = "examples.langgraph_refund.naive:APP"

KILL_AFTER_REFUND = Scenario(
    name="kill-after-refund",
    steps=(
        Submit(
            run=RunSpec(
                run_id="r1",
                tenant="acme",
                workflow="refund",
                input={"customer_id": "c-1", "amount_cents": 1250, "currency": "EUR"},
            )
        ),
        RunWorker(worker_id="w0"),
        Approve(run_id="r1"),
        ArmWorldFault(service="payments", action="refund", mode="kill_after_apply"),
        RunWorker(worker_id="w1"),
        Quiesce(),
    ),
)


def classify(failed: set[str]) -> str:
    """One word for a run's failed properties.

    A double charge also fails ``resume_equivalence`` (another refund ref
    than the oracle's) and ``approval_integrity`` (one approval executed
    twice); ``stuck`` wins over it.
    """
    if "progress" in failed:
        return "stuck"
    if "exactly_once_effects" in failed:
        return "double charge"
    return "other: " + (", ".join(sorted(failed)) or "no failure")


def measure(checkpointer: str, durability: str, runs: int, workdir: Path) -> Counter[str]:
    adapter = LangGraphAdapter(app=APP, checkpointer=checkpointer, durability=durability)
    engine = Engine(adapter, load_settings("dev", start=workdir), workdir=workdir)
    counts: Counter[str] = Counter()
    for _ in range(runs):
        example = engine.execute(KILL_AFTER_REFUND)
        counts[classify({r.name for r in example.results if r.verdict is Verdict.FAIL})] += 1
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--checkpointer", action="append", choices=("sqlite", "postgres"))
    parser.add_argument("--durability", action="append", choices=("async", "sync", "exit"))
    args = parser.parse_args()
    print(
        f"langgraph {metadata.version('langgraph')}, "
        f"langgraph-checkpoint {metadata.version('langgraph-checkpoint')}, "
        f"langgraph-checkpoint-sqlite {metadata.version('langgraph-checkpoint-sqlite')}, "
        f"langgraph-checkpoint-postgres {metadata.version('langgraph-checkpoint-postgres')}"
    )
    for checkpointer in args.checkpointer or ["sqlite"]:
        for durability in args.durability or ["async"]:
            with tempfile.TemporaryDirectory() as tmp:
                start = time.monotonic()
                counts = measure(checkpointer, durability, args.runs, Path(tmp))
                seconds = time.monotonic() - start
            shown = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
            print(
                f"{checkpointer:8} {durability:5} {args.runs} runs: {shown} ({seconds:.0f} s)",
                flush=True,
            )


if __name__ == "__main__":
    main()
