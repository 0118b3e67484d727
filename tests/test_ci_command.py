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


def test_the_readme_is_a_users_first_screen_of_at_most_150_lines() -> None:
    """Issue 29: the pitch, the main command and the way to one's own
    runtime fit a screenful; measurements live in benchmarks/README.md."""
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines; move detail to docs/"
    assert lines[0].startswith("# ")
    assert "harness run --adapter reference --profile ci" in "\n".join(lines[:30])
