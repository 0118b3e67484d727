"""``harness report DIR`` against reading the report, on synthetic large reports.

Issue 27 asks that re-rendering a report be linear in its size: within 2x
of what ``harness replay`` spends reading the same ``report.json``. This
builds report folders of growing size (failed properties served by one
long counterexample -- the shape that made ``junit.xml`` grow with the
square of the report -- plus other failures and fault kinds), then times,
in one process each: reading (``load_report``, what replay does) and
re-rendering (``load_report`` and ``write_reports``, what ``harness report``
does). ::

    python benchmarks/report_render.py --mb 5 50 200

Prints one line per size: the report's bytes, the read and render seconds
(with ``--repeat N``, the fastest of N),
their ratio, the size of every rendering, and the 1-minute load average
before and after (the machine may be shared: compare ratios, not seconds).
A measurement that fails or runs past ``--timeout`` still prints its line,
saying so (a size that printed nothing was a render of a report of 125,000
properties that would have taken half an hour: every property's hint was
looked up by a scan of all of them).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

#: bytes of report.json per unit of ``n`` in :func:`build` (measured: 639)
_PER_UNIT = 640


def build(folder: Path, n: int) -> int:
    """A report folder whose report.json has ``n`` failed properties all
    served by the main counterexample of ``n`` steps, ``n // 10`` other
    failures and ``n // 10`` fault kinds; returns its size in bytes."""
    from harness.report import Report

    names = [f"property_{i}" for i in range(n)]
    raw = {
        "verdict": "fail",
        "seed": 1,
        "profile": "dev",
        "adapter": {
            "spec": "reference",
            "options": {},
            "name": "reference",
            "description": {},
            "capabilities": [],
        },
        "duration_seconds": 1.0,
        "scenarios": n,
        "properties": [
            {
                "name": name,
                "verdict": "fail",
                "message": f"{name} lost an effect <b>|`x`|</b>",
                "witness": [1, 2, 3],
                "counts": {"effects": 3},
                "scenarios": 1,
                "exercised": 1,
                "failed": 1,
            }
            for name in names
        ],
        "other_failures": [
            {
                "failed_properties": [names[i]],
                "steps": ["submit refund run r1 for acme", "kill worker w0"],
                "folder": f"failures/{i + 1}",
                "replay": f"harness replay failures/{i + 1}",
            }
            for i in range(n // 10)
        ],
        "faults": {f"fault_{i}": {"armed": 2, "fired": 1} for i in range(n // 10)},
        "absorbed_duplicates": 0,
        "not_tested": [],
        "counterexample": {
            "steps": [f"submit refund run r{i} for acme" for i in range(n)],
            "failed_properties": names,
            "counterexample_for": names,
            "replay": "harness replay .",
        },
    }
    folder.mkdir(parents=True, exist_ok=True)
    text = Report.model_validate(raw).to_json()
    (folder / "report.json").write_text(text)
    return len(text)


_MEASURE = """
import sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from harness.report import load_report, write_reports
folder = Path(sys.argv[1])
start = time.perf_counter()
report = load_report(folder)
if sys.argv[2] == "render":
    write_reports(report, folder)
print(time.perf_counter() - start)
"""


class Failed(Exception):
    """A measurement that did not finish: what happened, in a few words."""


def measure(folder: Path, what: str, timeout: float) -> float:
    """Seconds to read (``read``) or read and re-render (``render``) the
    report in ``folder``, in a fresh interpreter; :class:`Failed` when it
    fails or takes more than ``timeout`` seconds."""
    try:
        out = subprocess.run(
            [sys.executable, "-c", _MEASURE, str(folder), what, str(HERE.parent)],
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        raise Failed(f"{what}: no result after {timeout:g} s") from None
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise Failed(f"{what}: exit code {out.returncode}: {last}")
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mb", type=float, nargs="+", default=[5.0, 20.0])
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds one measurement may take")
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="measure each this many times and keep the fastest (a shared machine's load "
        "comes and goes)",
    )
    args = p.parse_args()
    for mb in args.mb:
        row: dict[str, object] = {"load_before": round(os.getloadavg()[0], 2)}
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / "run"
            n = max(10, int(mb * 1024 * 1024 / _PER_UNIT))
            row["properties"] = n
            row["report_json_bytes"] = build(folder, n)
            try:
                read = min(measure(folder, "read", args.timeout) for _ in range(args.repeat))
                render = min(measure(folder, "render", args.timeout) for _ in range(args.repeat))
            except Failed as exc:
                row["failed"] = str(exc)
            else:
                row["read_seconds"] = round(read, 2)
                row["render_seconds"] = round(render, 2)
                row["ratio"] = round(render / read, 2)
            row["files"] = {
                p.name: p.stat().st_size for p in sorted(folder.iterdir()) if not p.is_dir()
            }
        row["load_after"] = round(os.getloadavg()[0], 2)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
