"""The report of ``runtime_throughput.py``: medians, ranges and the table."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from _throughput_measure import READ_CALLS, WRITE_CALLS, BackendResults


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs)


def spread(xs: Sequence[float], fmt: str = "{:,.0f}") -> str:
    return f"{fmt.format(median(xs))} [{fmt.format(min(xs))}-{fmt.format(max(xs))}]"


def summarize(results: list[BackendResults]) -> list[dict[str, Any]]:
    """One row per (backend, workers): medians, ranges, per-repetition ratios."""
    rows = []
    for res in results:
        raw = res.raw_commits_per_second
        for workers, reps in sorted(res.reps.items()):
            sps = [r.steps_per_second for r in reps]
            # Ratio within a repetition first (raw and runtime measured back to
            # back), then the median: drift between repetitions cancels.
            ratio = [r.steps_per_second / raw[i] for i, r in enumerate(reps)]
            wtx = [r.write_tx_per_step for r in reps]
            ceiling = [raw[i] / r.write_tx_per_step for i, r in enumerate(reps)]
            rows.append(
                {
                    "backend": res.backend,
                    "workers": workers,
                    "steps_per_s": sps,
                    "raw_commits_per_s": raw,
                    "ratio": ratio,
                    "write_tx_per_step": wtx,
                    "read_tx_per_step": [r.read_tx_per_step for r in reps],
                    "cpu_ms_per_step": [r.cpu_ms_per_step for r in reps],
                    "busy": [r.busy for r in reps],
                    "of_ceiling": [s / c for s, c in zip(sps, ceiling, strict=True)],
                    "steps": [r.steps for r in reps],
                    "window_s": [r.window_seconds for r in reps],
                    "drained": all(r.drained and r.terminal_runs == r.total_runs for r in reps),
                    "calls_per_step": {
                        name: median([r.store_calls.get(name, 0) / r.steps for r in reps])
                        for name in (*WRITE_CALLS, *READ_CALLS)
                        if any(r.store_calls.get(name) for r in reps)
                    },
                }
            )
    return rows


def print_table(rows: list[dict[str, Any]], repeats: int) -> None:
    headers = (
        "backend",
        "workers",
        "steps/s",
        "raw commits/s",
        "steps/s / raw",
        "write tx/step",
        "read tx/step",
        "of ceiling",
        "CPU ms/step",
        "busy",
        "drained",
    )
    table = [
        (
            row["backend"],
            str(row["workers"]),
            spread(row["steps_per_s"]),
            spread(row["raw_commits_per_s"]),
            f"{median(row['ratio']):.3f}",
            f"{median(row['write_tx_per_step']):.2f}",
            f"{median(row['read_tx_per_step']):.2f}",
            f"{median(row['of_ceiling']):.0%}",
            f"{median(row['cpu_ms_per_step']):.2f}",
            f"{median(row['busy']):.0%}",
            "yes" if row["drained"] else "NO",
        )
        for row in rows
    ]
    widths = [max(len(h), *(len(t[i]) for t in table)) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    print(line)
    print("  ".join("-" * w for w in widths))
    for t in table:
        print("  ".join(c.ljust(w) for c, w in zip(t, widths, strict=True)))
    print(
        f"\nmedian [min-max] of {repeats} repetitions; ratios are taken within a repetition, "
        "then the median.\n"
        "steps/s / raw: steps/s divided by the raw commit rate of the same database.\n"
        "write tx/step, read tx/step: store transactions the workers opened per step "
        "(every step is exactly one checkpoint commit; the rest is overhead).\n"
        "of ceiling: steps/s divided by (raw commits/s / write tx/step).\n"
        "CPU ms/step: worker processes' CPU time per step (Postgres server not included); "
        "busy: that CPU time / (window x workers)."
    )
    for row in rows:
        calls = ", ".join(f"{k} {v:.2f}" for k, v in row["calls_per_step"].items())
        print(f"  {row['backend']} {row['workers']}w store calls per step: {calls}")
