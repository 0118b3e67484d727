"""How long a worker takes to pass over a parked run, beside an empty queue.

Run: ``python benchmarks/parked_runs.py [--repeats R] [--backend sqlite|postgres]``

A run written by a newer code version is *parked* by an older worker: left
untouched and taken off the queue until an operator unparks it
(``tests/runtime/test_migrations.py`` checks that behaviour). This times what
the test used to bound with ``< 30 s``: a worker started while the only run is
parked must find nothing to do and exit, as fast as on an empty queue.

Per repetition, each on a fresh deployment of the reference runtime:

* **parked**: a refund run submitted by code v2, parked by a v1 worker; then
  one v1 and one v2 worker are timed, each from spawn until it exits idle;
* **empty** (the baseline, measured in the same repetition): the same two
  workers on a deployment whose queue is empty.

Prints the median seconds per worker of each, and their ratio; a ratio near 1
means a parked run costs a worker nothing. Timed numbers belong here, never in
the tests.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.adapters.reference import Deployment

REFUND_V2 = {"customer_id": "c1", "amount_cents": 700, "currency": "EUR"}


def _open(root: Path, backend: str, postgres_url: str | None) -> Deployment:
    if backend == "postgres":
        return Deployment(root, backend="postgres", postgres_url=postgres_url)
    return Deployment(root)


def _time_workers(d: Deployment) -> list[float]:
    """Seconds for a v1 and a v2 worker, each run until it is idle."""
    times = []
    for n, version in enumerate((1, 2)):
        started = time.perf_counter()
        exit_ = d.run_worker(f"timed{n}", code_version=version, timeout=120.0)
        times.append(time.perf_counter() - started)
        if exit_.code != 0:
            raise SystemExit(f"worker v{version} did not exit cleanly: {exit_}")
    return times


def one_repetition(backend: str, postgres_url: str | None) -> tuple[list[float], list[float]]:
    """(parked worker times, empty-queue worker times) for one repetition."""
    with tempfile.TemporaryDirectory(prefix="parked-runs-") as tmp:
        with _open(Path(tmp) / "parked", backend, postgres_url) as d:
            d.submit("refund", REFUND_V2, tenant="acme", run_id="r2")
            if d.run_worker("parker", code_version=1).code != 0:
                raise SystemExit("the v1 worker that parks the run failed")
            token = d.snapshot("r2").run.fencing_token
            parked = _time_workers(d)
            if d.snapshot("r2").run.fencing_token != token:
                raise SystemExit("a timed worker claimed the parked run: nothing to measure")
        with _open(Path(tmp) / "empty", backend, postgres_url) as d:
            empty = _time_workers(d)
    return parked, empty


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("HARNESS_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"),
    )
    args = parser.parse_args(argv)
    parked: list[float] = []
    empty: list[float] = []
    for _ in range(args.repeats):
        p, e = one_repetition(args.backend, args.postgres_url)
        parked += p
        empty += e
    p_med, e_med = statistics.median(parked), statistics.median(empty)
    print(f"{platform.node()} ({os.cpu_count()} cores), {args.backend}, {args.repeats} repeats")
    print(f"  worker over a parked run: median {p_med:.3f} s ({min(parked):.3f}-{max(parked):.3f})")
    print(
        f"  worker over an empty queue (baseline): median {e_med:.3f} s "
        f"({min(empty):.3f}-{max(empty):.3f})"
    )
    print(f"  parked / empty: {p_med / e_med:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
