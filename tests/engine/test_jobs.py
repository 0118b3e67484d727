"""``harness run --jobs N``: one search in N processes, one report.

Real runs of the reference runtime by the command line (small plans:
``--profile dev --max-examples 20 --seed 2``), compared with the same search
in one process through each run folder's ``scenarios.jsonl`` (every scenario
run: its id and its history's SHA-256).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from engine_support import harness_cli, subprocess_env

from harness._errors import UsageError
from harness._jobs import job_args, job_settings
from harness._settings import (
    SCENARIOS_PER_JOB,
    Settings,
    load_settings,
    parse_jobs,
    resolve_jobs,
)
from harness.outcome._verdicts import KIND_FAMILY

PLAN = ("--profile", "dev", "--max-examples", "20", "--seed", "2", "--budget", "600")
BUG = ("--adapter-opt", "bug=no-idempotency-key")


def _json(folder: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / "report.json").read_text())
    return data


def _ledger(folder: Path, phase: str = "search") -> list[dict[str, Any]]:
    lines = (folder / "scenarios.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["phase"] == phase]


def _verdicts(report: dict[str, Any]) -> dict[str, str]:
    return {p["name"]: p["verdict"] for p in report["properties"]}


def _counts(report: dict[str, Any]) -> dict[str, tuple[int, int, int, int]]:
    keys = ("scenarios", "exercised", "failed", "unknown")
    return {p["name"]: tuple(p[k] for k in keys) for p in report["properties"]}  # type: ignore[misc]


@pytest.fixture(scope="module")
def one_and_two(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The same search run with --jobs 1 and --jobs 2."""
    root = tmp_path_factory.mktemp("jobs")
    folders = []
    for n in (1, 2):
        folder = root / f"jobs{n}"
        proc = harness_cli(
            "run", "--adapter", "reference", *PLAN, "--jobs", str(n),
            "--report-dir", str(folder), cwd=root,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr
        folders.append(folder)
    return folders[0], folders[1]


def test_two_jobs_run_the_plan_of_one_with_the_same_histories_and_verdicts(
    one_and_two: tuple[Path, Path],
) -> None:
    one, two = one_and_two
    ran_one, ran_two = _ledger(one), _ledger(two)
    assert len(ran_one) == 20
    # Every scenario of the one-process plan, exactly once, in one job or the other.
    assert sorted(e["id"] for e in ran_two) == sorted(e["id"] for e in ran_one)
    assert {e["shard"] for e in ran_two} == {1, 2}
    # The merged ledger lists them in the plan's order, whichever job ran each.
    assert [e["index"] for e in ran_two] == list(range(20))
    assert [e["id"] for e in ran_two] == [e["id"] for e in ran_one]

    # Each scenario's history is byte-identical (its SHA-256) whatever N, but
    # for the race family's: two workers racing on purpose, timed by the OS.
    def histories(ran: list[dict[str, Any]]) -> dict[str, str]:
        return {
            e["id"]: e["history"]
            for e in ran
            if not any(KIND_FAMILY.get(k) == "race" for k in e["faults"])
        }

    assert len(histories(ran_one)) >= 15
    assert histories(ran_two) == histories(ran_one)
    r1, r2 = _json(one), _json(two)
    assert r2["verdict"] == r1["verdict"] == "pass"
    assert _verdicts(r2) == _verdicts(r1)
    # The evidence, summed over the jobs, is one process's (a race's may vary).
    assert {k: v[0] for k, v in _counts(r2).items()} == {k: 20 for k in _counts(r1)}
    failed = {e["id"]: e["failed"] for e in ran_one}
    assert {e["id"]: e["failed"] for e in ran_two} == failed
    assert r2["merged"]["shards"] == [1, 2] and r2["merged"]["missing"] == []
    assert r2["planned_scenarios"] == r2["searched_scenarios"] == 20
    for name in ("report.html", "junit.xml", "summary.md"):
        assert (two / name).is_file()


def test_a_bug_fails_every_n_alike_and_the_counterexample_replays(tmp_path: Path) -> None:
    reports = {}
    for n in (1, 2):
        folder = tmp_path / f"bug{n}"
        proc = harness_cli(
            "run", "--adapter", "reference", *BUG, *PLAN, "--jobs", str(n),
            "--report-dir", str(folder), cwd=tmp_path,
        )  # fmt: skip
        assert proc.returncode == 1, proc.stdout + proc.stderr
        reports[n] = _json(folder)
    assert _verdicts(reports[2]) == _verdicts(reports[1])
    assert "fail" in _verdicts(reports[2]).values()
    replay = reports[2]["counterexample"]["replay"]
    assert replay.startswith(f"harness replay {tmp_path / 'bug2' / 'shards'}")
    proc = harness_cli(*replay.split()[1:], cwd=tmp_path)
    assert proc.returncode == 1 and "reproduced:" in proc.stdout, proc.stdout + proc.stderr


def test_a_job_searches_with_every_setting_of_its_parent(tmp_path: Path) -> None:
    """A setting the parent does not hand on takes its default in the jobs
    (``--shrink-budget`` once did): every one is handed on, but for what
    makes a job one shard of the run."""
    own = {"seed", "shard", "jobs", "report_dir", "example_db"}
    parent = Settings(
        profile="ci", max_examples=33, budget_seconds=77.0, shrink_budget_seconds=9.0,
        derandomize=True, seed=None, max_runs=3, max_episodes=6, families=("crash", "clock"),
        report_dir=str(tmp_path / "r"), exhaustive=True, mode="random-kill", targeted=False,
        stop_on_first=True, shard=None, jobs=2, example_db="db", worker_timeout=12.0,
        determinism_runs=3,
    )  # fmt: skip
    defaults = Settings()
    # every setting differs from its default here, so none can be lost unseen
    assert [f.name for f in fields(Settings) if f.name not in own] == [
        f.name
        for f in fields(Settings)
        if f.name not in own and getattr(parent, f.name) != getattr(defaults, f.name)
    ]
    args = job_args("reference", {"k": "v"}, parent, 5, [tmp_path / "a.json"], (2, 3), tmp_path)
    got = job_settings(json.loads(json.dumps(args)))
    assert got == parent.with_(
        seed=5, shard=(2, 3), jobs=1, report_dir=str(tmp_path), example_db=None
    )
    assert got.shrink_budget_seconds == 9.0
    assert args["options"] == {"k": "v"} and args["scenarios"] == [str(tmp_path / "a.json")]


def test_the_shrink_budget_reaches_the_jobs(tmp_path: Path) -> None:
    """No time for shrinking: each job keeps its failure unshrunk and says
    so (with the default, a quarter of --budget, the toy's shrinks at once)."""
    proc = harness_cli(
        "run", "--adapter", "upgrade_toy:UpgradeToy", "--adapter-opt", "keyed=twice",
        "--profile", "dev", "--seed", "0", "--no-targeted", "--budget", "0.001",
        "--shrink-budget", "0", "--jobs", "2", "--report-dir", str(tmp_path / "r"),
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = _json(tmp_path / "r")
    assert report["merged"]["shards"] == [1, 2]
    assert report["counterexample"]["fully_shrunk"] is False, report["counterexample"]


@pytest.mark.parametrize("value", ["0", "-1", "x", "1.5", "257", ""])
def test_a_bad_number_of_jobs_exits_2_and_says_how_to_give_one(value: str, tmp_path: Path) -> None:
    proc = harness_cli(
        "run", "--adapter", "reference", *PLAN, f"--jobs={value}",
        "--report-dir", str(tmp_path / "r"), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith("harness: error: jobs "), proc.stderr
    assert "--jobs 2" in proc.stderr and "--jobs auto" in proc.stderr
    assert not (tmp_path / "r" / "report.json").exists()


def test_jobs_from_the_environment_are_checked_like_the_flag() -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HARNESS_JOBS", "none-of-that")
        with pytest.raises(UsageError, match=r"jobs 'none-of-that' from the environment"):
            load_settings("dev")
        mp.setenv("HARNESS_JOBS", "3")
        assert load_settings("dev").jobs == 3
        mp.setenv("HARNESS_JOBS", "auto")
        assert load_settings("dev").jobs is None


def test_auto_is_one_job_per_usable_core_and_never_a_tiny_share() -> None:
    assert parse_jobs("auto") is None and parse_jobs("4") == 4
    cores = len(os.sched_getaffinity(0))
    assert load_settings("dev").jobs == 1 == load_settings("ci").jobs, "today's default"
    assert load_settings("thorough").jobs is None
    big = load_settings("thorough", max_examples=SCENARIOS_PER_JOB * 1000)
    assert resolve_jobs(big) == cores
    small = load_settings("thorough", max_examples=SCENARIOS_PER_JOB * 2 - 1)
    assert resolve_jobs(small) == 1
    assert resolve_jobs(load_settings("dev", max_examples=12, jobs="auto")) == 1


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        (("--exhaustive", "refund"), "have no plan to split"),
        (("--mode", "random-kill"), "have no plan to split"),
        (("--shard", "1/2"), "already runs one part of the plan"),
    ],
)
def test_jobs_where_there_is_no_plan_to_split_are_refused(
    extra: tuple[str, ...], why: str, tmp_path: Path
) -> None:
    proc = harness_cli(
        "run", "--adapter", "reference", *PLAN, "--jobs", "2", *extra,
        "--report-dir", str(tmp_path / "r"), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert why in proc.stderr and "--jobs 1" in proc.stderr, proc.stderr


def test_a_job_refusing_the_adapter_stops_the_run_with_its_message(tmp_path: Path) -> None:
    proc = harness_cli(
        "run", "--adapter", "reference", "--adapter-opt", "bug=nope", *PLAN, "--jobs", "2",
        "--report-dir", str(tmp_path / "r"), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "harness: error:" in proc.stderr and "nope" in proc.stderr, proc.stderr
    assert not (tmp_path / "r" / "report.json").exists()


def test_a_job_refusing_the_run_stops_the_share_the_parent_runs_itself(tmp_path: Path) -> None:
    """Job 2 refuses the adapter (job 1, the harness process, takes it): the
    parent stops its own share at its next scenario, not at its end."""
    proc = harness_cli(
        "run", "--adapter", "jobs_adapters:refused_in_jobs", "--profile", "dev",
        "--max-examples", "1000", "--budget", "600", "--seed", "2", "--jobs", "2",
        "--report-dir", str(tmp_path / "r"), cwd=tmp_path, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "refuses to load in a job process" in proc.stderr, proc.stderr
    # Alone, the parent would run all 1000 (a progress line every 25).
    assert "harness: scenario 100 " not in proc.stdout, proc.stdout
    assert not (tmp_path / "r" / "report.json").exists()


def _children(pid: int) -> list[tuple[int, str]]:
    """The job processes of ``pid``: (pid, command line)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid and "harness._job" in cmd:
            found.append((int(entry.name), cmd))
    return found


def _start(tmp_path: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "run", "--adapter", "reference",
         "--profile", "dev", "--max-examples", "60", "--seed", "2", "--budget", "600",
         "--jobs", "2", "--report-dir", str(tmp_path / "r"), *extra],
        cwd=tmp_path, env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip


def _until_first_scenario(proc: subprocess.Popen[str]) -> list[tuple[int, str]]:
    """Wait for the first progress line; the job processes then running:
    one for --jobs 2, job 2 (job 1 is the harness process itself)."""
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("harness: scenario 1 "):
            break
    else:
        raise AssertionError("the run ended before its first scenario")
    jobs = _children(proc.pid)
    assert len(jobs) == 1 and '"shard": [2, 2]' in jobs[0][1], jobs
    return jobs


def _gone(pids: list[int]) -> bool:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if not any(Path(f"/proc/{p}").exists() for p in pids):
            return True
        time.sleep(0.1)
    return False


def test_a_job_that_dies_leaves_its_part_not_run_never_passed(tmp_path: Path) -> None:
    proc = _start(tmp_path)
    jobs = _until_first_scenario(proc)
    second = next(pid for pid, cmd in jobs if '"shard": [2, 2]' in cmd)
    os.kill(second, signal.SIGKILL)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 3, out + err
    report = _json(tmp_path / "r")
    assert report["verdict"] == "unknown"
    assert report["merged"]["missing"] == [2]
    assert any(
        why.startswith("shard 2/2: job 2 of 2 was killed by SIGKILL before writing its report")
        for why in report["inconclusive"]
    ), report["inconclusive"]
    assert {e["shard"] for e in _ledger(tmp_path / "r")} == {1}


def test_sigterm_stops_every_job_and_still_writes_a_partial_merged_report(
    tmp_path: Path,
) -> None:
    proc = _start(tmp_path)
    jobs = _until_first_scenario(proc)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 143, out + err
    assert "partial report in" in err, err
    assert _gone([pid for pid, _ in jobs]), "every job has exited"
    report = _json(tmp_path / "r")
    assert report["interrupted"] == "SIGTERM"
    assert report["verdict"] == "unknown"
    assert any("SIGTERM stopped the run" in why for why in report["inconclusive"])
    # The signal stopped the parent's own share too (the first progress line
    # comes after its first scenario): its partial report is merged.
    assert 1 in report["merged"]["shards"], report["merged"]
    assert 1 in {e["shard"] for e in _ledger(tmp_path / "r")}
