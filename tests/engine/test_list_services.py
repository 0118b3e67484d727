"""``harness list services``: the world's effect kinds, as an adapter names
them, each with what the world really does with a repeated request."""

from __future__ import annotations

from pathlib import Path

from engine_support import harness_cli

from harness.world import SERVICES, Caller, World, service_catalogue


def test_the_catalogue_names_every_action_of_every_service() -> None:
    kinds = [k.kind for k in service_catalogue()]
    assert kinds == [f"{s}.{a}" for s, spec in SERVICES.items() for a in spec.actions]
    assert "payments.charge" in kinds and "provisioning.create_account" in kinds


def test_what_the_catalogue_says_of_a_repeat_is_what_the_world_does(tmp_path: Path) -> None:
    """Each kind called twice with one key: one effect where the catalogue
    says the key deduplicates, two where every call is a new effect, none
    for a read."""
    world = World(tmp_path / "world.db", clock=lambda: 0.0).create()
    try:
        client = world.client()
        for k in service_catalogue():
            caller = Caller(tenant="t1", run_id=f"r-{k.kind}", op_id="op", worker_id="w")
            for _ in range(2):
                answer = client.call(
                    k.service, k.action, {"n": 1}, idempotency_key=f"key-{k.kind}", caller=caller
                )
                assert answer.body["status"] == k.status
            applied = [e for e in world.effects(k.service) if e.action == k.action]
            if not k.capabilities.side_effect:
                assert applied == [] and k.delivery.startswith("no effect"), k
            elif k.capabilities.idempotency_keys:
                assert len(applied) == 1 and "deduplicated" in k.delivery, k
            else:
                assert len(applied) == 2 and "every call is a new effect" in k.delivery, k
    finally:
        world.close()


def test_list_services_prints_each_kind_with_its_delivery_and_keys(tmp_path: Path) -> None:
    proc = harness_cli("list", "services", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = {
        line.split()[0]: line
        for line in proc.stdout.splitlines()
        if line.startswith("  ") and "." in line.split()[0]
    }
    assert list(rows) == [k.kind for k in service_catalogue()]
    for k in service_catalogue():
        row = rows[k.kind]
        assert k.delivery in row and k.status in row
        keys = row.split(k.status, 1)[1].split()[0]
        assert keys == ("yes" if k.capabilities.idempotency_keys else "no"), row
    assert "by business key" in rows["provisioning.create_account"]
