"""The world's HTTP face answers as WorldClient does: one suite, both faces.

Every test of the first part runs twice, over :class:`WorldClient` and over
HTTP (httpx against ``World.serve_http()``), and reads the same records from
the world: effects, deduplication, lookups, every fault, and the kill of the
caller's process just before or after the world applies its request -- a
process that the HTTP face finds from its socket alone. The second part is
what only HTTP has (status codes, keys in a body field, form bodies).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import pytest

from harness.model import ArmModelFault, ArmWorldFault, Step
from harness.world import (
    SERVICES,
    Caller,
    FaultRule,
    Rejected,
    Unknown,
    World,
    declare_services,
    load_services,
)
from harness.world._http import UNATTRIBUTED
from harness.world._services import forget_services

httpx = pytest.importorskip("httpx")

CALLER = Caller(tenant="t1", run_id="r1", op_id="op1", worker_id="w1", fencing_token=3)


@dataclass(frozen=True)
class Answer:
    """What a caller saw, whichever face it called."""

    kind: Literal["ok", "rejected", "unknown"]
    body: dict[str, Any] = field(default_factory=dict)
    deduplicated: bool = False
    reason: str = ""


class Face(Protocol):
    name: str

    def call(
        self, service: str, action: str, request: dict[str, Any], key: str | None = None,
        bkey: str | None = None,
    ) -> Answer: ...  # fmt: skip

    def lookup(self, service: str, key: str) -> Answer | None: ...

    def in_a_child(self, service: str, action: str, request: dict[str, Any]) -> str: ...


class ClientFace:
    name = "client"

    def __init__(self, world: World) -> None:
        self.world, self.client = world, world.client()

    def call(
        self, service: str, action: str, request: dict[str, Any], key: str | None = None,
        bkey: str | None = None,
    ) -> Answer:  # fmt: skip
        try:
            r = self.client.call(
                service, action, request, idempotency_key=key, business_key=bkey, caller=CALLER
            )
        except Rejected as exc:
            return Answer("rejected", reason=exc.reason)
        except Unknown:
            return Answer("unknown")
        return Answer("ok", r.body, r.deduplicated)

    def lookup(self, service: str, key: str) -> Answer | None:
        caps = self.client.capabilities(service)
        kw = {"idempotency_key" if caps.lookup_by_key else "business_key": key}
        try:
            found = self.client.lookup(service, tenant=CALLER.tenant, **kw)
        except Rejected as exc:
            return Answer("rejected", reason=exc.reason)
        except Unknown:
            return Answer("unknown")
        return None if found is None else Answer("ok", found.body)

    def in_a_child(self, service: str, action: str, request: dict[str, Any]) -> str:
        return (
            "from harness.world import Caller, open_world\n"
            f"c = open_world({self.world.path!r})\n"
            f"c.call({service!r}, {action!r}, {request!r}, caller=Caller(**{vars(CALLER)!r}))\n"
        )

    def close(self) -> None:
        self.client.close()


class HttpFace:
    name = "http"

    def __init__(self, world: World) -> None:
        self.face = world.serve_http()
        # The worker's part, not the app's: this process (and those it starts) calls for CALLER.
        world.client().attribute(CALLER)
        self.http = httpx.Client(base_url=self.face.url, timeout=60)

    def _request(
        self, service: str, action: str, request: dict[str, Any], key: str | None,
        bkey: str | None,
    ) -> tuple[Any, dict[str, str], dict[str, Any]]:  # fmt: skip
        spec = SERVICES[service]
        declared = spec.action(action)
        headers: dict[str, str] = {}
        body = dict(request)
        for place, value in ((spec.idempotency_key, key), (spec.business_key, bkey)):
            if place is not None and value is not None:
                if place.header:
                    headers[place.header] = value
                else:
                    body[str(place.field)] = value
        return declared, headers, body

    def call(
        self, service: str, action: str, request: dict[str, Any], key: str | None = None,
        bkey: str | None = None,
    ) -> Answer:  # fmt: skip
        declared, headers, body = self._request(service, action, request, key, bkey)
        try:
            r = self.http.request(declared.method, declared.path, json=body, headers=headers)
        except (httpx.RemoteProtocolError, httpx.ReadError):
            return Answer("unknown")
        if r.status_code == declared.http_status:
            return Answer("ok", r.json(), r.headers.get("Idempotent-Replayed") == "true")
        assert r.status_code in (400, 422, 503), (r.status_code, r.text)
        return Answer("rejected", reason=r.json()["error"]["message"])

    def lookup(self, service: str, key: str) -> Answer | None:
        lookup = SERVICES[service].lookup
        assert lookup is not None
        try:
            r = self.http.request(lookup.method, lookup.path.replace("{key}", key))
        except (httpx.RemoteProtocolError, httpx.ReadError):
            return Answer("unknown")
        if r.status_code == 404:
            return None
        if r.status_code == 400:
            return Answer("rejected", reason=r.json()["error"]["message"])
        assert r.status_code == 200, r.text
        return Answer("ok", r.json())

    def in_a_child(self, service: str, action: str, request: dict[str, Any]) -> str:
        declared = SERVICES[service].action(action)
        # The app's code, unmodified: an HTTP call; nothing says who it is.
        return (
            "import httpx\n"
            f"httpx.request({declared.method!r}, {self.face.url + declared.path!r}, "
            f"json={request!r}, timeout=60)\n"
        )

    def close(self) -> None:
        self.http.close()
        self.face.close()


@pytest.fixture(params=["client", "http"])
def face(request: pytest.FixtureRequest, world: World) -> Iterator[Face]:
    made: ClientFace | HttpFace = (
        ClientFace(world) if request.param == "client" else HttpFace(world)
    )
    yield made
    made.close()


def outcomes(world: World) -> list[tuple[str, str, bool]]:
    return [(r.action, r.outcome, r.applied) for r in world.requests()]


# -- the same service tests over both faces ------------------------------------------


def test_an_applied_call_answers_its_status_and_ref_and_is_one_effect_of_the_caller(
    face: Face, world: World
) -> None:
    answer = face.call("payments", "charge", {"amount": 5}, key="k1")

    assert answer.kind == "ok" and not answer.deduplicated
    assert answer.body["status"] == "succeeded"
    (effect,) = world.effects()
    assert answer.body["external_ref"] == effect.external_ref
    assert (effect.idempotency_key, effect.request) == ("k1", {"amount": 5})
    # Over HTTP, the world found this process from the socket, and its run
    # from what the worker attributed to it.
    assert effect.pid == os.getpid()
    assert (effect.tenant, effect.run_id, effect.worker_id) == ("t1", "r1", "w1")


def test_a_repeated_key_is_answered_with_the_first_reply_and_applied_once(
    face: Face, world: World
) -> None:
    first = face.call("payments", "refund", {"amount": 5}, key="k1")
    again = face.call("payments", "refund", {"amount": 5}, key="k1")

    assert again.deduplicated and again.body == first.body
    assert outcomes(world) == [("refund", "applied", True), ("refund", "deduplicated", False)]


def test_a_reply_without_its_reference_applied_the_effect_and_a_repeat_gets_it_whole(
    face: Face, world: World
) -> None:
    """``reply_missing_ref``: the service applied the call and answered
    success, without the reference; the world's record keeps the whole
    reply, so the same call repeated under its key is answered whole."""
    world.arm(FaultRule("payments", nth=1, mode="reply_missing_ref", action="refund"))
    partial = face.call("payments", "refund", {"amount": 5}, key="k1")
    again = face.call("payments", "refund", {"amount": 5}, key="k1")

    assert partial.kind == "ok" and "external_ref" not in partial.body, partial
    (effect,) = world.effects()
    assert again.deduplicated and again.body["external_ref"] == effect.external_ref
    assert outcomes(world) == [("refund", "applied", True), ("refund", "deduplicated", False)]
    assert [(f.mode, f.run_id) for f in world.fired()] == [("reply_missing_ref", "r1")]


def test_a_key_reused_for_another_request_is_refused_and_applies_nothing(
    face: Face, world: World
) -> None:
    face.call("payments", "charge", {"amount": 5}, key="k1")
    answer = face.call("payments", "charge", {"amount": 6}, key="k1")

    assert answer.kind == "rejected" and "first used with a different request" in answer.reason
    assert len(world.effects()) == 1


def test_a_service_without_keys_applies_every_repeat_and_a_read_applies_none(
    face: Face, world: World
) -> None:
    for _ in range(2):
        assert face.call("email", "send", {"to": "a@b"}, key="k").kind == "ok"
    assert face.call("identity", "verify", {"who": "c-1"}).body["status"] == "verified"

    assert outcomes(world) == [
        ("send", "applied", True),
        ("send", "applied", True),
        ("verify", "applied", False),
    ]


def test_a_lookup_finds_the_first_reply_by_key_or_business_key_or_nothing(
    face: Face, world: World
) -> None:
    paid = face.call("payments", "charge", {"amount": 5}, key="k1")
    made = face.call("provisioning", "create_account", {"plan": "pro"}, bkey="cust-1")

    assert face.lookup("payments", "k1") == Answer("ok", paid.body)
    assert face.lookup("payments", "k2") is None
    assert face.lookup("provisioning", "cust-1") == Answer("ok", made.body)
    assert [r.action for r in world.requests()].count("lookup") == 3
    assert len(world.effects()) == 2


@pytest.mark.parametrize(
    ("mode", "seen", "outcome", "applied"),
    [
        ("reject", "rejected", "rejected", False),
        ("unavailable", "rejected", "rejected", False),
        ("timeout_before_apply", "unknown", "unknown_not_applied", False),
        ("apply_then_timeout", "unknown", "unknown_applied", True),
        ("slow", "ok", "applied", True),
    ],
)
def test_each_fault_answers_as_the_world_says_and_is_recorded(
    face: Face, world: World, mode: str, seen: str, outcome: str, applied: bool
) -> None:
    rule = FaultRule("payments", nth=1, mode=mode, delay=0.01 if mode == "slow" else 0.0)  # type: ignore[arg-type]
    world.arm(rule)

    answer = face.call("payments", "charge", {"amount": 5}, key="k1")

    assert answer.kind == seen
    assert outcomes(world) == [("charge", outcome, applied)]
    (fired,) = world.fired()
    assert (fired.mode, fired.pid) == (mode, os.getpid())
    # A retry with the same key finds what really happened.
    retry = face.call("payments", "charge", {"amount": 5}, key="k1")
    assert (retry.kind, retry.deduplicated) == ("ok", applied)
    assert len(world.effects()) == 1


def test_a_service_down_for_three_calls_turns_away_exactly_those(face: Face, world: World) -> None:
    for nth in (1, 2, 3):
        world.arm(FaultRule("email", nth=nth, mode="unavailable"))

    kinds = [face.call("email", "send", {"n": n}).kind for n in range(4)]

    assert kinds == ["rejected", "rejected", "rejected", "ok"]
    assert [r.outcome for r in world.requests()] == ["rejected"] * 3 + ["applied"]


@pytest.mark.parametrize(
    ("mode", "seen"), [("reject", "rejected"), ("timeout_before_apply", "unknown")]
)
def test_a_lookup_fault_refuses_or_loses_the_answer(
    face: Face, world: World, mode: str, seen: str
) -> None:
    face.call("payments", "charge", {"amount": 5}, key="k1")
    world.arm(FaultRule("payments", nth=1, mode=mode, action="lookup"))  # type: ignore[arg-type]

    answer = face.lookup("payments", "k1")

    assert answer is not None and answer.kind == seen
    assert face.lookup("payments", "k1") is not None  # the next lookup is answered


@pytest.mark.parametrize(
    ("mode", "applied"), [("kill_before_apply", False), ("kill_after_apply", True)]
)
def test_the_callers_process_is_killed_just_before_or_after_the_world_applies(
    face: Face, world: World, mode: str, applied: bool
) -> None:
    """A caller in a process of its own; over HTTP, found from its socket
    (the app says nothing about itself) and SIGKILLed with no reply."""
    world.arm(FaultRule("payments", nth=1, mode=mode))  # type: ignore[arg-type]
    code = face.in_a_child("payments", "charge", {"amount": 5})

    child = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )

    assert child.returncode == -signal.SIGKILL, child.stderr
    (record,) = world.requests()
    assert (record.outcome, record.applied) == (mode.replace("kill", "killed"), applied)
    assert record.pid not in (0, os.getpid())
    assert (record.tenant, record.run_id) == ("t1", "r1")
    (fired,) = world.fired()
    assert fired.pid == record.pid
    # The world goes on: the next call is answered.
    assert face.call("payments", "charge", {"amount": 6}).kind == "ok"


# -- what only HTTP has ------------------------------------------------------------------

BILLING = {
    "name": "billing",
    "ref_prefix": "re",
    "idempotency_key": {"field": "request_id"},
    "lookup": {"by": "key", "path": "/v1/refunds/by-key/{key}"},
    "actions": [
        {
            "name": "refund",
            "path": "/v1/refunds",
            "status": "succeeded",
            "http_status": 201,
            "reply": {"id": "$ref", "object": "refund", "amount": "$request.amount"},
        }
    ],
}


@pytest.fixture
def billing_world(tmp_path: Path) -> Iterator[World]:
    path = tmp_path / "services.json"
    path.write_text(json.dumps({"services": [BILLING]}))
    declare_services(load_services(path))
    world = World(tmp_path / "billing.db").create()
    yield world
    world.close()
    forget_services(["billing"])


def test_a_declared_service_answers_its_status_fields_and_key_from_a_body_field(
    billing_world: World,
) -> None:
    billing_world.client().attribute(CALLER)
    with billing_world.serve_http() as face, httpx.Client(base_url=face.url) as http:
        form = {"amount": "700", "request_id": "rq-1"}
        first = http.post("/v1/refunds", data=form)  # form-encoded, as many providers take
        again = http.post("/v1/refunds", data=form)
        found = http.get("/v1/refunds/by-key/rq-1")

    assert first.status_code == 201
    body = first.json()
    assert body == {"id": body["id"], "object": "refund", "amount": "700"}
    assert body["id"].startswith("re-")
    assert (again.status_code, again.json(), again.headers["Idempotent-Replayed"]) == (
        201,
        body,
        "true",
    )
    assert found.json() == body
    (effect,) = billing_world.effects()
    assert effect.idempotency_key == "rq-1"


def test_a_requests_client_gets_the_same_answers_as_httpx(world: World) -> None:
    """Nothing in the face depends on the client library: ``requests``, as a
    LangGraph tool would use it, is answered and identified the same way."""
    requests = pytest.importorskip("requests")
    world.client().attribute(CALLER)
    world.arm(FaultRule("payments", nth=2, mode="apply_then_timeout"))
    # Each response closed once read, the session with the face: a response
    # left to the collector held its socket past the test, and the
    # ResourceWarning of its collection failed whichever test ran then
    # (the CLI fuzz test, CI of stop 29).
    with world.serve_http() as face, requests.Session() as http:
        url, key = face.url + "/payments/charges", {"Idempotency-Key": "k1"}
        with http.post(url, json={"amount": 5}, headers=key, timeout=60) as first:
            first.content  # noqa: B018  (read before the connection is let go)
        with pytest.raises(requests.ConnectionError):
            http.post(url, json={"amount": 6}, headers={"Idempotency-Key": "k2"}, timeout=60)
        with http.post(url, json={"amount": 5}, headers=key, timeout=60) as again:
            again.content  # noqa: B018

    assert first.status_code == again.status_code == 200
    assert again.json() == first.json() and again.headers["Idempotent-Replayed"] == "true"
    assert [(r.outcome, r.pid, r.run_id) for r in world.requests()] == [
        ("applied", os.getpid(), "r1"),
        ("unknown_applied", os.getpid(), "r1"),
        ("deduplicated", os.getpid(), "r1"),
    ]


def test_a_request_from_a_process_nobody_attributed_is_recorded_as_unattributed(
    world: World,
) -> None:
    with world.serve_http() as face:
        r = httpx.post(face.url + "/email/send", json={"to": "a@b"})

    assert r.status_code == 200
    (record,) = world.requests()
    assert (record.tenant, record.run_id, record.pid) == (UNATTRIBUTED, None, os.getpid())


def test_a_kill_fault_never_kills_the_process_that_serves_the_world(world: World) -> None:
    """The test runner serves the world and calls it: the kill cannot
    happen, so the world answers 500 saying why and records nothing."""
    world.arm(FaultRule("payments", nth=1, mode="kill_before_apply"))
    with world.serve_http() as face:
        r = httpx.post(face.url + "/payments/charges", json={"amount": 5})

    assert r.status_code == 500
    assert "which serves the world" in r.json()["error"]["message"]
    assert world.requests() == [] and world.fired() == []
    assert not world.rules()[0].fired


def test_a_wrong_path_or_body_is_answered_with_what_to_fix(world: World) -> None:
    with world.serve_http() as face, httpx.Client(base_url=face.url) as http:
        nowhere = http.post("/payments/charge", json={})
        not_json = http.post(
            "/payments/charges", content=b"{", headers={"content-type": "application/json"}
        )
        a_list = http.post("/payments/charges", json=[1])

    assert nowhere.status_code == 404
    assert "POST /payments/charges" in nowhere.json()["error"]["message"]
    assert not_json.status_code == 400 and "not JSON" in not_json.json()["error"]["message"]
    assert a_list.status_code == 400 and "JSON object" in a_list.json()["error"]["message"]
    assert world.requests() == []


# -- the example: an app that calls the payments API with httpx, unchanged -----------


KILL_AFTER_REFUND = ArmWorldFault(service="payments", action="refund", mode="kill_after_apply")
RATE_LIMITED = ArmModelFault(mode="rate_limited")


def _example(
    app: str,
    workdir: Path,
    history: list[dict[str, Any]] | None = None,
    faults: tuple[Step, ...] = (KILL_AFTER_REFUND,),
) -> dict[str, str]:
    from examples.http_refund.adapter import HttpRefundAdapter
    from harness import Engine, load_settings
    from harness.model import Quiesce, RunSpec, RunWorker, Scenario, Submit

    run = RunSpec(
        run_id="r1",
        tenant="acme",
        workflow="refund",
        input={"customer_id": "c-1", "amount_cents": 1250, "currency": "EUR"},
    )
    scenario = Scenario(
        name="faults-around-the-refund",
        steps=(Submit(run=run), *faults, RunWorker(worker_id="w1"), Quiesce()),
    )
    engine = Engine(HttpRefundAdapter(app), load_settings("dev", start=workdir), workdir=workdir)
    example = engine.execute(scenario, folder=workdir / "example")
    if history is not None:
        lines = (workdir / "example" / "history.jsonl").read_text().splitlines()
        history.extend(json.loads(line) for line in lines)
    return {r.name: r.verdict.value for r in example.results}


@pytest.mark.slow
def test_the_http_apps_worker_killed_after_the_refund_refunds_twice_without_a_key(
    tmp_path: Path,
) -> None:
    """The world kills the worker it found from the socket right after the
    refund is applied; the naive app runs the saved tool call again."""
    verdicts = _example("naive", tmp_path)
    assert verdicts["exactly_once_effects"] == "fail", verdicts


@pytest.mark.slow
def test_the_same_kill_is_harmless_to_the_app_that_sends_an_idempotency_key(
    tmp_path: Path,
) -> None:
    history: list[dict[str, Any]] = []
    verdicts = _example("careful", tmp_path, history)
    assert verdicts["exactly_once_effects"] == "pass", verdicts
    assert verdicts["resume_equivalence"] == "pass", verdicts
    # each call of the model is in the history, attributed, with its tokens;
    # the conversation it was asked is left in the world's file
    calls = [e["value"] for e in history if e["f"] == "model"]
    assert calls and all(c["run_id"] == "r1" and c["tenant"] == "acme" for c in calls), calls
    assert {c["worker_id"] for c in calls} >= {"w1"}, calls
    assert all(c["prompt_tokens"] > 0 and c["completion_tokens"] > 0 for c in calls), calls
    assert all("request" not in c and c["reply"] for c in calls), calls
    assert [c["seq"] for c in calls] == sorted({c["seq"] for c in calls}), "each call once"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("faults", "verdict"),
    [
        ((KILL_AFTER_REFUND,), "pass"),
        ((RATE_LIMITED,), "pass"),
        ((RATE_LIMITED, KILL_AFTER_REFUND), "fail"),
    ],
    ids=["kill", "rate-limit", "rate-limit-then-kill"],
)
def test_a_key_from_the_models_call_id_fails_only_under_a_rate_limit_and_a_kill(
    tmp_path: Path, faults: tuple[Step, ...], verdict: str
) -> None:
    """``call_keyed`` keys the refund on the model's tool-call id. The
    agent saves each call before it runs it, so a kill alone is harmless
    (the saved call, its id, run again); a rate limit alone is too (one
    refund). After a rate limit the agent runs the retried call before
    saving it: killed then, the next worker asks the model again and a
    real model's new call id is a new key -- a second refund."""
    verdicts = _example("call_keyed", tmp_path, faults=faults)
    assert verdicts["exactly_once_effects"] == verdict, verdicts


# -- the scripted model: an OpenAI-compatible endpoint -----------------------------------

SCRIPT = {
    "steps": [{"tool": "refund", "arguments": "$user"}, {"content": "Refunded: $tool_output"}]
}
TOOLS = [
    {
        "type": "function",
        "function": {"name": "refund", "parameters": {"type": "object", "properties": {}}},
    }
]


@pytest.mark.slow  # the openai client's import is most of it
def test_the_openai_client_gets_the_scripts_tool_call_then_its_answer(world: World) -> None:
    openai = pytest.importorskip("openai")
    from harness.world._chat import parse_chat_script

    world.client().attribute(CALLER)
    user = {"role": "user", "content": json.dumps({"customer_id": "c-1", "amount_cents": 5})}
    # The client closed with the face: a pooled connection left to the
    # garbage collector is an "unclosed socket" in whichever test runs then.
    with (
        world.serve_http(model=parse_chat_script(SCRIPT)) as face,
        openai.OpenAI(base_url=face.url + "/v1", api_key="none", max_retries=0) as model,
    ):
        first = model.chat.completions.create(model="m", messages=[user], tools=TOOLS)
        (call,) = first.choices[0].message.tool_calls
        conversation = [
            user,
            first.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "pay-1"},
        ]
        answer = model.chat.completions.create(model="m", messages=conversation, tools=TOOLS)
        # A worker that resumes the conversation gets the same reply.
        again = model.chat.completions.create(model="m", messages=[user], tools=TOOLS)

    assert (call.function.name, json.loads(call.function.arguments)) == (
        "refund",
        {"customer_id": "c-1", "amount_cents": 5},
    )
    assert first.choices[0].finish_reason == "tool_calls"
    assert answer.choices[0].message.content == "Refunded: pay-1"
    # ... the same call, under a new id, as a real model's
    redo = again.choices[0].message.tool_calls[0]
    assert (redo.function.name, redo.function.arguments) == ("refund", call.function.arguments)
    assert redo.id != call.id
    calls = world.model_calls()
    assert [(c["step"], c["pid"], c["run_id"]) for c in calls] == [
        (0, os.getpid(), "r1"),
        (1, os.getpid(), "r1"),
        (0, os.getpid(), "r1"),
    ]
    assert all(c["prompt_tokens"] > 0 and c["completion_tokens"] > 0 for c in calls)
    assert first.usage is not None and first.usage.total_tokens == (
        calls[0]["prompt_tokens"] + calls[0]["completion_tokens"]
    )
    assert world.requests() == []  # a model call is never an effect


@pytest.mark.parametrize(
    ("script", "says"),
    [
        ({"steps": []}, "at least one step"),
        ({"steps": [{"tool": "refund", "content": "x"}]}, "exactly one"),
        ({"steps": [{"tool": "refund", "arguments": [1]}]}, r"JSON object, .\$user. or"),
        ({"steps": [{"content": 3}]}, "content is a text"),
        ({"steps": [{"tool": "refund", "arguments": {}, "colour": 1}]}, "a table with tool"),
    ],
)
def test_a_model_script_that_cannot_work_is_refused(script: dict[str, Any], says: str) -> None:
    from harness.world import WorldUsageError
    from harness.world._chat import parse_chat_script

    with pytest.raises(WorldUsageError, match=says):
        parse_chat_script(script)


# -- finding the process behind a connection ------------------------------------------------


def test_a_connections_socket_and_process_are_found_and_a_closed_one_is_not_the_listener() -> None:
    """The kernel's socket lookup falls back to the listening socket of a
    port whose connection is gone: taken for the connection, the face would
    shut its own listener down. Only the very connection is ever found."""
    import socket

    from harness.world._proc import peer_pid, socket_inode

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        client = socket.create_connection(listener.getsockname())
        accepted, _ = listener.accept()
        server_end, client_end = listener.getsockname(), client.getsockname()

        assert socket_inode(client_end, server_end) == os.fstat(client.fileno()).st_ino
        assert socket_inode(server_end, client_end) == os.fstat(accepted.fileno()).st_ino
        assert peer_pid(client_end, server_end) == os.getpid()

        client.close()
        accepted.close()
        assert socket_inode(server_end, client_end) is None
        assert socket_inode(client_end, server_end) is None


@pytest.mark.slow
def test_the_report_counts_the_models_calls_and_tokens_and_a_merge_sums_them(
    tmp_path: Path,
) -> None:
    """A short search of the careful app: the report's ``model_usage``
    counts its scenarios' model calls, with their tokens, on the summary's
    line; two shards merge into the sum."""
    import harness
    from harness.report import Report, merge_reports

    spec = "examples.http_refund.adapter:HttpRefundAdapter"
    shards = []
    for k in (1, 2):
        shards.append(
            harness.run(
                spec,
                options={"app": "careful"},
                profile="dev",
                max_examples=2,
                targeted=False,
                seed=0,
                shard=f"{k}/2",
                report_dir=tmp_path / f"s{k}",
            )
        )
    for report in shards:
        usage = report.model_usage
        assert usage["calls"] > 0 and usage["prompt_tokens"] > usage["calls"], usage
        assert usage["completion_tokens"] > 0, usage
        assert f"model: {usage['calls']} calls" in (report.model_line() or "")
    merged = merge_reports([r.folder for r in shards if r.folder], tmp_path / "merged")
    assert isinstance(merged, Report)
    assert merged.model_usage == {
        k: shards[0].model_usage[k] + shards[1].model_usage[k] for k in shards[0].model_usage
    }


@pytest.mark.slow
@pytest.mark.parametrize(("app", "verdict"), [("careful", "pass"), ("naive", "fail")])
def test_a_refund_answered_without_its_reference_is_not_recorded_and_not_done_twice(
    tmp_path: Path, app: str, verdict: str
) -> None:
    """The payments API applies the refund and answers success without the
    refund's reference: the agent's tool cannot read it and raises, the
    call stays saved, and the next worker runs it again. Under the ticket's
    key the provider answers the first refund, whole; without one, it
    refunds again."""
    missing = ArmWorldFault(service="payments", action="refund", mode="reply_missing_ref")
    history: list[dict[str, Any]] = []
    verdicts = _example(app, tmp_path, history, faults=(missing,))
    assert verdicts["exactly_once_effects"] == verdict, verdicts
    fired = [e["value"] for e in history if e["f"] == "fault"]
    assert [f["kind"] for f in fired] == ["tool_reply_missing_ref"], fired
    assert fired[0]["runs"] == ["r1"], fired
