"""One test command: what ``.ci/run`` runs is what the README and
CONTRIBUTING.md show a contributor, word for word."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _ci_command() -> str:
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    commands = [line for line in lines if line.startswith("pip install ")]
    assert len(commands) == 1, f".ci/run should run one test command, found {commands}"
    return commands[0]


def test_the_readme_and_contributing_show_the_command_ci_runs() -> None:
    command = _ci_command()
    for doc in ("README.md", "CONTRIBUTING.md"):
        shown = [line.strip() for line in (ROOT / doc).read_text().splitlines()]
        assert command in shown, f"{doc} should show .ci/run's test command: {command}"
