"""The ``latency`` kind on the kernel backend: netfilter cannot hold packets
back and this kernel has no netem, so the fault is armed and never fired,
with the reason -- never passed."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import Engine, Settings, _netfilter
from harness.adapters.reference import ReferenceAdapter
from harness.history import History
from harness.model import CrashSpec, NetworkFault, Quiesce, RunSpec, RunWorker, Scenario, Submit

pytestmark = [pytest.mark.postgres, pytest.mark.usefixtures("netfilter")]

SCENARIO = Scenario(
    name="latency-by-hand",
    steps=(
        Submit(
            run=RunSpec(
                run_id="r1",
                tenant="acme",
                workflow="procurement",
                input={"item": "b", "quantity": 1},
            )
        ),
        RunWorker(worker_id="n0", crash=CrashSpec(site="checkpoint_stmt_commit", action="pause")),
        NetworkFault(kind="latency", worker_id="n0"),
        Quiesce(),
    ),
)


def test_latency_is_armed_never_fired_and_says_why(postgres_url: str, tmp_path: Path) -> None:
    adapter = ReferenceAdapter("postgres", postgres_url=postgres_url)
    example = Engine(adapter, Settings(), workdir=tmp_path).execute(SCENARIO)
    (history,) = example.folder.rglob("history.jsonl")
    (event,) = History.load(history).faults("latency")
    assert event.value["fired"] is False, event.value
    assert "netem" in event.value["reason"], event.value
    assert event.value["reason"] == _netfilter.latency_unavailable()
    # the worker went on undisturbed: every property holds on what ran
    assert {r.verdict.value for r in example.results} == {"pass"}
