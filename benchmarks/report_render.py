"""``harness report DIR`` against reading the report, on synthetic large reports.

Issue 27 asks that re-rendering a report be linear in its size: within 2x
of what ``harness replay`` spends reading the same ``report.json``. This
builds report folders of growing size (failed properties served by one
long counterexample -- the shape that made ``junit.xml`` grow with the
square of the report -- plus other failures and fault kinds), then times,
in one process each: reading (``load_report``, what replay does) and
re-rendering (``load_report`` and ``write_reports``, what ``harness report``
does). ::

    python benchmarks/report_render.py --mb 20 50 200

Prints one line per size: the report's bytes, the read and render seconds,
their ratio, and the size of every rendering.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

#: bytes of report.json per unit of ``n`` in :func:`build` (measured: about)
_PER_UNIT = 420


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


def measure(folder: Path, what: str) -> float:
    """Seconds to read (``read``) or read and re-render (``render``) the
    report in ``folder``, in a fresh interpreter."""
    out = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(folder), what, str(HERE.parent)],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mb", type=float, nargs="+", default=[5.0, 20.0])
    args = p.parse_args()
    rows = []
    for mb in args.mb:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / "run"
            size = build(folder, max(10, int(mb * 1024 * 1024 / _PER_UNIT)))
            read = measure(folder, "read")
            render = measure(folder, "render")
            sizes = {
                p.name: p.stat().st_size for p in sorted(folder.iterdir()) if not p.is_dir()
            }
        row = {
            "report_json_bytes": size,
            "read_seconds": round(read, 2),
            "render_seconds": round(render, 2),
            "ratio": round(render / read, 2),
            "files": sizes,
        }
        rows.append(row)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
