"""``report.html``: self-contained, and as a person sees it in a browser."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import pytest
from chromium_support import render

from harness.model import Scenario
from harness.report import load_report, render_html


class _Refs(HTMLParser):
    """Every URL the page would fetch, and every script."""

    def __init__(self) -> None:
        super().__init__()
        self.fetched: list[str] = []
        self.scripts = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "script":
            self.scripts += 1
        for name, value in attrs:
            if name in ("src", "href", "srcset", "data") and value:
                self.fetched.append(value)
            if name == "style" and value and "url(" in value:
                self.fetched.append(value)


def _lane_y(html: str, lane: str) -> str:
    marker = f">{lane}</text>"
    assert marker in html, lane
    before = html[: html.index(marker)]
    return before[before.rindex('y="') + 3 : before.rindex('"')]


def test_the_page_fetches_nothing_and_runs_no_script(failing_run: tuple[Path, str]) -> None:
    html = (failing_run[0] / "report.html").read_text()
    refs = _Refs()
    refs.feed(html)
    assert refs.fetched == [], refs.fetched
    assert refs.scripts == 0
    assert "@import" not in html and "url(" not in html


def test_the_failing_report_shows_the_timeline_with_the_witness_highlighted(
    failing_run: tuple[Path, str],
) -> None:
    html = (failing_run[0] / "report.html").read_text()
    assert 'class="banner fail"' in html
    assert '<svg class="timeline" id="timeline-1"' in html
    # the counterexample's first worker (killed): its own, or the quiesce's
    # first when the step-deleting pass left it none; and the ones after it
    workers = {s.worker_id for s in _scenario(failing_run[0]).steps if hasattr(s, "worker_id")}
    assert len(workers) <= 1, workers
    worker = next(iter(workers), "q0")
    for lane in ("runner", "nemesis", "world", worker, "q0"):
        assert f'<text class="lane" x="6" y="{_lane_y(html, lane)}">{lane}</text>' in html, lane
    # the two charges of exactly_once_effects' witness, and the kill between them
    assert '<g class="mark witness" data-index="6">' in html
    assert '<g class="mark witness" data-index="10">' in html
    assert f'<g class="mark" data-index="8"><title>#8 {worker} info worker' in html
    assert "SIGKILL" in html
    assert "harness replay " in html


def test_the_coverage_matrix_marks_faults_after_which_a_property_failed(
    failing_run: tuple[Path, str],
) -> None:
    html = (failing_run[0] / "report.html").read_text()
    matrix = html[html.index('id="coverage-matrix"') :]
    row = matrix[matrix.index("<code>effect_boundary</code>") :]
    assert row.index('class="cell broke"') < row.index("</tr>")


def test_a_passing_report_shows_crash_points_in_the_matrix_and_a_sample_timeline(
    passing_run: Path,
) -> None:
    html = (passing_run / "report.html").read_text()
    assert 'class="banner pass"' in html
    assert "A sample scenario (every property held)" in html
    assert html.count('<td class="note">crash point</td>') >= 20
    assert 'class="cell held"' in html


def test_rendering_is_deterministic(failing_run: tuple[Path, str]) -> None:
    folder = failing_run[0]
    report = load_report(folder)
    assert render_html(report, folder) == render_html(report, folder)
    assert render_html(report, folder) == (folder / "report.html").read_text()


def test_headless_chromium_renders_the_failing_report_without_console_errors(
    failing_run: tuple[Path, str],
) -> None:
    page = render(failing_run[0] / "report.html")
    assert page.console_lines == [], page.console_lines
    assert '<svg class="timeline" id="timeline-1"' in page.dom
    assert 'id="coverage-matrix"' in page.dom
    assert "Minimal counterexample" in page.dom


def test_the_console_check_would_catch_a_page_error(tmp_path: Path) -> None:
    page = tmp_path / "broken.html"
    page.write_text(
        "<!DOCTYPE html><p>x</p><script>console.error('boom'); undefinedCall();</script>"
    )
    rendered = render(page)
    assert rendered.console_lines, rendered.stderr[-2000:]


def test_a_screenshot_of_the_failing_report_is_a_real_image(
    failing_run: tuple[Path, str], tmp_path: Path
) -> None:
    shot = tmp_path / "report.png"
    render(failing_run[0] / "report.html", screenshot=shot)
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 20_000, "a blank page compresses to a few kB"


@pytest.mark.parametrize("name", ["junit.xml", "summary.md", "report.html"])
def test_every_rendering_names_the_replay_command(failing_run: tuple[Path, str], name: str) -> None:
    folder = failing_run[0]
    assert f"harness replay {folder}" in (folder / name).read_text()


def _scenario(folder: Path) -> Scenario:
    return Scenario.model_validate_json((folder / "scenario.json").read_text())
