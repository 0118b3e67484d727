"""The broken runtime (tests/engine) with hostile text in everything it says
about itself: its description and every run's error carry control
characters, HTML, a Markdown table separator, a backtick and a lone
surrogate. Importable as ``hostile_runtime`` when tests/report and
tests/engine are on ``sys.path``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from broken_runtime import BrokenAdapter, BrokenEnvironment

from harness.adapters._contract import Observation

#: What a runtime may well put in a string: NUL, ESC, markup, a table cell
#: separator, a backtick and half a UTF-16 surrogate pair.
HOSTILE = "\x00\x1b<img src=x onerror=alert(1)>|`\ud800"


class HostileEnvironment(BrokenEnvironment):
    def observe(self) -> Observation:
        seen = super().observe()
        runs = tuple(r.model_copy(update={"error": HOSTILE}) for r in seen.runs)
        return seen.model_copy(update={"runs": runs})


class HostileAdapter(BrokenAdapter):
    def open(self, workdir: Path, *, seed: int) -> HostileEnvironment:
        return HostileEnvironment(self, workdir)

    def describe(self) -> dict[str, Any]:
        return {"fixed": self.fixed, "note": HOSTILE}
