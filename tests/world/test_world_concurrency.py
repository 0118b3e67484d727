"""Several processes and threads calling one world at once."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ThreadPoolExecutor

from harness.world import Caller, World, WorldClient


def _charge_same_key(path: str, worker: str, times: int) -> None:
    client = WorldClient(path)
    for _ in range(times):
        client.call(
            "payments", "charge", {"amount": 5}, idempotency_key="shared",
            caller=Caller("t1", "r1", worker_id=worker),
        )  # fmt: skip


def test_racing_processes_with_one_key_apply_it_exactly_once(world: World) -> None:
    ctx = multiprocessing.get_context("fork")
    workers = [
        ctx.Process(target=_charge_same_key, args=(world.path, f"w{i}", 5)) for i in range(4)
    ]
    for p in workers:
        p.start()
    for p in workers:
        p.join(timeout=60)

    assert [p.exitcode for p in workers] == [0, 0, 0, 0]
    summary = world.summary()["payments"]
    assert (summary.calls, summary.applied, summary.deduplicated) == (20, 1, 19)
    refs = {r.external_ref for r in world.requests()}
    assert len(refs) == 1 and refs.pop().startswith("pay-")  # one charge, seen by all


def test_threads_sharing_one_client_each_get_their_own_transactions(
    world: World, client: WorldClient
) -> None:
    def send(i: int) -> str:
        return client.call("email", "send", {"i": i}, caller=Caller("t1", f"r{i}")).external_ref

    with ThreadPoolExecutor(max_workers=8) as pool:
        refs = list(pool.map(send, range(80)))

    # 80 distinct requests, each applied once: 80 distinct refs, none lost.
    assert len(set(refs)) == 80 and all(r.endswith("-1") for r in refs)
    assert len(world.effects("email")) == 80
    client.close()
    again = client.call("email", "send", {"i": 0}, caller=Caller("t1", "r0")).external_ref
    assert again == refs[0][:-1] + "2"  # the connection reopened; same request, second send
