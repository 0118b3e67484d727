"""The command line's contract: usage errors exit 2 and say what, why and how to fix.

Each case runs ``harness`` as a subprocess, as a script would.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from engine_support import BROKEN, harness_cli

from harness.checkers import CHECKERS
from harness.scenarios import FAMILIES

RUN = ("run", "--profile", "dev", "--max-examples", "1")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        pytest.param(
            ("--adapter", "nosuch"),
            ["'nosuch'", "neither an installed adapter", "package.module:attr", "example"],
            id="unknown-adapter",
        ),
        pytest.param(
            ("--adapter", "broken_runtime:NoSuchAdapter"),
            ["'NoSuchAdapter'", "no attribute", "it offers broken_runtime:BrokenAdapter"],
            id="missing-attribute",
        ),
        pytest.param(
            ("--adapter", "no_such_module_here:Adapter"),
            ["'no_such_module_here'", "cannot import", "PYTHONPATH"],
            id="missing-module",
        ),
        pytest.param(
            ("--adapter", "reference", "--adapter-opt", "backend"),
            ["'backend'", "is not KEY=VALUE", "backend=postgres"],
            id="option-without-equals",
        ),
        pytest.param(
            ("--adapter", "reference", "--adapter-opt", "colour=blue"),
            ["no option colour", "known options:", "backend"],
            id="unknown-reference-option",
        ),
        pytest.param(
            ("--adapter", BROKEN, "--adapter-opt", "fixed=maybe"),
            ["fixed='maybe'", "say true or false"],
            id="bad-option-value",
        ),
        pytest.param(
            ("--adapter", BROKEN, "--adapter-opt", "speed=11"),
            ["rejected the options", "speed"],
            id="unknown-option-of-a-custom-adapter",
        ),
    ],
)
def test_a_bad_adapter_or_option_exits_2_and_says_what_to_fix(
    tmp_path: Path, args: tuple[str, ...], says: list[str]
) -> None:
    proc = harness_cli(*RUN, "--report-dir", str(tmp_path / "r"), *args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith("harness: error: "), proc.stderr
    assert "Traceback" not in proc.stderr
    for fragment in says:
        assert fragment in proc.stderr, (fragment, proc.stderr)
    assert not (tmp_path / "r" / "report.json").exists(), "nothing ran"


@pytest.fixture
def run_folder(broken_ci_run: tuple[subprocess.CompletedProcess[str], Path]) -> Path:
    """A complete run folder (the broken runtime, one failing example;
    tests/conftest.py: one run per session)."""
    proc, folder = broken_ci_run
    assert proc.returncode == 1, proc.stdout + proc.stderr
    return folder


def _copy(run_folder: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "copy"
    shutil.copytree(run_folder, dest)
    return dest


def test_replay_of_a_missing_folder_exits_2_and_asks_for_a_run_folder(tmp_path: Path) -> None:
    proc = harness_cli("replay", str(tmp_path / "nowhere"), cwd=tmp_path)
    assert proc.returncode == 2
    assert "nowhere is not a folder" in proc.stderr
    assert "--report-dir of a harness run" in proc.stderr


def test_replay_of_a_folder_without_a_report_exits_2_and_names_the_missing_file(
    tmp_path: Path,
) -> None:
    proc = harness_cli("replay", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2
    assert "report.json is missing" in proc.stderr
    assert "harness run" in proc.stderr


def test_replay_of_a_corrupt_report_exits_2_and_says_to_run_again(
    run_folder: Path, tmp_path: Path
) -> None:
    folder = _copy(run_folder, tmp_path)
    (folder / "report.json").write_text('{"schema_version": 1, "adapter": ')
    proc = harness_cli("replay", str(folder), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "report.json is corrupt" in proc.stderr
    assert "harness run --report-dir" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_replay_of_a_report_that_is_json_but_not_a_report_exits_2(
    run_folder: Path, tmp_path: Path
) -> None:
    folder = _copy(run_folder, tmp_path)
    (folder / "report.json").write_text("[1, 2, 3]")
    proc = harness_cli("replay", str(folder), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "is not a harness report" in proc.stderr


def test_replay_of_a_report_from_a_newer_harness_exits_2_and_says_to_upgrade(
    run_folder: Path, tmp_path: Path
) -> None:
    folder = _copy(run_folder, tmp_path)
    report = json.loads((folder / "report.json").read_text())
    report["schema_version"] = 99
    (folder / "report.json").write_text(json.dumps(report))
    # A newer harness may also write scenarios this one cannot parse: the
    # answer must still be "upgrade", not "corrupt".
    scenario = json.loads((folder / "scenario.json").read_text())
    scenario["schema_version"] = 99
    scenario["steps"][0]["from_the_future"] = True
    (folder / "scenario.json").write_text(json.dumps(scenario))
    proc = harness_cli("replay", str(folder), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "newer harness (report schema 99" in proc.stderr
    assert "upgrade stateful-agent-harness" in proc.stderr


def test_replay_of_a_scenario_from_a_newer_harness_exits_2_and_says_to_upgrade(
    run_folder: Path, tmp_path: Path
) -> None:
    folder = _copy(run_folder, tmp_path)
    scenario = json.loads((folder / "scenario.json").read_text())
    scenario["schema_version"] = 99
    (folder / "scenario.json").write_text(json.dumps(scenario))
    proc = harness_cli("replay", str(folder), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "scenario schema 99" in proc.stderr
    assert "upgrade stateful-agent-harness" in proc.stderr


def test_an_unknown_command_or_profile_exits_2_with_argparse_usage(tmp_path: Path) -> None:
    for args in (("frobnicate",), ("run", "--adapter", "reference", "--profile", "fast")):
        proc = harness_cli(*args, cwd=tmp_path)
        assert proc.returncode == 2, args
        assert "usage: harness" in proc.stderr


def test_list_properties_prints_every_checker(tmp_path: Path) -> None:
    proc = harness_cli("list", "properties", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    listed = [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]
    assert listed == list(CHECKERS)


def test_list_faults_prints_every_family(tmp_path: Path) -> None:
    proc = harness_cli("list", "faults", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    listed = [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]
    assert listed == list(FAMILIES)


def test_list_adapters_prints_the_reference_adapter_and_the_custom_form(tmp_path: Path) -> None:
    proc = harness_cli("list", "adapters", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0].startswith("reference ")
    assert "package.module:attr" in proc.stdout


def test_a_reader_that_goes_away_ends_a_listing_without_a_traceback() -> None:
    # ``harness list faults | head -0``: the pipe's reader is gone before the
    # listing is written, so every write fails with EPIPE
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run(
            [shutil.which("harness") or "harness", "list", "faults"],
            stdout=write,
            stderr=subprocess.PIPE,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write)
    err = proc.stderr.decode()
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert proc.returncode == 141, (proc.returncode, err)
