"""A counterexample of thousands of steps (an unshrunk one, or a report.json
anyone may have written) renders the first ``STEPS_SHOWN`` in every format
and says how many more there are: rendering each step made ``harness
report`` of a 100 MB report.json ten times slower than reading it (issue 27:
rendering within 2x of reading). ``report.json`` keeps every step."""

from __future__ import annotations

import json
import re
from pathlib import Path

from engine_support import harness_cli

from harness.report._shown import STEPS_SHOWN

STEPS = 5_000


def test_a_counterexample_of_thousands_of_steps_shows_the_first_and_counts_the_rest(
    run_copy: Path,
) -> None:
    path = run_copy / "report.json"
    data = json.loads(path.read_text())
    steps = [f"step {i} of {STEPS}" for i in range(1, STEPS + 1)]
    data["counterexample"]["steps"] = steps
    path.write_text(json.dumps(data))

    proc = harness_cli("report", str(run_copy), cwd=run_copy)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the stored verdict: a failure

    more = f"... and {STEPS - STEPS_SHOWN:,} more steps"
    for name in ("summary.md", "junit.xml", "report.html"):
        text = (run_copy / name).read_text()
        assert f"step {STEPS_SHOWN} of {STEPS}" in text, name
        assert f"step {STEPS_SHOWN + 1} of {STEPS}" not in text, name
        assert more in text, name
    listed = re.findall(r"^\d+\. step \d+ of", (run_copy / "summary.md").read_text(), re.M)
    assert len(listed) == STEPS_SHOWN
    assert json.loads(path.read_text())["counterexample"]["steps"] == steps
