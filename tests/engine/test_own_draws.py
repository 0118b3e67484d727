"""The harness's Hypothesis searches read no constants from local source
(``harness.session._draws.own_draws``): nothing is written into the working
directory of whoever runs the harness, and Hypothesis is left as it was."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis.internal.conjecture import providers

from harness.session._draws import own_draws


def test_a_sampled_search_writes_nothing_into_the_working_directory(tmp_path: Path) -> None:
    cwd = tmp_path / "project"
    cwd.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HARNESS_", "HYPOTHESIS_"))}
    run = subprocess.run(
        [
            sys.executable, "-m", "harness.cli", "run", "--adapter", "reference",
            "--profile", "ci", "--seed", "0", "--no-targeted", "--max-examples", "3",
            "--budget", "60", "--report-dir", str(tmp_path / "report"),
        ],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )  # fmt: skip
    # 0 (pass) or 3 (inconclusive: three sampled scenarios may leave a
    # property with nothing to judge, as seed 0's leave migration_safety)
    assert run.returncode in (0, 3), run.stdout[-2000:] + run.stderr[-2000:]
    assert (tmp_path / "report" / "report.json").is_file()
    # Hypothesis's parse cache of local modules (.hypothesis/constants/) was
    # written here, a file per module, before the search drew without it.
    assert sorted(p.name for p in cwd.iterdir()) == []


def test_hypothesis_is_left_as_it_was_even_when_the_search_raises() -> None:
    before = providers._get_local_constants
    with pytest.raises(RuntimeError), own_draws():
        assert providers._get_local_constants is not before
        assert not providers._get_local_constants().integers
        raise RuntimeError("the search stopped")
    assert providers._get_local_constants is before
