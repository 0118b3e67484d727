"""What preloading DBOS in the fork server saves per scenario.

Run: ``python benchmarks/dbos_preload.py [--repeats 3] [--database sqlite]``

Runs the same handful of fixed scenarios of the careful refund app
(``examples/dbos_refund/careful.py``) through the harness's runner, each
against two adapters in the same process, interleaved: ``preload=true``
(the fork server imports DBOS, psycopg and the app once; a worker costs a
fork) and ``preload=false`` (each forked worker imports them itself). A
warm-up scenario per variant starts its fork server first, so neither median
counts a server's start. Prints the median wall seconds per scenario of
each, and their ratio. Timed numbers belong here, never in the tests.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.adapters.dbos import DBOSAdapter
from harness.history import History
from harness.model import ArmWorldFault, Quiesce, RunSpec, RunWorker, Scenario, Submit
from harness.runner import run_scenario

APP = "examples.dbos_refund.careful:APP"
PAYLOAD = {"customer_id": "c-1", "amount_cents": 1250, "currency": "EUR"}


def _run(run_id: str, code_version: int | None = None) -> RunSpec:
    return RunSpec(
        run_id=run_id,
        tenant="acme",
        workflow="refund",
        input=PAYLOAD,
        code_version=code_version,
    )


def _fault(mode: str) -> ArmWorldFault:
    return ArmWorldFault(service="payments", action="refund", mode=mode)


def scenarios() -> list[Scenario]:
    """Five fixed scenarios: 1 to 3 workers each."""
    r1, r2 = _run("r1"), _run("r2")
    return [
        Scenario(name="plain", steps=(Submit(run=r1), RunWorker(worker_id="w1"), Quiesce())),
        Scenario(
            name="kill-after-refund",
            steps=(
                Submit(run=r1),
                _fault("kill_after_apply"),
                RunWorker(worker_id="w1"),
                Quiesce(),
            ),
        ),
        Scenario(
            name="timeout-after-apply",
            steps=(
                Submit(run=r1),
                _fault("apply_then_timeout"),
                RunWorker(worker_id="w1"),
                Quiesce(),
            ),
        ),
        Scenario(
            name="two-runs-kill",
            steps=(
                Submit(run=r1),
                Submit(run=r2),
                _fault("kill_after_apply"),
                RunWorker(worker_id="w1"),
                Quiesce(),
            ),
        ),
        Scenario(
            name="upgrade-mid-run",
            steps=(
                Submit(run=_run("r1", code_version=1)),
                _fault("kill_after_apply"),
                RunWorker(worker_id="v1", code_version=1),
                Quiesce(),
            ),
        ),
    ]


def timed(adapter: DBOSAdapter, scenario: Scenario, root: Path) -> float:
    workdir = Path(tempfile.mkdtemp(dir=root))
    start = time.perf_counter()
    result = run_scenario(adapter, scenario, workdir)
    seconds = time.perf_counter() - start
    # A variant that failed quickly would look fast: every run must complete.
    finals = History.load(result.history_path).finals()
    states = {run_id: final.value.get("state") for run_id, final in finals.items()}
    if not finals or set(states.values()) != {"completed"}:
        raise SystemExit(f"{scenario.name} (preload={adapter.preloaded}): runs ended {states}")
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--database", choices=("sqlite", "postgres"), default="sqlite")
    args = parser.parse_args(argv)
    variants = {
        flag: DBOSAdapter(app=APP, database=args.database, preload=flag)
        for flag in ("true", "false")
    }
    times: dict[str, list[float]] = {flag: [] for flag in variants}
    with tempfile.TemporaryDirectory(prefix="dbos-preload-") as tmp:
        root = Path(tmp)
        for adapter in variants.values():  # warm-up: start each fork server
            timed(adapter, scenarios()[0], root)
        for _ in range(args.repeats):
            for scenario in scenarios():
                for flag, adapter in variants.items():
                    times[flag].append(timed(adapter, scenario, root))
    with_, without = (statistics.median(times[f]) for f in ("true", "false"))
    n = len(times["true"])
    print(f"careful refund app, {args.database}, {n} scenarios per variant (median s/scenario)")
    print(f"  preload=true   {with_:.3f} s")
    print(f"  preload=false  {without:.3f} s")
    print(f"  ratio (without / with): {without / with_:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
