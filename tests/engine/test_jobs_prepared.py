"""What the jobs of ``--jobs N`` share instead of each doing it again: the
parent's probe (``Session.prepare``) and the fault-free oracle runs
(``SharedOracles``).

In-process runs of the reference runtime (a small plan: ``--profile dev
--max-examples 12 --seed 2``), compared through each run folder's
``scenarios.jsonl`` (every scenario run: its id and its history's SHA-256).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from harness import _api, _job
from harness._api import ORACLES, PREPARED, Session, _run, _session
from harness._errors import UsageError
from harness._settings import load_settings
from harness.adapters._loading import load_adapter
from harness.session import _executor
from harness.session._engine import Engine
from harness.session._probe import probe_scenario
from harness.session._shared import SharedOracles


def _settings(folder: Path, **changes: Any) -> Any:
    return load_settings(
        "dev", seed=2, max_examples=12, budget_seconds=600.0, report_dir=str(folder), **changes
    )


def _ledger(folder: Path) -> list[tuple[str, str]]:
    lines = (folder / "scenarios.jsonl").read_text().splitlines()
    return [(e["id"], e["history"]) for e in map(json.loads, lines) if e["phase"] == "search"]


def test_a_fault_free_run_kept_by_one_engine_is_not_run_again_by_another(
    tmp_path: Path,
) -> None:
    adapter = load_adapter("reference", {})
    shared = SharedOracles(tmp_path / "shared")
    workflow = adapter.workflows()[0]
    first = Engine(adapter, _settings(tmp_path), shared=shared)
    second = Engine(adapter, _settings(tmp_path), shared=shared)
    try:
        ran = first.oracle(probe_scenario(workflow)).read_bytes()
        assert len(first.fault_free_seconds) == 1
        kept = second.oracle(probe_scenario(workflow))
        assert second.fault_free_seconds == []  # taken from the folder, not run
        assert kept.parent == tmp_path / "shared" and kept.read_bytes() == ran
        # The scenario's history is judged against it as against its own run.
        assert second.execute(probe_scenario(workflow)).results
        assert second.fault_free_seconds == []
    finally:
        first.close()
        second.close()
    assert [p.name for p in (tmp_path / "shared").iterdir() if p.name.startswith(".")] == []


def test_a_run_that_takes_the_parents_probe_runs_what_its_own_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job's run with the parent's probe (``prepared``) probes nothing of
    its own, and runs the same scenarios with the same histories and
    verdicts as a run that probes for itself."""
    adapter = load_adapter("reference", {})
    own = Session(adapter, _settings(tmp_path / "own"), spec="reference").run()

    folder = tmp_path / "prepared"
    folder.mkdir()
    Session(adapter, _settings(tmp_path / "parent"), spec="reference").prepare(folder)
    assert (folder / PREPARED).is_file() and any((folder / ORACLES).iterdir())
    assert not (tmp_path / "parent").exists()  # the parent writes no report of its own

    def refused(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("a job with the parent's probe probed again")

    monkeypatch.setattr(_session, "probe_universe", refused)
    monkeypatch.setattr(_session, "check_declarations", refused)
    kept = {p.name for p in (folder / ORACLES).iterdir()}
    ran: list[str] = []
    real = _executor.run_scenario

    def counted(adapter: Any, scenario: Any, folder: Path, **kwargs: Any) -> Any:
        if kwargs.get("history_name") == "oracle.jsonl":
            ran.append(
                hashlib.sha256(_executor.scenario_key(scenario).encode()).hexdigest() + ".jsonl"
            )
        return real(adapter, scenario, folder, **kwargs)

    monkeypatch.setattr(_executor, "run_scenario", counted)
    job = Session(adapter, _settings(tmp_path / "job"), spec="reference").run(prepared=folder)

    assert _ledger(tmp_path / "job") == _ledger(tmp_path / "own")
    assert job.verdict == own.verdict
    assert {p.name: p.verdict for p in job.properties} == {
        p.name: p.verdict for p in own.properties
    }
    # The probe's fault-free runs are the parent's: none of them ran again;
    # the job ran its search's own (and kept them for the other jobs).
    assert ran and not set(ran) & kept
    assert set(ran) <= {p.name for p in (folder / ORACLES).iterdir()}


def test_a_job_stops_waiting_when_the_parent_is_gone(tmp_path: Path) -> None:
    assert _job._wait_for(tmp_path, parent=-1) is False
    (tmp_path / PREPARED).write_bytes(b"")
    assert _job._wait_for(tmp_path, parent=-1) is True


def test_a_job_loads_its_adapter_while_the_parent_probes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job's adapter loads before it waits for the parent's probe (the
    two overlap), and a job whose parent is gone runs nothing."""
    seen: list[str] = []
    real = _run.load_adapter

    def loading(spec: str, options: Any) -> Any:
        seen.append("load")
        return real(spec, options)

    def ready() -> bool:
        seen.append("ready")
        return False  # the parent is gone

    monkeypatch.setattr(_run, "load_adapter", loading)
    with pytest.raises(UsageError, match="is gone"):
        _api.run_job(
            "reference",
            {},
            _settings(tmp_path / "job"),
            prepared=tmp_path,
            ready=ready,
        )
    assert seen == ["load", "ready"]
    assert not (tmp_path / "job").exists()
