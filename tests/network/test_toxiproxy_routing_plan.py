"""While a scenario runs, only the workers its network faults act on go
through proxies of their own; the others connect to their stores directly
(a proxy nothing acts on only costs the proxy server a copy of the traffic)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness import Engine, Settings, _toxiproxy, nemesis
from harness.adapters._guard import guard
from harness.adapters.reference import ReferenceAdapter
from harness.history import History
from harness.model import CrashSpec, NetworkFault, Quiesce, RunSpec, RunWorker, Scenario, Submit

pytestmark = pytest.mark.usefixtures("toxiproxy")

SERVICES = {"postgres": "postgresql://postgres@127.0.0.1:5432/test"}
INPUT = {"item": "bolts", "quantity": 3}


def test_inside_a_plan_only_the_named_workers_are_routed() -> None:
    scope = object()
    try:
        with _toxiproxy.routing_only({"n0"}):
            aimed = _toxiproxy.route_worker(scope, "n0", SERVICES)
            other = _toxiproxy.route_worker(scope, "n1", SERVICES)
        outside = _toxiproxy.route_worker(scope, "n2", SERVICES)
        assert other == SERVICES
        assert _toxiproxy.routes_of(scope, "n1") == {}
        assert aimed != SERVICES and set(_toxiproxy.routes_of(scope, "n0")) == {"postgres"}
        assert outside != SERVICES  # no plan: every worker is routed, as before
    finally:
        _toxiproxy.release_routes(scope)


def test_the_plan_names_the_workers_of_the_scenarios_network_faults() -> None:
    steps = (
        RunWorker(worker_id="w0", crash=CrashSpec(site="checkpoint_stmt_commit", action="pause")),
        NetworkFault(kind="latency", worker_id="w0"),
        NetworkFault(kind="partition_after_apply", worker_id="w2", effect="inventory.reserve"),
        Quiesce(),
    )
    scope = object()
    try:
        with nemesis.routing_for(steps):
            routed = {
                w: _toxiproxy.route_worker(scope, w, SERVICES) != SERVICES
                for w in ("w0", "w1", "w2", "q")
            }
        assert routed == {"w0": True, "w1": False, "w2": True, "q": False}
    finally:
        _toxiproxy.release_routes(scope)


@pytest.mark.postgres
@pytest.mark.redis
def test_a_scenario_routes_its_faulted_worker_and_no_other(
    postgres_url: str, redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    routed: list[str] = []
    real = _toxiproxy.Server.route

    def route(self: _toxiproxy.Server, scope: object, worker_id: str, services: Any) -> Any:
        routed.append(worker_id)  # then the real thing
        return real(self, scope, worker_id, services)

    monkeypatch.setattr(_toxiproxy.Server, "route", route)
    adapter = ReferenceAdapter("postgres", "redis", postgres_url=postgres_url, redis_url=redis_url)
    pause = CrashSpec(site="checkpoint_stmt_commit", nth=1, action="pause")
    scenario = Scenario(
        name="one-routed-worker",
        steps=(
            Submit(run=RunSpec(run_id="r1", tenant="acme", workflow="procurement", input=INPUT)),
            RunWorker(worker_id="n0", crash=pause),
            NetworkFault(kind="commit_ack_lost", worker_id="n0"),
            Quiesce(),
        ),
    )
    example = Engine(guard(adapter), Settings(), workdir=tmp_path / "engine").execute(scenario)
    (history,) = example.folder.rglob("history.jsonl")
    loaded = History.load(history)
    (fault,) = loaded.faults("commit_ack_lost")
    assert fault.value["fired"] is True, fault.value
    assert fault.value["backend"] == "toxiproxy", fault.value
    started = {
        e.value["worker_id"] for e in loaded.events if e.type == "invoke" and "worker_id" in e.value
    }
    assert started - {"n0"}, f"the quiesce started no other worker: {started}"
    # the fault-free oracle run and the quiesce's workers connected directly
    assert set(routed) == {"n0"}, routed
    assert {r.verdict.value for r in example.results} == {"pass"}
