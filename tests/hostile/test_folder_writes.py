"""The report folder is written safely even when someone else prepared it
(issue 27, defects 1 and 2, and "a report folder in use by another run").

A report folder may be a CI artifact or a checkout anyone wrote. The harness
writes there only through temporary files it creates itself (never through
a link), refuses a path it would write that is a link, a FIFO or a device,
deletes only files at its own names whose content it recorded, and lets one
run at a time write a folder. Each test drives ``harness`` as a user does
and checks the exit code, that no traceback is shown, and that the user's
files (and files outside the folder) are intact.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hostile_folders import SOURCE, cli, folder, main_cli, report, tree

from harness.report import MARKER, write_reports

VICTIM = "export PATH=/usr/bin\n"


def _victim(tmp_path: Path) -> Path:
    path = tmp_path / "home" / ".bashrc"
    path.parent.mkdir()
    path.write_text(VICTIM)
    return path


def _owned(tmp_path: Path) -> Path:
    """A report folder the harness wrote (marker and all)."""
    path = tmp_path / "run"
    path.mkdir()
    write_reports(report(), path)
    return path


def test_a_temporary_name_linked_outside_is_never_written_through(tmp_path: Path) -> None:
    """Defect 1: ``.summary.md.harness-tmp -> ~/.bashrc`` made ``harness
    report`` truncate and overwrite ``~/.bashrc`` with the new summary."""
    victim = _victim(tmp_path)
    run = _owned(tmp_path)
    for name in ("summary.md", "report.json", "report.html", "junit.xml", MARKER):
        (run / f".{name}.harness-tmp").symlink_to(victim)
    code, out, err = main_cli("report", str(run))
    assert code == 1, out + err  # the stored verdict: fail
    assert "Traceback" not in err
    assert victim.read_text() == VICTIM
    assert (run / ".summary.md.harness-tmp").is_symlink(), "a link that is not its own: kept"
    assert (run / "summary.md").is_file() and not (run / "summary.md").is_symlink()


@pytest.mark.parametrize("name", ["summary.md", "report.html", "junit.xml"])
def test_a_rendering_that_is_a_link_is_refused_and_its_target_untouched(
    tmp_path: Path, name: str
) -> None:
    victim = _victim(tmp_path)
    run = _owned(tmp_path)
    (run / name).unlink()
    (run / name).symlink_to(victim)
    code, out, err = main_cli("report", str(run))
    assert code == 2, out + err
    assert "Traceback" not in err
    assert name in err and "symbolic link" in err and "move" in err
    assert victim.read_text() == VICTIM
    assert (run / name).is_symlink()


def test_a_rendering_that_is_a_fifo_is_refused_without_waiting(tmp_path: Path) -> None:
    run = _owned(tmp_path)
    (run / "junit.xml").unlink()
    os.mkfifo(run / "junit.xml")
    proc = cli("report", str(run), cwd=tmp_path, timeout=30)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "FIFO" in proc.stderr
    assert (run / "junit.xml").is_fifo()


def test_a_profile_that_is_shell_code_never_reaches_summary_md(tmp_path: Path) -> None:
    """Defect 1, its second half: ``summary.md`` carried report.json's
    ``profile`` (``$(touch PWNED)``) as it was."""
    run = folder(tmp_path / "run", report(profile="$(touch PWNED)"))
    code, out, err = main_cli("report", str(run))
    assert code == 2, out + err
    assert "Traceback" not in err and "profile" in err
    assert not (run / "summary.md").exists()


def _digest(data: bytes) -> dict[str, object]:
    return {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}


@pytest.mark.parametrize("form", ["list", "digests"])
def test_a_forged_marker_deletes_nothing_of_the_users(tmp_path: Path, form: str) -> None:
    """Defect 2: a marker listing ``notes.md`` and ``src/app.py`` made the
    next write into the folder delete them, exit 0. Forged with the right
    digests too: those are not names the harness writes."""
    out_dir = tmp_path / "merged"
    shards = [folder(tmp_path / f"s{k}", report(shard=(k, 2))) for k in (1, 2)]
    code, out, err = main_cli("merge", *map(str, shards), "--report-dir", str(out_dir))
    assert code == 1, out + err
    mine = {"notes.md": b"my notes\n", "src/app.py": b"print('app')\n"}
    for rel, data in mine.items():
        (out_dir / rel).parent.mkdir(exist_ok=True)
        (out_dir / rel).write_bytes(data)
    marker = json.loads((out_dir / MARKER).read_text())
    if form == "list":  # the older marker format, as the issue forged it
        marker["files"] = sorted([*marker["files"], *mine])
    else:
        marker["files"].update({rel: _digest(data) for rel, data in mine.items()})
    (out_dir / MARKER).write_text(json.dumps(marker))

    code, out, err = main_cli("merge", *map(str, shards), "--report-dir", str(out_dir))
    assert code == 1, out + err
    assert "Traceback" not in err
    for rel, data in mine.items():
        assert (out_dir / rel).read_bytes() == data, rel
    assert "notes.md" in err and "kept" in err  # named in a warning


def test_a_file_the_harness_wrote_and_the_user_changed_is_kept(tmp_path: Path) -> None:
    """Only content the harness recorded is deleted: a counterexample the
    user edited after the run stays (named in a warning)."""
    from harness.report._folder import _Owned

    run = tmp_path / "run"
    owned = _Owned.claim(run)
    owned.write({"failures/2/scenario.json": b"{}\n", "failures/3/scenario.json": b"{}\n"})
    (run / "failures" / "2" / "scenario.json").write_text('{"edited": true}\n')
    owned.keep_only([])
    assert (run / "failures" / "2" / "scenario.json").read_text() == '{"edited": true}\n'
    assert not (run / "failures" / "3").exists(), "unchanged, the harness's: removed"


_HOLD = """
import sys, time
from harness.report import claim_report_folder
claim_report_folder(sys.argv[1])
print("claimed", flush=True)
time.sleep(120)
"""


def test_a_folder_another_run_is_writing_is_refused(tmp_path: Path) -> None:
    """Two runs given one ``--report-dir`` at once: the second is refused
    (exit 2, naming the folder), before it runs anything."""
    run = tmp_path / "r"
    path = os.pathsep.join([str(SOURCE), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(run)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "claimed"
        before = tree(run)
        proc = cli(
            "run", "--adapter", "reference", "--profile", "dev", "--max-examples", "1",
            "--report-dir", str(run), cwd=tmp_path, timeout=120,
        )  # fmt: skip
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "Traceback" not in proc.stderr
        assert str(run) in proc.stderr and "another harness run" in proc.stderr
        assert tree(run) == before
    finally:
        holder.kill()
        holder.communicate()
    # the holder is gone: the folder is free again
    write_reports(report(), run)


def test_a_run_into_a_prepared_folder_overwrites_and_deletes_nothing_of_the_users(
    tmp_path: Path,
) -> None:
    """Both defects on ``harness run``'s own path: a temporary name linked
    to a file outside, and a forged marker listing the user's files."""
    victim = _victim(tmp_path)
    run = _owned(tmp_path)
    (run / ".report.json.harness-tmp").symlink_to(victim)
    (run / "notes.md").write_text("mine\n")
    marker = json.loads((run / MARKER).read_text())
    if isinstance(marker["files"], list):  # an older harness's marker
        marker["files"].append("notes.md")
    else:
        marker["files"]["notes.md"] = _digest(b"mine\n")
    (run / MARKER).write_text(json.dumps(marker))
    proc = cli(
        "run", "--adapter", "reference", "--profile", "dev", "--seed", "1",
        "--max-examples", "1", "--report-dir", str(run), cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert proc.returncode in (0, 3), proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert victim.read_text() == VICTIM
    assert (run / "notes.md").read_text() == "mine\n"
    assert json.loads((run / "report.json").read_text())["scenarios"] >= 1
