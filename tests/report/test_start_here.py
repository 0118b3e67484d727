"""A failing report starts with what to do (issue 29): "start here".

The first block of report.html and summary.md of a FAIL names the property
to read first, the shortest counterexample, the command that replays it,
and every failure by property with a one-line hint of what such a failure
usually means (from the property's doc); the timeline explains its lanes.
Checked on a real run of the reference runtime with a seeded bug, and the
HTML in headless Chromium.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from chromium_support import render
from engine_support import harness_cli

from harness.checkers import BUILTIN
from harness.report import load_report, render_markdown
from harness.report._markdown import md_text
from harness.report._schema import OtherFailure
from harness.report._start import hint_of, start_here
from harness.report._timeline import lane_role

BUG = "no-idempotency-key"  # harness list bugs: breaks exactly_once_effects


@pytest.fixture(scope="module")
def bug_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    folder = tmp_path_factory.mktemp("start-here") / "r"
    proc = harness_cli(
        "run", "--adapter", "reference", "--adapter-opt", f"bug={BUG}",
        "--profile", "dev", "--seed", "3", "--max-examples", "6",
        "--report-dir", str(folder), cwd=folder.parent,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    return folder, proc


def test_summary_md_starts_with_the_property_its_counterexample_and_replay(
    bug_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    folder, _ = bug_run
    report = json.loads((folder / "report.json").read_text())
    ce = report["counterexample"]
    md = (folder / "summary.md").read_text()
    lines = md.splitlines()
    # the title, then at once the block
    assert lines[0].startswith("### ") and "FAIL" in lines[0]
    assert lines[2].startswith("**Start here:** `exactly_once_effects` failed"), lines[2]
    block = md[: md.index("| property | verdict |")]
    assert "*What it usually means:* a call was sent again" in block
    assert f"The shortest counterexample, {len(ce['steps'])} steps" in block
    for i, step in enumerate(ce["steps"], 1):
        assert f"{i}. {md_text(step)}" in block
    assert ce["replay"] in block
    # every failed property once, each with its hint, grouped under the first
    failed = [p["name"] for p in report["properties"] if p["verdict"] == "fail"]
    listed = re.findall(r"^\s*- `([a-z_]+)`", block[block.index("Every failure") :], re.M)
    assert sorted(listed) == sorted(failed)
    assert listed[0] == "exactly_once_effects"


def test_report_html_opens_on_the_start_here_block_in_a_browser(
    bug_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    folder, _ = bug_run
    report = json.loads((folder / "report.json").read_text())
    dom = render(folder / "report.html").dom
    main = dom[dom.index("<main>") :]
    # the first thing in <main>, before the properties table
    assert main.index('id="start-here"') < main.index('id="properties"')
    assert re.search(r'<main>\s*<section class="start-here" id="start-here">', dom)
    start = main[main.index('id="start-here"') : main.index("</section>")]
    assert "<code>exactly_once_effects</code> failed" in start
    replay = re.search(r'id="start-replay"><code>(.*?)</code>', start, re.S)
    assert replay is not None and replay.group(1) == report["counterexample"]["replay"]
    assert "What it usually means:" in start
    for p in (p for p in report["properties"] if p["verdict"] == "fail"):
        assert f"<code>{p['name']}</code>" in start


def test_the_timeline_says_what_each_lane_is(
    bug_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    folder, _ = bug_run
    dom = render(folder / "report.html").dom
    lanes = dom[dom.index('<dl class="lanes">') :]
    lanes = lanes[: lanes.index("</dl>")]
    for name, what in [
        ("runner", "runs submitted"),
        ("nemesis", "faults"),
        ("world", "external services"),
        ("q0", "worker process q0: a worker of the final quiesce"),
    ]:
        assert re.search(rf"<dt><code>{name}</code></dt><dd>[^<]*{what}", lanes), (name, lanes)
    # a worker a step starts (the shrunk counterexample may keep none: the
    # quiesce's do the work)
    assert lane_role("w1", frozenset({"w1"})) == (
        "worker process w1: started by a step of the scenario"
    )


def test_every_built_in_property_has_a_hint_in_its_doc() -> None:
    for name, p in BUILTIN.items():
        assert "A failure usually means:" in p.doc, name
        hint = hint_of(p.doc)
        assert hint is not None and "\n" not in hint and len(hint) < 300, name


def test_a_doc_without_a_hint_paragraph_gives_its_first_line() -> None:
    assert hint_of("Orders never ship twice.\n\nMore text.") == "Orders never ship twice."
    doc = "Orders never ship twice.\n\n    A failure usually means: the\n    queue redelivered.\n"
    assert hint_of(doc) == "the queue redelivered."
    assert hint_of(None) is None and hint_of("  ") is None


def test_the_shortest_counterexample_comes_first_and_a_pass_has_no_block(
    bug_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    folder, _ = bug_run
    report = load_report(folder)
    main_steps = len(report.counterexample.steps) if report.counterexample else 0
    # another failure, shorter than the main one, of a property that failed
    other = OtherFailure(
        failed_properties=["state_equivalence"],
        counterexample_for=["state_equivalence"],
        steps=["submit run r1", "start worker w1"][: max(main_steps - 1, 1)],
        replay="harness replay r/failures/1",
        folder="failures/1",
    )
    shorter = report.model_copy(update={"other_failures": [other]})
    start = start_here(shorter)
    assert start is not None
    assert start.first.first.name == "state_equivalence"
    assert start.first.replay == "harness replay r/failures/1"
    # state_equivalence is listed once, under its own counterexample
    names = [p.name for g in start.groups for p in g.properties]
    assert names.count("state_equivalence") == 1
    md = render_markdown(shorter)
    assert "**Start here:** `state_equivalence` failed" in md
    assert start_here(report.model_copy(update={"verdict": "pass"})) is None
