"""Bad input is the caller's mistake: a documented error, and nothing written.

The library raises an :class:`InputError` subclass naming what was wrong; the
command line turns it into exit code 2 and a message that says how to fix it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from harness.adapters.reference._deployment import Deployment
from reference_runtime import (
    ConfigError,
    InputError,
    MalformedEventError,
    RuntimeConfig,
    UnknownWorkflowError,
)
from reference_runtime import crashpoints as cp

Factory = Callable[..., Deployment]

REFUND = {"customer_id": "c1", "amount_cents": 1250, "currency": "EUR"}


def store_state(d: Deployment) -> str:
    """Everything the store holds that an ingress call could change, as JSON."""
    store = d.runtime.store
    runs = store.list_runs()
    return json.dumps(
        {
            "runs": [r.model_dump(mode="json") for r in runs],
            "snapshots": {
                r.run_id: [
                    m.model_dump(mode="json")
                    for m in (store.load(r.run_id).state, *store.load(r.run_id).pending_inbox)
                ]
                for r in runs
            },
            "audit": [e.model_dump(mode="json") for e in store.audit()],
        },
        sort_keys=True,
    )


@pytest.fixture
def d(deployment: Deployment) -> Deployment:
    """A deployment with one acme run waiting for its approval."""
    deployment.submit("refund", REFUND, tenant="acme", run_id="r1")
    assert deployment.run_worker("w0").code == 0
    return deployment


@pytest.mark.parametrize(
    ("workflow", "input", "error", "says"),
    [
        ("nope", REFUND, UnknownWorkflowError, "knows: onboarding, procurement, refund"),
        ("refund", {"customer_id": "c1"}, MalformedEventError, "lacks amount_cents, currency"),
        ("refund", {}, MalformedEventError, "required fields: customer_id, amount_cents"),
        ("refund", [("customer_id", "c1")], MalformedEventError, "must be a JSON object"),
        ("refund", "customer_id", MalformedEventError, "must be a JSON object"),
    ],
    ids=["unknown-workflow", "missing-fields", "empty", "list-of-pairs", "string"],
)
def test_a_bad_submission_raises_the_documented_error_and_writes_nothing(
    d: Deployment, workflow: str, input: Any, error: type[InputError], says: str
) -> None:
    before = store_state(d)
    with pytest.raises(error, match=re.escape(says)):
        d.runtime.submit(workflow, input, tenant="acme", run_id="r2")
    assert store_state(d) == before
    assert d.runtime.get("r2") is None


def test_a_run_needs_a_tenant_and_an_id(d: Deployment) -> None:
    before = store_state(d)
    for tenant, run_id in [("", "r2"), ("acme", "")]:
        with pytest.raises(MalformedEventError, match="non-empty tenant and run_id"):
            d.runtime.submit("refund", REFUND, tenant=tenant, run_id=run_id)
    assert store_state(d) == before


def _message(**changes: Any) -> dict[str, Any]:
    msg: dict[str, Any] = {
        "message_id": "m1",
        "tenant": "acme",
        "run_id": "r1",
        "kind": "event",
        "payload": {"event_key": "k"},
    }
    for key, value in changes.items():
        if value is None:
            msg.pop(key)
        else:
            msg[key] = value
    return msg


@pytest.mark.parametrize(
    ("message", "says"),
    [
        (_message(tenant=None), "lacks tenant"),
        (_message(message_id=None, run_id=None), "lacks message_id, run_id"),
        (_message(kind=None), "lacks kind"),
        (_message(kind="telegram"), "rejected"),
        (_message(payload=[1, 2]), "payload that is not an object"),
        (_message(run_id="no-such-run"), "'no-such-run' of tenant 'acme', which does not exist"),
        (_message(tenant="globex"), "'r1' of tenant 'globex', which does not exist"),
    ],
    ids=[
        "no-tenant",
        "no-id-no-run",
        "no-kind",
        "unknown-kind",
        "payload-not-object",
        "unknown-run",
        "other-tenants-run",
    ],
)
def test_a_malformed_inbound_message_is_refused_and_changes_nothing(
    d: Deployment, message: dict[str, Any], says: str
) -> None:
    before = store_state(d)
    with pytest.raises(MalformedEventError, match=re.escape(says)):
        d.deliver(message)
    assert store_state(d) == before
    # The refused id was not consumed: the corrected message is accepted.
    assert d.deliver(_message()) is True


# -- the command line -----------------------------------------------------


def cli(
    d: Deployment, *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("RR_")}
    full.update({**d.config.to_env(), **(env or {})})
    return subprocess.run(
        [sys.executable, "-m", "reference_runtime", *args],
        env=full,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["submit", "nope", "--input", "{}"], ["unknown workflow 'nope'", "knows: "]),
        (
            ["submit", "refund", "--input", '{"customer_id": "c1"}'],
            ["lacks amount_cents, currency", "required fields: "],
        ),
        (["submit", "refund", "--input", "{bad"], ["--input is not valid JSON", "e.g. --input"]),
        (["submit", "refund", "--input", "[1, 2]"], ["--input must be a JSON object, got list"]),
        (
            ["submit", "refund", "--input", json.dumps(REFUND), "--tenant-key", "acme"],
            ["bad tenant key 'acme'", "expected TENANT=HEXKEY"],
        ),
    ],
    ids=["unknown-workflow", "missing-fields", "bad-json", "not-an-object", "bad-key"],
)
def test_the_cli_refuses_a_bad_submission_with_exit_2_and_says_how_to_fix_it(
    make_deployment: Factory, args: list[str], says: list[str]
) -> None:
    d = make_deployment("sqlite")
    command, workflow, *rest = args
    env: dict[str, str] = {}
    if "--tenant-key" in rest:  # keys come from the environment too: test that path
        i = rest.index("--tenant-key")
        env["RR_TENANT_KEYS"] = rest[i + 1]
        rest = rest[:i]
    proc = cli(d, command, workflow, "--tenant", "acme", "--run-id", "r9", *rest, env=env)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    for part in says:
        assert part in proc.stderr, proc.stderr
    assert d.runtime.get("r9") is None


def test_the_cli_accepts_a_good_submission(make_deployment: Factory) -> None:
    d = make_deployment("sqlite")
    proc = cli(d, "submit", "refund", "--tenant", "acme", "--run-id", "r9", "--input", "{}")
    assert proc.returncode == 2  # the same command with a bad input, as a control
    proc = cli(
        d, "submit", "refund", "--tenant", "acme", "--run-id", "r9", "--input", json.dumps(REFUND)
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["run_id"] == "r9"


@pytest.mark.parametrize(
    ("message", "says", "fix"),
    [
        ('{"message_id": "m1"}', "lacks tenant, run_id, kind", "a message needs"),
        (
            json.dumps(_message(run_id="ghost")),
            "'ghost' of tenant 'acme', which does not exist",
            "reference_runtime status RUN_ID",
        ),
        ("not json", "is not valid JSON", "e.g. --message"),
        ("[1]", "must be a JSON object, got list", "e.g. --message"),
    ],
    ids=["missing-fields", "unknown-run", "bad-json", "not-an-object"],
)
def test_the_cli_refuses_a_bad_message_with_exit_2_and_says_how_to_fix_it(
    make_deployment: Factory, message: str, says: str, fix: str
) -> None:
    d = make_deployment("sqlite")
    d.submit("refund", REFUND, tenant="acme", run_id="r1")
    before = store_state(d)
    proc = cli(d, "deliver", stdin=message)
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr, proc.stderr
    assert fix in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert store_state(d) == before


# -- configuration --------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("before_intent_commit", "expected 'site=action[@n]'"),
        ("before_intent_commit=explode", "action one of kill, exit, raise, pause"),
        ("no_such_site=kill", "unknown crash point 'no_such_site'"),
        ("before_intent_commit=kill@0", "'@n' needs an integer n >= 1"),
        ("before_intent_commit=kill@x", "'@n' needs an integer n >= 1"),
    ],
)
def test_a_bad_crashpoint_spec_is_a_config_error(spec: str, says: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(says)):
        cp.parse(spec)


def test_a_worker_armed_with_a_bad_crashpoint_spec_refuses_to_start(
    make_deployment: Factory,
) -> None:
    d = make_deployment("sqlite")
    d.submit("refund", REFUND, tenant="acme", run_id="r1")
    before = store_state(d)
    exit_ = d.run_worker("w1", crash="before_intent_commit=explode")
    assert exit_.code not in (0, None)
    assert store_state(d) == before  # it claimed nothing


@pytest.mark.parametrize(
    ("keys", "says"),
    [
        ("acme", "missing '='"),
        ("acme=zz", "non-hexadecimal"),
        ("=00ff", "tenant name is empty"),
        ("acme=", "the key is empty"),
        ("acme=00ff,globex", "bad tenant key 'globex'"),
    ],
)
def test_bad_tenant_keys_are_a_config_error(keys: str, says: str) -> None:
    env = {"RR_STORE": "sqlite:///unused.db", "RR_TENANT_KEYS": keys}
    with pytest.raises(ConfigError, match=re.escape(says)) as info:
        RuntimeConfig.from_env(env)
    assert "expected TENANT=HEXKEY" in str(info.value)


def test_good_tenant_keys_round_trip_through_the_environment() -> None:
    cfg = RuntimeConfig.from_env({"RR_STORE": "sqlite:///x.db", "RR_TENANT_KEYS": "acme=00ff"})
    assert cfg.tenant_keys == {"acme": b"\x00\xff"}
    assert RuntimeConfig.from_env(cfg.to_env()).tenant_keys == cfg.tenant_keys


def test_the_cli_cancels_a_waiting_run_once_and_refuses_an_unknown_one(d: Deployment) -> None:
    proc = cli(d, "cancel", "r1", "--reason", "customer withdrew")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"] == "Cancelled"
    run = d.runtime.get("r1")
    assert run is not None and run.status.value == "Cancelled"
    assert "customer withdrew" in (run.error or "")
    audit = [e for e in d.runtime.store.audit() if e.run_id == "r1" and e.action == "cancelled"]
    assert [e.actor for e in audit] == ["operator"]
    # again: nothing left to cancel, said so, nothing written
    before = store_state(d)
    again = cli(d, "cancel", "r1")
    assert again.returncode == 1
    assert "had already ended (Cancelled)" in again.stderr
    assert store_state(d) == before
    ghost = cli(d, "cancel", "ghost")
    assert ghost.returncode == 2
    assert "no run 'ghost' in this store" in ghost.stderr
    assert "Traceback" not in ghost.stderr
    assert store_state(d) == before


@pytest.mark.parametrize("lease", [0.5, 1.0, 1.999, float("nan"), 0.0, -5.0])
def test_a_lease_too_short_to_call_out_is_a_config_error(lease: float) -> None:
    """With a lease no longer than the margin an external call needs, every
    attempt to call gave up and re-queued the run: 20,000 claims a worker,
    and a harness profile that ran for minutes (issue 13)."""
    with pytest.raises(ConfigError, match="lease_seconds must be at least 2"):
        RuntimeConfig(store_url="sqlite:///unused.db", lease_seconds=lease)


def test_the_shortest_lease_still_lets_an_approved_refund_pay_out(
    make_deployment: Factory,
) -> None:
    d = make_deployment(lease_seconds=2.0)
    d.submit("refund", REFUND, tenant="acme", run_id="r1")
    assert d.drive("r1") == "Completed"
    assert [e.action for e in d.world.effects("payments")] == ["refund"]
