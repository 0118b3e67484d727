"""``--jobs N`` hands the plan's scenarios out as the jobs ask
(``PlanQueue``): whichever job takes an index runs the plan's scenario at
that index, the sampled ones included, and the jobs' parts add up to the
plan.

In-process runs of the reference runtime (``--profile dev --max-examples
20 --seed 2``), one of them sharing its queue with a make-believe second job
that takes an index before some of this job's takes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness._api import Session, _session
from harness._settings import load_settings
from harness.adapters._loading import load_adapter
from harness.session._shared import PlanQueue

PLANNED = 20


def _settings(folder: Path, **changes: Any) -> Any:
    given: dict[str, Any] = {"budget_seconds": 600.0, **changes}
    return load_settings("dev", seed=2, max_examples=PLANNED, report_dir=str(folder), **given)


def _ids(folder: Path) -> list[str]:
    lines = (folder / "scenarios.jsonl").read_text().splitlines()
    return [e["id"] for e in map(json.loads, lines) if e["phase"] == "search"]


def test_the_queue_hands_out_each_index_once_and_skips_below_a_floor(tmp_path: Path) -> None:
    one, two = PlanQueue(tmp_path / "q"), PlanQueue(tmp_path / "q")
    assert one.take() == (0, 0)
    assert two.take() == (1, 1)
    assert one.take(floor=5) == (2, 5)  # 2, 3, 4 skipped: nobody runs them
    assert two.take() == (6, 6)
    assert one.take(floor=3) == (7, 7)  # a floor already passed changes nothing


class _Contended(PlanQueue):
    """A queue another job shares: before every second take of this job,
    the other takes the next index (and runs it elsewhere)."""

    others: list[int] = []
    mine: list[int] = []

    def take(self, floor: int = 0) -> tuple[int, int]:
        if len(self.mine) % 2 == 1:
            _, other = super().take()
            self.others.append(other)
        first, taken = super().take(floor)
        self.mine.append(taken)
        return first, taken


def test_a_job_runs_the_plans_scenario_at_each_index_it_takes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    adapter = load_adapter("reference", {})
    Session(adapter, _settings(tmp_path / "one"), spec="reference").run()
    plan = _ids(tmp_path / "one")
    assert len(plan) == PLANNED

    monkeypatch.setattr(_Contended, "others", [])
    monkeypatch.setattr(_Contended, "mine", [])
    monkeypatch.setattr(_session, "PlanQueue", _Contended)
    job = Session(adapter, _settings(tmp_path / "job", shard=(1, 2)), spec="reference").run(
        queue=tmp_path / "plan.queue"
    )
    ran = [i for i in _Contended.mine if i < PLANNED]
    others = [i for i in _Contended.others if i < PLANNED]
    # Targeted and sampled indices both went to the other job, and to this one.
    assert any(i >= 16 for i in others) and any(i < 16 for i in others), others
    assert sorted(ran + others) == list(range(PLANNED))
    assert _ids(tmp_path / "job") == [plan[i] for i in ran]
    assert job.planned_scenarios == job.searched_scenarios == len(ran)
    # A job's folder is its parent's to merge and render: report.json alone.
    assert (tmp_path / "job" / "report.json").is_file()
    assert not (tmp_path / "job" / "report.html").exists()
    assert (tmp_path / "one" / "report.html").is_file()


def test_a_job_out_of_budget_leaves_no_index_for_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    adapter = load_adapter("reference", {})
    queue = tmp_path / "plan.queue"
    settings = _settings(tmp_path / "job", shard=(1, 2), budget_seconds=0.001)
    job = Session(adapter, settings, spec="reference").run(queue=queue)
    # The budget is the run's: what this job did not run, no other job may.
    assert PlanQueue(queue).take()[1] >= PLANNED
    assert job.searched_scenarios == 1
    assert job.planned_scenarios == PLANNED
    assert job.not_run is not None and "targeted" in job.not_run, job.not_run
    assert job.verdict == "unknown"


def test_a_job_stopping_on_its_first_failure_stops_the_run(tmp_path: Path) -> None:
    """``--stop-on-first`` stops the run, not the job alone: the other jobs
    used to go on through the whole rest of the plan."""
    adapter = load_adapter("reference", {"bug": "no-idempotency-key"})
    queue = tmp_path / "plan.queue"
    settings = _settings(tmp_path / "job", shard=(1, 2), stop_on_first=True)
    job = Session(adapter, settings, spec="reference").run(queue=queue)
    assert job.verdict == "fail"
    assert job.searched_scenarios < PLANNED
    # Nothing is left for another job to take.
    assert PlanQueue(queue).take()[1] >= PLANNED
