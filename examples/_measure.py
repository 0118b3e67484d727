"""What the examples' ``measure_kill`` scripts share: one run killed right
after an effect, repeated, its histories counted by pattern per checkpointer
and durability."""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping
from importlib import metadata
from pathlib import Path

from harness import Engine, load_settings
from harness.adapters.langgraph import LangGraphAdapter
from harness.history import History
from harness.model import ArmWorldFault, Quiesce, RunSpec, RunWorker, Scenario, Submit

Pattern = Callable[[History], str]


def kill_after(run: RunSpec, service: str, action: str, nth: int = 1) -> Scenario:
    """Submit ``run``; kill its worker right after the ``nth`` call of
    ``service.action`` applied; then run workers until nothing moves."""
    return Scenario(
        name=f"kill-after-{action}-{nth}",
        steps=(
            Submit(run=run),
            ArmWorldFault(service=service, action=action, nth=nth, mode="kill_after_apply"),
            RunWorker(worker_id="w1"),
            Quiesce(),
        ),
    )


def measure(
    app: str,
    checkpointer: str,
    durability: str,
    scenario: Scenario,
    runs: int,
    pattern: Pattern,
    workdir: Path,
) -> Counter[str]:
    """``scenario`` run ``runs`` times; how often each ``pattern`` came out."""
    adapter = LangGraphAdapter(app=app, checkpointer=checkpointer, durability=durability)
    engine = Engine(adapter, load_settings("dev", start=workdir), workdir=workdir)
    counts: Counter[str] = Counter()
    for _ in range(runs):
        example = engine.execute(scenario)
        counts[pattern(History.load(example.folder / "history.jsonl"))] += 1
    return counts


def main(doc: str, app: str, kills: Mapping[str, Scenario], pattern: Pattern) -> None:
    """The command line: ``--runs``, ``--app``, ``--checkpointer``, ``--durability``."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--app", default=app)
    parser.add_argument("--checkpointer", action="append", choices=("sqlite", "postgres"))
    parser.add_argument("--durability", action="append", choices=("async", "sync"))
    args = parser.parse_args()
    print(f"{args.app}: langgraph {metadata.version('langgraph')}")
    width = max(len(name) for name in kills)
    for checkpointer in args.checkpointer or ["sqlite"]:
        for durability in args.durability or ["async", "sync"]:
            for name, scenario in kills.items():
                with tempfile.TemporaryDirectory() as tmp:
                    start = time.monotonic()
                    counts = measure(
                        args.app, checkpointer, durability, scenario, args.runs, pattern, Path(tmp)
                    )
                    seconds = time.monotonic() - start
                shown = ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))
                print(
                    f"{checkpointer:8} {durability:5} after {name:{width}} {shown} "
                    f"({seconds:.0f} s)",
                    flush=True,
                )
