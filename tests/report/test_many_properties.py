"""A report of thousands of properties (a run with many invariants, or a
``report.json`` anyone may have written) lists the first
``PROPERTIES_SHOWN`` in report.html and summary.md, failing ones first, and
says how many more there are; junit.xml keeps a test case for every one;
the verdict and the counts count every property (issue 27: one row per
property in every format made ``harness report`` forty times slower than
reading the report). ``report.json`` keeps them all."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import xmlschema
from engine_support import harness_cli

from harness.report import Report
from harness.report._shown import COUNTEREXAMPLES_SHOWN, NAMES_SHOWN, PROPERTIES_SHOWN

XSD = Path(__file__).resolve().parent / "junit.xsd"

FAILING = 2_000
PASSING = 10
OTHERS = COUNTEREXAMPLES_SHOWN + 7


def _property(name: str, verdict: str) -> dict[str, Any]:
    failed = verdict == "fail"
    return {
        "name": name,
        "verdict": verdict,
        "message": f"{name} {'lost an effect' if failed else 'held'}",
        "witness": [1, 2] if failed else [],
        "counts": {"effects": 2},
        "scenarios": 1,
        "exercised": 1,
        "failed": int(failed),
    }


def _write(folder: Path, properties: list[dict[str, Any]], others: int = 0) -> Report:
    """A failing report of ``properties`` in ``folder``: the main
    counterexample (one step) serves every failing one, ``others`` more
    (two steps, one property each) are kept in failures/N."""
    failing = [p["name"] for p in properties if p["verdict"] == "fail"]
    raw = {
        "verdict": "fail",
        "seed": 1,
        "profile": "dev",
        "adapter": {
            "spec": "reference",
            "options": {},
            "name": "reference",
            "description": {},
            "capabilities": [],
        },
        "duration_seconds": 1.0,
        "scenarios": 3,
        "properties": properties,
        "other_failures": [
            {
                "failed_properties": [failing[i]],
                "counterexample_for": [failing[i]],
                "steps": ["submit refund run r1 for acme", f"kill worker w{i}"],
                "folder": f"failures/{i + 1}",
                "replay": f"harness replay failures/{i + 1}",
            }
            for i in range(others)
        ],
        "faults": {"kill": {"armed": 2, "fired": 1}},
        "absorbed_duplicates": 0,
        "not_tested": [],
        "counterexample": {
            "steps": ["submit refund run r1 for acme"],
            "failed_properties": failing,
            "counterexample_for": failing,
            "replay": "harness replay .",
        },
    }
    report = Report.model_validate(raw)
    folder.mkdir()
    (folder / "report.json").write_text(report.to_json())
    return report


def _rows(html: str, table: str) -> list[str]:
    """The class of each row of the report.html table of class ``table``."""
    body = html[html.index(f'<table class="{table}"') :]
    body = body[: body.index("</table>")]
    return re.findall(r'<tr class="([a-z_ ]+)">', body)


def test_thousands_of_failing_properties_render_the_first_and_count_the_rest(
    tmp_path: Path,
) -> None:
    # the passing ones come first in report.json: the renderings list failures first
    props = [_property(f"held_{i}", "pass") for i in range(PASSING)]
    props += [_property(f"prop_{i:04}", "fail") for i in range(FAILING)]
    folder = tmp_path / "run"
    _write(folder, props, others=OTHERS)

    proc = harness_cli("report", str(folder), cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the stored verdict: a failure

    total = FAILING + PASSING
    more = f"... and {total - PROPERTIES_SHOWN:,} more properties (report.json lists every one)"
    more_failed = f"... and {FAILING - PROPERTIES_SHOWN:,} more failed properties"

    html = (folder / "report.html").read_text()
    assert f"FAIL: {FAILING} of {total} properties failed" in html
    assert _rows(html, "properties") == ["fail"] * PROPERTIES_SHOWN + ["more"]
    assert more in html
    assert "<code>prop_0000</code>" in html and "held_0" not in html
    assert f"<code>prop_{PROPERTIES_SHOWN - 1:04}</code>" in html
    assert f"<code>prop_{PROPERTIES_SHOWN:04}</code>" not in html
    start = html[html.index('id="start-here"') : html.index('id="properties"')]
    assert _rows(start, "start-groups") == ["root"] + ["consequence"] * (PROPERTIES_SHOWN - 1) + [
        "more"
    ]
    assert more_failed in start
    assert f"and {FAILING - 1 - NAMES_SHOWN:,} more." in start  # "so did a, b, ... and N more."
    assert html.count('<section class="scenario">') == 1 + COUNTEREXAMPLES_SHOWN
    assert f"... and {OTHERS - COUNTEREXAMPLES_SHOWN:,} more counterexamples" in html

    md = (folder / "summary.md").read_text()
    assert md.startswith("### ❌ harness: FAIL -- reference")
    table = re.findall(r"^\| `([a-z_0-9]+)` \| (\S+) ", md, re.M)
    assert table == [(f"prop_{i:04}", "❌") for i in range(PROPERTIES_SHOWN)]
    assert f"\n\n{more}\n" in md  # after a blank line: not a row of the table
    assert more_failed in md
    assert len(re.findall(r"^- `prop_\d+`|^  - `prop_\d+`", md, re.M)) == PROPERTIES_SHOWN
    assert f"... and {OTHERS - COUNTEREXAMPLES_SHOWN:,} more counterexamples" in md

    # JUnit: every property a test case, every failure named, the first ones in full
    xmlschema.XMLSchema(str(XSD)).validate(str(folder / "junit.xml"))
    root = ET.parse(folder / "junit.xml").getroot()
    assert root.get("tests") == str(total) and root.get("failures") == str(FAILING)
    cases = root.findall("./testsuite/testcase")
    failed = {c.get("name"): c.find("failure") for c in cases if c.find("failure") is not None}
    assert len(cases) == total
    assert sorted(failed) == [f"prop_{i:04}" for i in range(FAILING)]
    first, last = failed["prop_0000"], failed[f"prop_{FAILING - 1:04}"]
    assert first is not None and last is not None
    assert "minimal counterexample:" in (first.text or "")
    assert (last.get("message") or "") == f"prop_{FAILING - 1:04} lost an effect"
    assert "are in report.json" in (last.text or "")
    full = [c for c in failed.values() if c is not None and "are in report.json" not in c.text]
    assert len(full) == PROPERTIES_SHOWN

    data = json.loads((folder / "report.json").read_text())
    assert data["verdict"] == "fail" and len(data["properties"]) == total


def test_failing_properties_are_listed_before_passing_ones(tmp_path: Path) -> None:
    verdicts = ["pass", "fail", "not_tested", "unknown", "pass", "fail"]
    props = [_property(f"p{i}_{v}", v) for i, v in enumerate(verdicts)]
    folder = tmp_path / "run"
    _write(folder, props)

    proc = harness_cli("report", str(folder), cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr

    order = ["p1_fail", "p5_fail", "p3_unknown", "p0_pass", "p2_not_tested", "p4_pass"]
    html = (folder / "report.html").read_text()
    table = html[html.index('<table class="properties"') :]
    assert re.findall(r"<tr class=\"[a-z_]+\"><td><code>(\w+)</code>", table) == order
    assert "more properties" not in html
    md = (folder / "summary.md").read_text()
    assert re.findall(r"^\| `(\w+)` \|", md, re.M) == order
    assert "more properties" not in md
    # junit.xml keeps the report's order: a test case per property, as listed there
    cases = ET.parse(folder / "junit.xml").getroot().findall("./testsuite/testcase")
    assert [c.get("name") for c in cases] == [p["name"] for p in props]


def test_a_message_holding_the_characters_junit_joins_texts_with_stays_whole(
    tmp_path: Path,
) -> None:
    # junit.xml escapes every name and message in one pass over them joined
    # by control characters; a runtime's message may hold those too
    from harness.report import render_junit

    props = [_property(f"prop_{i}", "fail") for i in range(3)]
    props[1]["message"] = "split \x00\x1e\x00 here <b>"
    report = _write(tmp_path / "run", props)
    root = ET.fromstring(render_junit(report, tmp_path / "run"))
    messages = [f.get("message") for f in root.iter("failure")]
    assert messages == [
        "prop_0 lost an effect",
        "split \\x00\\x1e\\x00 here <b>",
        "prop_2 lost an effect",
    ]
