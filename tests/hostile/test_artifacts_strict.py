"""Artifacts are read safely and strictly (issue 27, defects 7, 9 and 10).

A report folder, a shard's folder or a scenario file may come from anyone.
Every reader opens regular files only (a FIFO hung ``merge``, ``report``,
``replay`` and ``--scenario`` forever; ``report.json -> /dev/zero`` read
until memory ran out), with a size cap; JSON is strict (``NaN`` and
``Infinity`` are not JSON: a merge wrote them into its report.json), counts
are not negative, a shard is K of N with K <= N, and ``merge`` validates
every shard before it writes anything. Each case drives ``harness`` as a
user does and checks the exit code, the message, that no traceback is
shown, and that nothing was written.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hostile_folders import cli, folder, main_cli, raw_folder, report
from pydantic import ValidationError

from harness.report import write_reports


def _no_traceback(proc: Any) -> None:
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout


@pytest.mark.parametrize("command", ["report", "replay", "merge"])
def test_a_report_json_that_is_a_fifo_is_refused_without_waiting(
    tmp_path: Path, command: str
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    os.mkfifo(run / "report.json")
    args = {
        "report": ["report", str(run)],
        "replay": ["replay", str(run)],
        "merge": ["merge", str(run), "--report-dir", str(tmp_path / "out")],
    }[command]
    proc = cli(*args, cwd=tmp_path, timeout=30)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    _no_traceback(proc)
    assert "report.json is a FIFO" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_a_report_json_linked_to_dev_zero_is_refused(tmp_path: Path) -> None:
    """It was read until memory ran out (a MemoryError traceback)."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "report.json").symlink_to("/dev/zero")
    proc = cli("report", str(run), cwd=tmp_path, timeout=30)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    _no_traceback(proc)
    assert "report.json" in proc.stderr and "not read" in proc.stderr


def test_a_report_json_larger_than_the_cap_is_refused_and_says_how_to_raise_it(
    tmp_path: Path,
) -> None:
    run = folder(tmp_path / "run")
    proc = cli(
        "report", str(run), cwd=tmp_path, env={"HARNESS_MAX_ARTIFACT_BYTES": "100"}
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    _no_traceback(proc)
    assert "more than the 100 bytes" in proc.stderr and "HARNESS_MAX_ARTIFACT_BYTES" in proc.stderr


@pytest.mark.parametrize("where", ["scenario", "scenario-folder"])
def test_a_scenario_file_that_is_a_fifo_is_refused_without_waiting(
    tmp_path: Path, where: str
) -> None:
    holder = tmp_path / "scenarios"
    holder.mkdir()
    os.mkfifo(holder / "s.json")
    given = holder if where == "scenario-folder" else holder / "s.json"
    proc = cli(
        "run", "--adapter", "reference", "--profile", "dev", "--max-examples", "1",
        "--scenario", str(given), "--report-dir", str(tmp_path / "r"), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    _no_traceback(proc)
    assert "FIFO" in proc.stderr
    assert not (tmp_path / "r" / "report.json").exists()


def test_a_deeply_nested_scenario_file_is_refused_with_a_message(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    proc = cli("replay", str(deep), "--adapter", "reference", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    _no_traceback(proc)
    assert "nested too deeply" in proc.stderr


def _shard(tmp_path: Path, k: int, n: int = 2, **change: Any) -> Path:
    raw = report(shard=(k, n)).model_dump(mode="json")
    for dotted, value in change.items():
        where = raw
        *path, last = dotted.split("__")
        for key in path:
            where = where[int(key)] if isinstance(where, list) else where[key]
        where[last] = value
    return raw_folder(tmp_path / f"shard{k}", raw)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        pytest.param({"duration_seconds": float("nan")}, "NaN is not a JSON number", id="nan"),
        pytest.param({"slowest_seconds": float("inf")}, "Infinity", id="infinity"),
        pytest.param({"scenarios": -5}, "scenarios is negative", id="negative-count"),
        pytest.param(
            {"properties__0__failed": -1}, "properties.0.failed is negative", id="negative-nested"
        ),
        pytest.param({"shard__k": 99}, "shard.k 99 is more than shard.n 2", id="k-above-n"),
    ],
)
def test_merge_refuses_a_shard_with_nonsense_numbers_and_writes_nothing(
    tmp_path: Path, change: dict[str, Any], says: str
) -> None:
    good = _shard(tmp_path, 1)
    bad = _shard(tmp_path, 2, **change)
    out = tmp_path / "merged"
    code, stdout, err = main_cli("merge", str(good), str(bad), "--report-dir", str(out))
    assert code == 2, stdout + err
    assert "Traceback" not in err
    assert says in err and str(bad) in err
    assert not out.exists()


@pytest.mark.parametrize(
    ("line", "says"),
    [
        pytest.param({"id": ["a", "b"], "phase": "search", "n": 1}, "id is list", id="id-a-list"),
        pytest.param({"id": "ab", "failed": [1]}, "failed is not a list", id="failed-numbers"),
        pytest.param({"id": "ab", "n": -1}, "n is negative", id="negative-n"),
        pytest.param([1, 2], "not a JSON object", id="not-an-object"),
    ],
)
def test_merge_refuses_a_junk_scenarios_jsonl_and_writes_nothing(
    tmp_path: Path, line: Any, says: str
) -> None:
    good = _shard(tmp_path, 1)
    bad = _shard(tmp_path, 2)
    (bad / "scenarios.jsonl").write_text(json.dumps(line) + "\n")
    out = tmp_path / "merged"
    code, stdout, err = main_cli("merge", str(good), str(bad), "--report-dir", str(out))
    assert code == 2, stdout + err
    assert "Traceback" not in err
    assert "scenarios.jsonl:1" in err and says in err
    assert not out.exists()


def test_a_merged_report_json_is_strict_json(tmp_path: Path) -> None:
    """Whatever the shards said, what merge writes parses with a strict
    parser (NaN and Infinity refused), and a report cannot hold them."""
    shards = [_shard(tmp_path, k) for k in (1, 2)]
    out = tmp_path / "merged"
    code, stdout, err = main_cli("merge", *map(str, shards), "--report-dir", str(out))
    assert code == 1, stdout + err

    def refuse(name: str) -> None:
        raise ValueError(name)

    json.loads((out / "report.json").read_text(), parse_constant=refuse)
    with pytest.raises(ValidationError):
        report().model_copy(update={}).model_validate(
            {**report().model_dump(mode="json"), "duration_seconds": float("nan")}
        )


def test_junit_grows_with_the_report_not_with_its_square(tmp_path: Path) -> None:
    """``harness report`` of a 200 MB report.json took over 300 s: every
    failed property repeated its counterexample's steps in junit.xml (here
    300 properties x 300 steps). Each counterexample is shown once, its
    first STEPS_SHOWN steps and a count of the rest."""
    run = tmp_path / "run"
    run.mkdir()
    write_reports(report(properties=300, steps=300), run)
    size = (run / "report.json").stat().st_size
    assert (run / "junit.xml").stat().st_size < 2 * size
    text = (run / "junit.xml").read_text()
    assert text.count("submit refund run r99 for acme") == 1  # the 100th step
    assert "submit refund run r100 for acme" not in text
    assert text.count("... and 200 more steps") == 1
    assert "the one shown with prop_0 (300 steps)" in text


def test_a_linked_folder_does_not_bring_outside_files_into_the_report(tmp_path: Path) -> None:
    """``failures -> /elsewhere``: what lies outside the report folder is not
    read into report.html (each path a report names stays inside it, links
    on the way included)."""
    from harness.model import PropertyResult, Verdict
    from harness.report._schema import OtherFailure

    outside = tmp_path / "elsewhere" / "1"
    outside.mkdir(parents=True)
    secret = PropertyResult(name="prop_0", verdict=Verdict.FAIL, message="SECRET-TOKEN-42")
    (outside / "results.json").write_text(json.dumps([secret.model_dump(mode="json")]))
    other = OtherFailure(failed_properties=["prop_0"], steps=["a"], folder="failures/1")
    run = folder(tmp_path / "run", report().model_copy(update={"other_failures": [other]}))
    (run / "failures").symlink_to(tmp_path / "elsewhere")
    code, out, err = main_cli("report", str(run))
    assert code == 1, out + err
    assert "Traceback" not in err
    assert "SECRET-TOKEN-42" not in (run / "report.html").read_text()


def test_merge_refuses_an_oversized_shard_file_before_writing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shard file past the cap is refused while the shards are checked,
    not halfway through writing the merged folder."""
    good = _shard(tmp_path, 1)
    bad = _shard(tmp_path, 2)
    (bad / "history.jsonl").write_bytes(b"x" * 20_000)
    monkeypatch.setenv("HARNESS_MAX_ARTIFACT_BYTES", "10000")
    out = tmp_path / "merged"
    code, stdout, err = main_cli("merge", str(good), str(bad), "--report-dir", str(out))
    assert code == 2, stdout + err
    assert "Traceback" not in err
    assert "history.jsonl is 20000 bytes" in err and "HARNESS_MAX_ARTIFACT_BYTES" in err
    assert not out.exists()
