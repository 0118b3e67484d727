"""Services as data: the built-in four are declarations, a user declares more,
and a declaration that cannot work is refused when it is read."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main
from harness.world import (
    SERVICES,
    Caller,
    ServiceSpec,
    World,
    WorldUsageError,
    declare_services,
    load_services,
    service_catalogue,
)
from harness.world._declare import parse_service
from harness.world._services import BUILTIN, forget_services

BILLING: dict[str, Any] = {
    "name": "billing",
    "ref_prefix": "re",
    "idempotency_key": {"header": "Idempotency-Key"},
    "lookup": {"by": "key", "path": "/v1/refunds/by-key/{key}"},
    "actions": [
        {
            "name": "refund",
            "path": "/v1/refunds",
            "status": "succeeded",
            "http_status": 201,
            "reply": {
                "id": "$ref",
                "object": "refund",
                "status": "$status",
                "amount": "$request.amount",
            },
        },
        {
            "name": "balance",
            "method": "GET",
            "path": "/v1/balance",
            "status": "available",
            "side_effect": False,
        },
    ],
}


@pytest.fixture(autouse=True)
def _forget() -> Iterator[None]:
    """Each test starts and ends with the built-in services only."""
    forget_services(list(SERVICES))
    yield
    forget_services(list(SERVICES))


def write(tmp_path: Path, *services: dict[str, Any], name: str = "services.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"services": list(services)}))
    return path


def test_the_four_built_in_services_are_declarations_that_read_back_unchanged() -> None:
    assert [s.name for s in BUILTIN] == ["payments", "provisioning", "email", "identity"]
    for spec in BUILTIN:
        assert parse_service(json.loads(json.dumps(spec.to_dict()))) == spec
    payments = SERVICES["payments"]
    assert payments.actions == {"charge": "succeeded", "refund": "refunded"}
    assert payments.idempotency_key is not None and payments.idempotency_key.header
    assert SERVICES["identity"].capabilities.side_effect is False


def test_a_declared_service_replies_with_its_fields_and_honours_its_key(tmp_path: Path) -> None:
    declare_services(load_services(write(tmp_path, BILLING)))
    world = World(tmp_path / "world.db", clock=lambda: 0.0).create()
    with world, world.client() as client:
        caller = Caller(tenant="t1", run_id="r1")
        first = client.call(
            "billing", "refund", {"amount": 700}, idempotency_key="k", caller=caller
        )
        again = client.call(
            "billing", "refund", {"amount": 700}, idempotency_key="k", caller=caller
        )
        read = client.call("billing", "balance", {}, caller=caller)

        assert first.body == {
            "id": first.external_ref,
            "object": "refund",
            "status": "succeeded",
            "amount": 700,
        }
        assert first.external_ref.startswith("re-")
        assert again.deduplicated and again.body == first.body
        assert client.lookup("billing", idempotency_key="k", tenant="t1") == first
        assert read.body["status"] == "available"
        assert [(e.action, e.applied) for e in world.requests() if e.action != "lookup"] == [
            ("refund", True),
            ("refund", False),
            ("balance", False),
        ]


def test_a_worker_process_that_opens_the_world_knows_its_declared_services(
    tmp_path: Path,
) -> None:
    """The world's file records what the creating process declared: a fresh
    interpreter that opens it (as a worker does) can call the service."""
    declare_services(load_services(write(tmp_path, BILLING)))
    world = World(tmp_path / "world.db").create()
    code = (
        "import sys\n"
        "from harness.world import Caller, open_world\n"
        "c = open_world(sys.argv[1])\n"
        "r = c.call('billing', 'refund', {'amount': 5}, idempotency_key='k', "
        "caller=Caller('t1', 'r1'))\n"
        "print(r.body['object'])\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, world.path], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "refund"
    assert [e.service for e in world.effects()] == ["billing"]
    world.close()


def test_the_catalogue_and_harness_list_services_show_the_users_services(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, BILLING)
    out = io.StringIO()
    assert main(["list", "services", "--services", str(path)], out=out) == 0
    rows = {line.split()[0]: line for line in out.getvalue().splitlines() if line.startswith("  ")}
    assert "POST /v1/refunds" in rows["billing.refund"]
    assert "GET /v1/balance" in rows["billing.balance"]
    assert "no effect" in rows["billing.balance"]
    assert "payments.charge" in rows
    assert [k.kind for k in service_catalogue()][-2:] == ["billing.refund", "billing.balance"]


def test_harness_list_services_reads_the_file_harness_services_file_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HARNESS_SERVICES_FILE", str(write(tmp_path, BILLING)))
    out = io.StringIO()
    assert main(["list", "services"], out=out) == 0
    assert "billing.refund" in out.getvalue()


def test_a_declaration_the_cli_cannot_use_exits_2_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = dict(BILLING, idempotency_key=None)
    del bad["idempotency_key"]
    path = write(tmp_path, bad)
    assert main(["list", "services", "--services", str(path)], out=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert "a lookup by key needs an idempotency key" in err and str(path) in err
    assert "billing" not in SERVICES


def _with(**changes: Any) -> dict[str, Any]:
    return {**BILLING, **changes}


def _action(**changes: Any) -> dict[str, Any]:
    return _with(actions=[{**BILLING["actions"][0], **changes}])


@pytest.mark.parametrize(
    ("declaration", "says"),
    [
        (_with(name="Billing!"), "name must be lowercase"),
        (_with(ref_prefix="RE-"), "ref_prefix"),
        (_with(actions=[]), "has no actions"),
        (_with(colour="blue"), "unknown field(s) 'colour'"),
        (_with(idempotency_key={"header": "a b"}), "not an HTTP header name"),
        (_with(idempotency_key={"header": "A", "field": "b"}), "must say where the key is"),
        (_with(lookup={"by": "email", "path": "/x/{key}"}), "by is 'key' or 'business_key'"),
        (_with(lookup={"by": "key", "path": "/x/by-key"}), "exactly one {key}"),
        (_with(business_key={"field": "email"}), "nothing uses it"),
        (_action(name="lookup"), "names lookups"),
        (_action(path="v1/refunds"), "path must start with /"),
        (_action(method="FETCH"), "method must be one of"),
        (_action(http_status=404), "http_status is the status of a success"),
        (_action(status=""), "status (the word"),
        (_action(side_effect="yes"), "side_effect is true or false"),
        (_action(reply={"id": "$uuid"}), "a $ value is one of"),
        (_with(actions=[BILLING["actions"][0], BILLING["actions"][0]]), "declared twice"),
        (
            _with(
                actions=[
                    BILLING["actions"][0],
                    {**BILLING["actions"][1], "method": "POST", "path": "/v1/refunds"},
                ]
            ),
            "one method and path can reach only one action",
        ),
    ],
)
def test_a_declaration_that_cannot_work_is_refused_naming_what_and_how(
    tmp_path: Path, declaration: dict[str, Any], says: str
) -> None:
    with pytest.raises(WorldUsageError) as info:
        load_services(write(tmp_path, declaration))
    assert says in str(info.value)


def test_a_file_that_is_not_a_declaration_list_is_refused(tmp_path: Path) -> None:
    toml = tmp_path / "s.toml"
    toml.write_text("services = 3\n")
    with pytest.raises(WorldUsageError, match="declares no service"):
        load_services(toml)
    toml.write_text("[[services]\n")
    with pytest.raises(WorldUsageError, match="is not valid TOML"):
        load_services(toml)


def test_a_toml_file_declares_the_same_service_as_its_json(tmp_path: Path) -> None:
    toml = tmp_path / "s.toml"
    toml.write_text(
        '[[services]]\nname = "billing"\nref_prefix = "re"\n'
        'idempotency_key = { header = "Idempotency-Key" }\n'
        'lookup = { by = "key", path = "/v1/refunds/by-key/{key}" }\n'
        '[[services.actions]]\nname = "refund"\npath = "/v1/refunds"\nstatus = "succeeded"\n'
        "http_status = 201\n"
        'reply = { id = "$ref", object = "refund", status = "$status", '
        'amount = "$request.amount" }\n'
        '[[services.actions]]\nname = "balance"\nmethod = "GET"\npath = "/v1/balance"\n'
        'status = "available"\nside_effect = false\n'
    )
    assert load_services(toml) == load_services(write(tmp_path, BILLING))


def test_a_name_or_route_taken_by_another_service_is_refused_at_declaration() -> None:
    payments_again = parse_service({**BILLING, "name": "payments"})
    with pytest.raises(WorldUsageError, match="'payments' is already declared \\(built in\\)"):
        declare_services([payments_again])
    clash = parse_service(
        {**BILLING, "name": "ledger", "lookup": None, "idempotency_key": None,
         "actions": [{"name": "charge", "path": "/payments/charges", "status": "ok"}]}
    )  # fmt: skip
    with pytest.raises(WorldUsageError, match="POST /payments/charges"):
        declare_services([clash])
    assert "ledger" not in SERVICES
    spec = parse_service(BILLING)
    assert declare_services([spec]) == declare_services([spec])  # the same again: no-op
    assert isinstance(SERVICES["billing"], ServiceSpec)
