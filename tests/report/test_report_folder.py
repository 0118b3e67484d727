"""The report folder belongs to the harness only where it says so: a marker
file lists what the harness wrote, and nothing else there is ever deleted or
overwritten (issue 13, defect 2)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from engine_support import harness_cli

from harness import UsageError
from harness.report import REPORT_FILES, claim_report_folder, write_reports

MARKER = ".harness-report"
#: A short run of the reference runtime: enough to write every file.
QUICK = ("run", "--adapter", "reference", "--profile", "dev", "--seed", "1", "--max-examples", "1")


def _tree(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def test_a_run_into_a_folder_of_the_users_refuses_with_exit_2_and_touches_nothing(
    tmp_path: Path,
) -> None:
    """The reproduction of the issue: ``--report-dir .`` in a folder holding
    ``failures/a.md`` deleted it and exited 0."""
    mine = tmp_path / "p"
    (mine / "failures").mkdir(parents=True)
    (mine / "failures" / "a.md").write_text("x\n")
    (mine / "summary.md").write_text("my own notes\n")
    before = _tree(mine)
    proc = harness_cli(*QUICK, "--report-dir", ".", cwd=mine)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert "not empty" in proc.stderr and "harness run" in proc.stderr
    assert "empty or new folder" in proc.stderr
    assert _tree(mine) == before
    assert sorted(p.name for p in mine.iterdir()) == ["failures", "summary.md"]


def test_a_folder_that_is_not_empty_and_has_no_marker_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine\n")
    with pytest.raises(UsageError) as info:
        claim_report_folder(tmp_path)
    message = str(info.value)
    assert str(tmp_path) in message and "notes.txt" in message
    assert "pick an empty or new folder" in message
    assert not (tmp_path / MARKER).exists()


def test_a_new_or_empty_folder_is_claimed_with_a_marker(tmp_path: Path) -> None:
    new = tmp_path / "a" / "b"
    claim_report_folder(new)
    claim_report_folder(tmp_path / "a" / "b")  # claiming again is fine
    empty = tmp_path / "empty"
    empty.mkdir()
    claim_report_folder(empty)
    for folder in (new, empty):
        marker = json.loads((folder / MARKER).read_text())
        assert not marker["files"] and isinstance(marker["version"], int)
        assert sorted(p.name for p in folder.iterdir()) == [MARKER]


def test_a_report_dir_that_is_a_file_or_under_one_is_refused(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("a file\n")
    for target in (tmp_path / "f", tmp_path / "f" / "sub" / "r"):
        with pytest.raises(UsageError) as info:
            claim_report_folder(target)
        assert "is a file" in str(info.value) and "--report-dir" in str(info.value)
    assert (tmp_path / "f").read_text() == "a file\n"


def test_the_cli_refuses_a_report_dir_under_a_file_with_exit_2(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("a file\n")
    proc = harness_cli(*QUICK, "--report-dir", str(tmp_path / "f" / "r"), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert "is a file" in proc.stderr
    assert (tmp_path / "f").read_text() == "a file\n"


def test_a_report_html_that_is_a_directory_is_refused_before_writing(tmp_path: Path) -> None:
    claim_report_folder(tmp_path)
    (tmp_path / "report.html").mkdir()
    (tmp_path / "report.html" / "keep.txt").write_text("mine\n")
    with pytest.raises(UsageError) as info:
        claim_report_folder(tmp_path)
    assert "report.html" in str(info.value) and "directory" in str(info.value)
    assert (tmp_path / "report.html" / "keep.txt").read_text() == "mine\n"


def test_a_marker_that_lists_paths_outside_the_folder_is_refused(tmp_path: Path) -> None:
    """A run folder may be a downloaded artifact: its marker must not make the
    harness delete anything outside it."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / MARKER).write_text(json.dumps({"version": 1, "files": ["../victim.txt"]}))
    with pytest.raises(UsageError) as info:
        claim_report_folder(folder)
    assert "../victim.txt" in str(info.value)
    assert victim.read_text() == "precious\n"


def test_a_rerun_replaces_what_the_harness_wrote_and_keeps_the_users_files(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "r"
    first = harness_cli(*QUICK, "--report-dir", str(folder), cwd=tmp_path)
    assert first.returncode in (0, 3), first.stdout + first.stderr
    listed = json.loads((folder / MARKER).read_text())["files"]
    assert set(REPORT_FILES) <= set(listed)
    assert {"history.jsonl", "scenario.json", "results.json"} <= set(listed)
    # the user's files, and a stale counterexample an earlier run kept
    (folder / "notes.md").write_text("mine\n")
    (folder / "failures").mkdir()
    (folder / "failures" / "a.md").write_text("x\n")
    stale = folder / "failures" / "7"
    stale.mkdir()
    (stale / "scenario.json").write_text("{}\n")
    marker = json.loads((folder / MARKER).read_text())
    # as an earlier run records what it wrote: the file's digest and size
    digest = {"sha256": hashlib.sha256(b"{}\n").hexdigest(), "size": 3}
    marker["files"]["failures/7/scenario.json"] = digest
    (folder / MARKER).write_text(json.dumps(marker))

    second = harness_cli(*QUICK, "--report-dir", str(folder), cwd=tmp_path)
    assert second.returncode == first.returncode, second.stdout + second.stderr
    assert (folder / "notes.md").read_text() == "mine\n"
    assert (folder / "failures" / "a.md").read_text() == "x\n"
    assert not stale.exists(), "the stale counterexample the harness wrote is removed"
    assert "failures/7/scenario.json" not in json.loads((folder / MARKER).read_text())["files"]
    leftovers = [p.name for p in folder.rglob("*") if "tmp" in p.name]
    assert leftovers == []


def test_a_file_the_marker_does_not_list_is_never_overwritten(run_copy: Path) -> None:
    """``harness report`` re-renders a run folder; a rendering the user
    replaced with a folder of their own is refused with exit 2, and the
    finished run's report.json is kept as it was."""
    before = (run_copy / "report.json").read_bytes()
    (run_copy / "summary.md").unlink()
    (run_copy / "summary.md").mkdir()
    (run_copy / "summary.md" / "mine.md").write_text("mine\n")
    proc = harness_cli("report", str(run_copy), cwd=run_copy)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "summary.md" in proc.stderr
    assert (run_copy / "report.json").read_bytes() == before
    assert (run_copy / "summary.md" / "mine.md").read_text() == "mine\n"


def test_harness_report_adopts_a_run_folder_an_older_harness_wrote(run_copy: Path) -> None:
    """Folders written before the marker existed still re-render: their four
    renderings are the only files replaced, and the folder gains a marker."""
    (run_copy / MARKER).unlink()
    (run_copy / "notes.md").write_text("mine\n")
    report_json = (run_copy / "report.json").read_bytes()
    (run_copy / "junit.xml").unlink()
    proc = harness_cli("report", str(run_copy), cwd=run_copy)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    # the same report, but its replay commands remade from the stored
    # adapter (a folder is data: its stored commands are never shown as is)
    def without_replays(data: bytes) -> list[bytes]:
        return [line for line in data.splitlines() if b"replay" not in line]

    assert without_replays((run_copy / "report.json").read_bytes()) == without_replays(
        report_json
    )
    assert (run_copy / "junit.xml").is_file()
    assert (run_copy / "notes.md").read_text() == "mine\n"
    listed = set(json.loads((run_copy / MARKER).read_text())["files"])
    assert listed == set(REPORT_FILES)


def test_write_reports_writes_report_json_last_through_a_temporary_name(
    run_copy: Path,
) -> None:
    from harness.report import load_report

    report = load_report(run_copy)
    for name in REPORT_FILES:
        (run_copy / name).unlink()
    write_reports(report, run_copy)
    times = {name: (run_copy / name).stat().st_mtime_ns for name in REPORT_FILES}
    assert times["report.json"] == max(times.values())
    assert not [
        p for p in run_copy.iterdir() if p.name.endswith(".tmp") or ".harness-tmp" in p.name
    ]


def test_keep_file_lists_an_extra_file_in_the_marker_and_a_run_replaces_it(
    tmp_path: Path,
) -> None:
    from harness.report._folder import _Owned, keep_file

    (tmp_path / "r").mkdir()
    keep_file(tmp_path / "r", "adapter-error.txt", b"boom\n")
    assert "adapter-error.txt" in json.loads((tmp_path / "r" / MARKER).read_text())["files"]
    (tmp_path / "r" / "notes.md").write_text("mine\n")
    keep_file(tmp_path / "r", "adapter-error.txt", b"boom again\n")
    assert (tmp_path / "r" / "adapter-error.txt").read_bytes() == b"boom again\n"
    owned = _Owned.claim(tmp_path / "r")
    owned.write({"report.json": b"{}\n"})
    owned.keep_only(["report.json"])  # what a finished run does: the stale error goes
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == [MARKER, "notes.md", "report.json"]
