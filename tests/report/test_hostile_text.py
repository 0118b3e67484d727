"""Runtime strings are hostile: control characters, markup, Markdown, lone
surrogates, bytes that are not UTF-8. Every report format stays well formed
and safe to show, and nothing crashes (issue 13, defects 5 and 8)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema
from engine_support import ENGINE_DIR, harness_cli, subprocess_env
from hostile_runtime import HOSTILE

from harness.history import History, HistoryWriter
from harness.report import load_report, write_reports
from harness.report._schema import Report

HERE = Path(__file__).resolve().parent
XSD = HERE / "junit.xsd"
#: Characters XML 1.0 forbids (besides tab, newline and carriage return).
FORBIDDEN_IN_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def _hostile(report: Report) -> Report:
    """``report`` with runtime-sourced strings replaced by :data:`HOSTILE`."""
    props = [
        p.model_copy(update={"message": f"{p.message} {HOSTILE}", "reason": HOSTILE})
        for p in report.properties
    ]
    ce = report.counterexample
    assert ce is not None
    adapter = report.adapter.model_copy(
        update={"name": f"broken{HOSTILE}", "description": {"note": HOSTILE, "fixed": False}}
    )
    return report.model_copy(
        update={
            "properties": props,
            "adapter": adapter,
            "inconclusive": [HOSTILE],
            "counterexample": ce.model_copy(update={"steps": [*ce.steps, f"step {HOSTILE}"]}),
        }
    )


@pytest.fixture
def hostile_folder(run_copy: Path) -> Path:
    write_reports(_hostile(load_report(run_copy)), run_copy)
    return run_copy


def test_junit_with_hostile_strings_is_well_formed_and_validates(hostile_folder: Path) -> None:
    data = (hostile_folder / "junit.xml").read_bytes()
    text = data.decode("utf-8")
    assert not FORBIDDEN_IN_XML.search(text)
    root = ET.fromstring(data)
    xmlschema.XMLSchema(str(XSD)).validate(str(hostile_folder / "junit.xml"))
    failure = next(c for c in root.iter("failure"))
    # the readable part survives, as text
    assert "<img src=x onerror=alert(1)>|`" in (failure.get("message") or "")
    assert "step " in (failure.text or "")


def test_summary_md_with_hostile_strings_escapes_html_and_keeps_its_table(
    hostile_folder: Path,
) -> None:
    text = (hostile_folder / "summary.md").read_bytes().decode("utf-8")
    assert "<img" not in text
    assert "\x00" not in text and "\x1b" not in text
    assert not re.search("[\ud800-\udfff]", text)
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert len(rows) == 10
    for row in rows:
        cells = re.split(r"(?<!\\)\|", row)
        assert len(cells) == 5, row  # "", property, verdict, message, ""
    # a backtick in runtime text cannot open a code span
    assert "`<" not in text and "|`" not in text


def test_a_non_utf8_line_in_history_is_skipped_and_counted(run_copy: Path) -> None:
    path = run_copy / "history.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join([*lines[:2], b'{"index": 2, "f": "\xff\xfe"}\n', *lines[2:]]))
    history = History.load(path)
    assert len(history) == len(lines)
    undecodable = [p for p in history.problems if "UTF-8" in p]
    assert len(undecodable) == 1 and "history.jsonl:3" in undecodable[0]
    proc = harness_cli("report", str(run_copy), cwd=run_copy)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    html = (run_copy / "report.html").read_text()
    assert "Unreadable history lines were skipped" in html and "history.jsonl:3" in html


def test_the_history_writer_records_a_lone_surrogate_as_readable_text(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as writer:
        writer.append("ok", "submit", "harness", {"run_id": "r0", "error": HOSTILE}, 0.0)
    path.read_bytes().decode("utf-8")  # valid UTF-8
    (event,) = History.load(path, strict=True)
    assert event.value["error"] == HOSTILE.replace("\ud800", "\\ud800")


def test_a_run_whose_runtime_says_hostile_things_writes_every_format(tmp_path: Path) -> None:
    """A lone surrogate in a runtime string used to crash ``harness run`` in
    the history writer, and (in the adapter's description) after the whole
    run, writing the report."""
    env = subprocess_env({"HARNESS_TARGETED": "0"})
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(ENGINE_DIR), env["PYTHONPATH"]])
    folder = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "run",
            "--adapter",
            "hostile_runtime:HostileAdapter",
            "--adapter-opt",
            "fixed=true",
            "--profile",
            "ci",
            "--max-examples",
            "3",
            "--report-dir",
            str(folder),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        timeout=300,
        check=False,
    )
    stdout, stderr = proc.stdout.decode(), proc.stderr.decode()
    assert proc.returncode == 0, stdout + stderr
    assert "Traceback" not in stderr
    report = json.loads((folder / "report.json").read_text())
    assert "onerror" in report["adapter"]["description"]["note"]
    for line in (folder / "history.jsonl").read_bytes().decode("utf-8").splitlines():
        json.loads(line)
    assert not History.load(folder / "history.jsonl").problems
    ET.parse(folder / "junit.xml")
    assert "<img" not in (folder / "summary.md").read_bytes().decode("utf-8")
    assert "<img" not in (folder / "report.html").read_bytes().decode("utf-8")
