"""``harness run --shard K/N`` and ``harness merge``: one search spread over
machines, and joined again.

Real runs of the reference runtime (small plans: ``--profile dev
--max-examples 20 --seed 2``). The plan test watches which scenarios each
shard executes (a spy around ``Engine.execute``: the scenarios still run).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from engine_support import harness_cli, replay_argv

import harness
from harness._settings import load_settings
from harness.report import load_report, report_schema
from harness.session import Engine, _search
from harness.session._plan import pair_room, shard_plan, targeted_cap

PLAN = ("--profile", "dev", "--max-examples", "20", "--seed", "2", "--budget", "600")
BUG = ("--adapter-opt", "bug=no-idempotency-key")


class _Watched:
    """What one in-process shard run did: the targeted list it was planned
    from, and every scenario it executed, in order."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.targeted: list[str] = []
        #: of them, the schedules past the targeted share run for the
        #: commit x fault pairs it does not reach
        self.added = 0
        self.executed: list[str] = []


def _run_watched(shard: str, folder: Path) -> _Watched:
    watched = _Watched(folder)
    real_execute, real_targeted = Engine.execute, _search.targeted_plan

    def execute(self: Engine, scenario: Any, folder: Path | None = None) -> Any:
        watched.executed.append(scenario.model_dump_json())
        return real_execute(self, scenario, folder)

    def targeted_plan(universe: Any, share: int, room: int) -> Any:
        plan, added = real_targeted(universe, share, room)
        watched.targeted = [sc.model_dump_json() for sc in plan]
        watched.added = added
        return plan, added

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Engine, "execute", execute)
        mp.setattr(_search, "targeted_plan", targeted_plan)
        harness.run(
            "reference",
            profile="dev",
            max_examples=20,
            seed=2,
            budget=600,
            shard=shard,
            report_dir=folder,
        )
    return watched


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[_Watched]]:
    """Shards 1/2 and 2/2 of one plan, run in this process."""
    root = tmp_path_factory.mktemp("shards")
    yield [_run_watched(f"{k}/2", root / f"s{k}") for k in (1, 2)]


@pytest.fixture(scope="module")
def bug_shards(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Shards 1/2 and 2/2 of a plan against a seeded bug, by the command line."""
    root = tmp_path_factory.mktemp("bug")
    folders = []
    for k in (1, 2):
        folder = root / f"b{k}"
        proc = harness_cli(
            "run", "--adapter", "reference", *BUG, *PLAN, "--shard", f"{k}/2",
            "--report-dir", str(folder), cwd=root,
        )  # fmt: skip
        assert proc.returncode in (0, 1, 3), proc.stdout + proc.stderr
        folders.append(folder)
    return folders


def _json(folder: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / "report.json").read_text())
    return data


def _merge(*args: str | Path, cwd: Path) -> Any:
    return harness_cli("merge", *(str(a) for a in args), cwd=cwd)


def test_the_shards_of_a_plan_run_each_targeted_schedule_once_and_share_the_sampling(
    shards: list[_Watched],
) -> None:
    one, two = shards
    assert one.targeted and one.targeted == two.targeted, "every shard plans the same search"
    settings = load_settings("dev", max_examples=20)
    plan = one.targeted
    assert len(plan) == targeted_cap(settings) + one.added
    assert one.added == two.added <= pair_room(settings)
    sampled = settings.max_examples - targeted_cap(settings)
    assert sampled > 0
    ran_targeted = [w.executed[: len(plan[k::2])] for k, w in enumerate(shards)]
    # Shard K took the schedules at index % 2 == K - 1, each once, in order.
    assert ran_targeted[0] == plan[0::2]
    assert ran_targeted[1] == plan[1::2]
    assert sorted(ran_targeted[0] + ran_targeted[1]) == sorted(plan)
    # The sampled share is split, and the shards sample different scenarios.
    draws = [w.executed[len(r) :] for w, r in zip(shards, ran_targeted, strict=True)]
    assert [len(d) for d in draws] == [sampled // 2 + sampled % 2, sampled // 2]
    assert set(draws[0]) != set(draws[1])
    for k, w in enumerate(shards, 1):
        report = _json(w.folder)
        assert report["shard"] == {"k": k, "n": 2, "plan": 20 + one.added}
        assert report["planned_scenarios"] == len(w.executed)
        jsonschema.validate(report, report_schema())
    assert sum(_json(w.folder)["planned_scenarios"] for w in shards) == 20 + one.added


def test_a_shard_run_again_runs_the_same_scenarios(shards: list[_Watched], tmp_path: Path) -> None:
    again = _run_watched("2/2", tmp_path / "again")
    assert again.executed == shards[1].executed


def test_shard_plan_splits_any_plan_into_parts_that_add_up() -> None:
    aimed: list[Any] = list(range(7))  # stands for scenarios: only positions matter
    for n in (1, 2, 3, 5, 9):
        parts = [shard_plan(aimed, 12, (k, n)) for k in range(1, n + 1)]
        assert sorted(x for mine, _ in parts for x in mine) == aimed
        assert sum(planned for _, planned in parts) == 12
    assert shard_plan(aimed, 12, None) == (aimed, 12)


def test_merging_the_shards_sums_their_evidence_and_judges_again(
    shards: list[_Watched], tmp_path: Path
) -> None:
    out = tmp_path / "merged"
    proc = _merge(*(w.folder for w in shards), "--report-dir", out, cwd=tmp_path)
    parts = [_json(w.folder) for w in shards]
    merged = _json(out)
    verdicts = {p["verdict"] for p in parts}
    assert proc.returncode == {"pass": 0, "fail": 1, "unknown": 3}[merged["verdict"]], proc.stderr
    assert merged["merged"]["shards"] == [1, 2] and merged["merged"]["missing"] == []
    assert merged["shard"] is None
    assert merged["scenarios"] == sum(p["scenarios"] for p in parts)
    assert merged["planned_scenarios"] == 20
    for prop in merged["properties"]:
        same = [next(q for q in p["properties"] if q["name"] == prop["name"]) for p in parts]
        for key in ("scenarios", "exercised", "failed", "unknown"):
            assert prop[key] == sum(q[key] for q in same), (prop["name"], key)
        # Judged again from the sums: exercised anywhere and never failed is a pass,
        # though a shard too small to arm its fault family said not_tested.
        if all(q["verdict"] in ("pass", "not_tested") for q in same) and prop["exercised"]:
            assert prop["verdict"] == "pass", prop
    for kind, cov in merged["faults"].items():
        assert cov["fired"] == sum(p["faults"].get(kind, {}).get("fired", 0) for p in parts)
        assert cov["armed"] == sum(p["faults"].get(kind, {}).get("armed", 0) for p in parts)
    for site, cov in merged["crash_points"].items():
        assert cov["fired"] == sum(p["crash_points"][site]["fired"] for p in parts)
    # The reference runtime holds; the shards together exercise every property,
    # though a shard of 10 scenarios may leave one unexercised (inconclusive on
    # its own; which one depends on the targeted list's order, so this does not
    # pin it): judged again over the sums, the merge passes.
    assert "fail" not in verdicts
    assert merged["verdict"] == "pass", merged["inconclusive"]
    assert merged["inconclusive"] == []
    jsonschema.validate(merged, report_schema())
    for name in ("report.html", "junit.xml", "summary.md"):
        assert (out / name).is_file()


def test_a_bug_one_shard_finds_fails_the_merge_with_that_shards_replay(
    bug_shards: list[Path], tmp_path: Path
) -> None:
    failing = [k for k, f in enumerate(bug_shards, 1) if _json(f)["verdict"] == "fail"]
    assert failing, "the seeded bug is found in a shard"
    out = tmp_path / "merged"
    proc = _merge(*bug_shards, "--report-dir", out, cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    merged = _json(out)
    assert merged["verdict"] == "fail"
    assert "exactly_once_effects" in [
        p["name"] for p in merged["properties"] if p["verdict"] == "fail"
    ]
    k = failing[0]
    ce = merged["counterexample"]
    assert ce["replay"] == f"harness replay {out / 'shards' / str(k)}"
    assert ce["steps"] == _json(bug_shards[k - 1])["counterexample"]["steps"]
    # what the shard's shrinking said of it too
    shrunk = _json(bug_shards[k - 1])["counterexample"]
    assert (ce["fully_shrunk"], ce["dropped_steps"]) == (
        shrunk["fully_shrunk"],
        shrunk["dropped_steps"],
    )
    kept = [ce["replay"]] + [o["replay"] for o in merged["other_failures"]]
    shard_failures = sum(
        (_json(f)["counterexample"] is not None) + len(_json(f)["other_failures"])
        for f in bug_shards
    )
    assert len(kept) == shard_failures, "every counterexample is kept"
    # The copied shard folder replays on its own, and reproduces the failure.
    replay = harness_cli(*replay_argv(ce["replay"]), cwd=tmp_path)
    assert replay.returncode == 1, replay.stdout + replay.stderr
    assert "reproduced:" in replay.stdout


def test_a_shards_replay_command_works_on_its_own_folder(bug_shards: list[Path]) -> None:
    failing = next(f for f in bug_shards if _json(f)["verdict"] == "fail")
    command = _json(failing)["counterexample"]["replay"]
    assert command == f"harness replay {failing}"
    proc = harness_cli(*replay_argv(command), cwd=failing.parent)
    assert proc.returncode == 1, proc.stdout + proc.stderr


def _copy(folder: Path, dest: Path) -> Path:
    shutil.copytree(folder, dest)
    return dest


def test_shards_of_different_searches_are_refused(
    shards: list[_Watched], bug_shards: list[Path], tmp_path: Path
) -> None:
    proc = _merge(shards[0].folder, bug_shards[1], "--report-dir", tmp_path / "m", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "not shards of one search" in proc.stderr and "adapter options" in proc.stderr
    # Another seed: edited into a copy (the rest of the folder is the shard's).
    other = _copy(shards[1].folder, tmp_path / "seed4")
    report = _json(other)
    report["seed"] = 4
    (other / "report.json").write_text(json.dumps(report))
    proc = _merge(shards[0].folder, other, "--report-dir", tmp_path / "m", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "seed 4 differs from 2" in proc.stderr
    assert not (tmp_path / "m" / "report.json").exists()


def test_missing_duplicate_and_foreign_folders_are_refused(
    shards: list[_Watched], tmp_path: Path
) -> None:
    one, two = (w.folder for w in shards)
    proc = _merge(one, "--report-dir", tmp_path / "m", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "shard(s) 2/2 missing" in proc.stderr and "--partial" in proc.stderr

    proc = _merge(one, _copy(one, tmp_path / "again"), two, "--report-dir", tmp_path / "m",
                  cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 2 and "shard 1/2 is given twice" in proc.stderr, proc.stderr

    proc = _merge(one, two, "--report-dir", one, cwd=tmp_path)
    assert proc.returncode == 2 and "both a shard to merge and the --report-dir" in proc.stderr

    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "report.json").write_text('{"hello": 1}')
    proc = _merge(one, tmp_path / "junk", "--report-dir", tmp_path / "m", cwd=tmp_path)
    assert proc.returncode == 2 and "is not a harness report" in proc.stderr, proc.stderr

    whole = _copy(one, tmp_path / "whole")
    report = _json(whole)
    del report["shard"]
    (whole / "report.json").write_text(json.dumps(report))
    proc = _merge(whole, two, "--report-dir", tmp_path / "m", cwd=tmp_path)
    assert proc.returncode == 2 and "not of a shard" in proc.stderr, proc.stderr
    assert load_report(whole).shard is None, "a report without a shard still loads"
    assert not (tmp_path / "m" / "report.json").exists()


def test_a_partial_merge_is_inconclusive_and_names_the_missing_shards(
    shards: list[_Watched], tmp_path: Path
) -> None:
    out = tmp_path / "partial"
    proc = _merge(shards[0].folder, "--partial", "--report-dir", out, cwd=tmp_path)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    merged = _json(out)
    assert merged["verdict"] == "unknown"
    assert merged["merged"]["missing"] == [2]
    assert any("2/2 of 2 missing" in why for why in merged["inconclusive"])


@pytest.mark.parametrize("value", ["0/2", "3/2", "2", "a/b", "1/0", "-1/2"])
def test_a_bad_shard_exits_2_and_says_how_to_write_one(value: str, tmp_path: Path) -> None:
    proc = harness_cli(
        "run", "--adapter", "reference", *PLAN, f"--shard={value}",
        "--report-dir", str(tmp_path / "r"), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith("harness: error: shard "), proc.stderr
    assert "K/N with 1 <= K <= N" in proc.stderr
    assert not (tmp_path / "r" / "report.json").exists()


def test_a_shard_without_a_fixed_seed_is_refused(tmp_path: Path) -> None:
    proc = harness_cli(
        "run", "--adapter", "reference", "--profile", "dev", "--shard", "1/2",
        "--report-dir", str(tmp_path / "r"), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "needs a fixed seed" in proc.stderr and "--seed" in proc.stderr


def test_a_shard_the_budget_cut_short_keeps_the_merge_inconclusive(
    shards: list[_Watched], tmp_path: Path
) -> None:
    cut = _copy(shards[1].folder, tmp_path / "cut")
    report = _json(cut)
    report["verdict"] = "unknown"
    report["searched_scenarios"] = report["planned_scenarios"] - 3
    why = "the budget ended the search: ran 7 of 10 planned scenarios; raise --budget"
    report["inconclusive"].append(why)
    (cut / "report.json").write_text(json.dumps(report))
    out = tmp_path / "merged"
    proc = _merge(shards[0].folder, cut, "--report-dir", out, cwd=tmp_path)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    merged = _json(out)
    assert merged["verdict"] == "unknown"
    assert merged["inconclusive"] == [f"shard 2/2: {why}"]
    assert merged["searched_scenarios"] == 17


def test_a_merge_copies_only_plain_files_from_inside_a_shards_folder(
    bug_shards: list[Path], tmp_path: Path
) -> None:
    """A shard folder is untrusted: a counterexample folder that is a link
    out of it is not followed, and nothing outside it is copied."""
    failing = next(k for k, f in enumerate(bug_shards, 1) if _json(f)["verdict"] == "fail")
    hostile = _copy(bug_shards[failing - 1], tmp_path / "hostile")
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "history.jsonl").write_text("not for the report\n")
    (hostile / "failures").mkdir(exist_ok=True)
    (hostile / "failures" / "9").symlink_to(secret, target_is_directory=True)
    (hostile / "results.json").unlink()
    (hostile / "results.json").symlink_to(secret / "history.jsonl")
    report = _json(hostile)
    report["other_failures"].append(
        {"failed_properties": ["progress"], "counterexample_for": [], "steps": ["x"],
         "folder": "failures/9", "replay": None}
    )  # fmt: skip
    (hostile / "report.json").write_text(json.dumps(report))
    rest = [f for k, f in enumerate(bug_shards, 1) if k != failing]
    out = tmp_path / "merged"
    proc = _merge(hostile, *rest, "--report-dir", out, cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    copied = [p for p in out.rglob("*") if p.is_file()]
    assert all("not for the report" not in p.read_text(errors="replace") for p in copied)
    assert not (out / "shards" / str(failing) / "failures" / "9").exists()
    assert not any(p.is_symlink() for p in out.rglob("*"))
