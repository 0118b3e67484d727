"""Helpers of the engine tests (a module with a unique name: "conftest" is
ambiguous when several test folders have one)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

ENGINE_DIR = Path(__file__).resolve().parent
BROKEN = "broken_runtime:BrokenAdapter"


def subprocess_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This environment, with ``broken_runtime`` importable and no settings
    leaking in from the caller's ``HARNESS_*``/``CI`` variables (nor a CI
    step summary for test runs to append to)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CI", "GITHUB_STEP_SUMMARY")
        and not (k.startswith("HARNESS_") and not k.endswith("_URL"))
    }
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ENGINE_DIR), os.environ.get("PYTHONPATH", "")) if p
    )
    env.update(extra or {})
    return env


def harness_cli(*args: str, cwd: Path, timeout: float = 180.0) -> subprocess.CompletedProcess[str]:
    """Run ``harness ARGS`` as a subprocess (from ``cwd``, so no pyproject applies).

    Runs of the broken runtime skip the targeted schedules: those tests are
    about sampling and shrinking (a 4-step counterexample). A ci profile's
    150 sampled draws are seeded with the targeted schedules all the same
    (harness.scenarios.sampled_stream), so its counterexample may be a
    shrunk seed.
    """
    env = subprocess_env()
    if BROKEN in args:
        env["HARNESS_TARGETED"] = "0"
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def replay_argv(command: str) -> list[str]:
    """The ``harness`` arguments of a replay command a report printed (it
    names a non-built-in adapter on the command line: see test_replay_trust)."""
    words = shlex.split(command)
    # PYTHONPATH=... first, when the adapter came from a folder a plain
    # harness does not search (harness_cli sets the test's own)
    while words and "=" in words[0] and not words[0].startswith("-"):
        words = words[1:]
    assert words[:2] == ["harness", "replay"], command
    return words[1:]


ROOT = Path(__file__).resolve().parents[2]


def harness_cli_at_root(
    *args: str, cwd: Path, timeout: float = 300.0
) -> subprocess.CompletedProcess[str]:
    """``harness ARGS`` from ``cwd`` with the repository root importable too
    (adapters built on ``examples.minimal_adapter``)."""
    env = subprocess_env()
    env["PYTHONPATH"] += os.pathsep + str(ROOT)
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
