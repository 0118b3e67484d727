"""Headless Chromium, as a person's browser would open a report (a module with
a unique name: the report tests import it)."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from reference_runtime import service_urls

#: Chromium logs each page console message on stderr, as ``...:CONSOLE(line)] "text", source: ...``
CONSOLE = re.compile(r"CONSOLE\(\d+\)\]|:CONSOLE:|console\.error", re.IGNORECASE)


@dataclass
class Rendered:
    dom: str
    stderr: str

    @property
    def console_lines(self) -> list[str]:
        """Every console message the page produced (it has no script: any is a fault)."""
        return [line for line in self.stderr.splitlines() if CONSOLE.search(line)]


def chromium() -> str:
    """The chromium binary; skips the test when there is none, or fails it
    under ``HARNESS_REQUIRE_SERVICES=1`` (CI installs it in ``.ci/run``)."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    reason = (
        "headless Chromium is not installed, so report.html is not checked in a browser "
        "(apt-get install -y chromium)"
    )
    if service_urls.services_required():
        pytest.fail(f"{reason}; HARNESS_REQUIRE_SERVICES=1 forbids skipping")
    pytest.skip(reason)


def render(page: Path, *, screenshot: Path | None = None) -> Rendered:
    """Open ``page`` in headless Chromium; its DOM after load and the log."""
    binary = chromium()
    with tempfile.TemporaryDirectory(prefix="harness-chromium-") as profile:
        args = [
            binary,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            "--enable-logging=stderr",
            "--v=0",
        ]
        if screenshot is not None:
            args += ["--window-size=1280,1400", f"--screenshot={screenshot}"]
        else:
            args.append("--dump-dom")
        proc = subprocess.run(
            [*args, page.resolve().as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return Rendered(proc.stdout, proc.stderr)
