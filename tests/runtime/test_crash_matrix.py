"""SIGKILL a worker at every crash point a workflow passes, resume in a new
process, and compare with the uninterrupted run.

The fault-free run is traced first: every worker process logs each crash-point
hit, so the matrix is exactly the (round, site, n-th hit) positions the
workflow really goes through -- nothing is guessed or hard-coded. On SQLite
every position is killed; on Postgres the first hit of each site in each
round.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest

from harness.adapters.reference._deployment import Deployment

TERMINAL = ("Completed", "Failed", "Cancelled")


@dataclass(frozen=True)
class Outcome:
    status: str
    output: Any
    effects: Counter[str]


def run_rounds(d: Deployment, run_id: str, crash_at: tuple[int, str] | None = None) -> Outcome:
    """Workers one after another (approving waits) until the run ends; the
    worker of round ``crash_at[0]`` is armed with ``crash_at[1]``."""
    for rnd in range(12):
        armed = crash_at[1] if crash_at and crash_at[0] == rnd else None
        exit_ = d.run_worker(f"w{rnd}", crash=armed, trace=crash_at is None)
        if armed is None:
            assert exit_.code == 0, f"unarmed worker w{rnd} ended with {exit_}"
        else:
            assert exit_.killed, f"worker w{rnd} armed with {armed} was not killed: {exit_}"
            # The dead worker's lease is still held: a supervisor waits for it
            # to expire before another worker may take the run over.
            d.clock.advance(d.config.lease_seconds + 1)
        snap = d.snapshot(run_id)
        status = snap.run.status.value
        if status == "WaitingForApproval" and exit_.code == 0:
            d.deliver(d.approve(run_id))
        elif status in TERMINAL and exit_.code == 0:
            output = snap.state.payload.get("_output")
            effects = Counter(f"{e.service}.{e.action}" for e in d.world.effects())
            return Outcome(status, output, effects)
    raise AssertionError(f"run {run_id} did not settle: {d.snapshot(run_id).run}")


def trace(d: Deployment) -> list[list[tuple[str, int]]]:
    """Crash-point hits of each worker process, in order, grouped by round."""
    rounds: dict[int, list[tuple[str, int]]] = {}
    for pid, site, n, _ in d.crash_log():
        rounds.setdefault(pid, []).append((site, n))
    return list(rounds.values())


WORKLOADS = {
    "refund": ({"customer_id": "c1", "amount_cents": 900, "currency": "EUR"}, "payments.refund"),
    "onboarding": ({"customer_id": "k7", "plan": "gold"}, "provisioning.create_account"),
}


@pytest.mark.slow
@pytest.mark.parametrize("workflow", sorted(WORKLOADS))
@pytest.mark.parametrize(
    "variant", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_a_kill_at_every_crash_point_applies_the_effect_once_and_ends_as_without_faults(
    make_deployment: Any, workflow: str, variant: str
) -> None:
    payload, critical = WORKLOADS[workflow]
    oracle_d = make_deployment(variant)
    oracle_d.submit(workflow, payload, tenant="acme", run_id="r1")
    oracle = run_rounds(oracle_d, "r1")
    positions = [(rnd, site, n) for rnd, hits in enumerate(trace(oracle_d)) for site, n in hits]
    assert oracle.status == "Completed" and oracle.effects[critical] == 1
    sites = {site for _, site, _ in positions}
    # The matrix must reach every kind of boundary, not a convenient subset.
    for must in (
        "after_intent_commit",
        "after_external_call",
        "before_result_commit",
        "after_approval_write",
        "checkpoint_stmt_2",
        "after_lease_acquire",
    ):
        assert must in sites, f"{workflow} never passes {must}; sites seen: {sorted(sites)}"

    killed = positions
    if variant != "sqlite":
        # The first hit of each site in each round (42 of 135 positions for
        # the refund): a site's later hits in a round are the same statements
        # again, a kill a minute on Postgres; every position runs on SQLite.
        firsts: dict[tuple[int, str], tuple[int, str, int]] = {}
        for rnd, site, n in positions:
            firsts.setdefault((rnd, site), (rnd, site, n))
        killed = list(firsts.values())

    failures: list[tuple[Any, ...]] = []
    for rnd, site, n in killed:
        d = make_deployment(variant)
        try:
            d.submit(workflow, payload, tenant="acme", run_id="r1")
            got = run_rounds(d, "r1", crash_at=(rnd, f"{site}=kill@{n}"))
            fired = [ln for ln in d.crash_log() if ln[3] == "kill"]
            assert [(s, k) for _, s, k, _ in fired] == [(site, n)]
            if got.status != oracle.status or got.output != oracle.output:
                failures.append((rnd, site, n, "outcome", got.status, got.output))
            if got.effects[critical] != 1:
                failures.append((rnd, site, n, critical, got.effects[critical]))
            exactly_once = {k: v for k, v in got.effects.items() if not k.startswith("email.")}
            if exactly_once != {
                k: v for k, v in oracle.effects.items() if not k.startswith("email.")
            }:
                failures.append((rnd, site, n, "effects", dict(got.effects)))
            if got.effects["email.notify"] < 1:  # at-least-once: never dropped
                failures.append((rnd, site, n, "notification lost"))
        finally:
            d.close()
    assert not failures, f"{len(failures)} of {len(killed)} kill positions broke: {failures}"
    assert len(killed) > 40
