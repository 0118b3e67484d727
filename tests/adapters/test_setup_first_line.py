"""A line before an adapter's ``setup()`` (issue 34): a setup that starts a
server took 60-100 s in silence. Each command that calls the hook says so
first; a setup that fails proves the line came before it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ENGINE_DIR = Path(__file__).resolve().parent.parent / "engine"
if str(ENGINE_DIR) not in sys.path:
    sys.path.insert(0, str(ENGINE_DIR))

from engine_support import subprocess_env  # noqa: E402  (needs the path above)

ADAPTER = """
from broken_runtime import BrokenAdapter

class SlowStart(BrokenAdapter):
    name = "slowstart"

    def setup(self):
        raise RuntimeError("the server did not come up")
"""


@pytest.mark.parametrize(
    "command",
    [
        ["run", "--adapter", "slowstart_adapter:SlowStart", "--profile", "dev"],
        ["check-adapter", "slowstart_adapter:SlowStart"],
    ],
)
def test_a_line_names_the_adapter_before_its_setup_runs(command: list[str], tmp_path: Path) -> None:
    (tmp_path / "slowstart_adapter.py").write_text(ADAPTER)
    env = subprocess_env({"PYTHONPATH": f"{tmp_path}:{subprocess_env()['PYTHONPATH']}"})
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", *command, "--report-dir", str(tmp_path / "r")]
        if command[0] == "run"
        else [sys.executable, "-m", "harness.cli", *command],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    both = proc.stdout + proc.stderr
    assert "harness: starting slowstart: setup()" in both, both
    assert "the server did not come up" in both
    assert both.index("harness: starting slowstart") < both.index("the server did not come up")
