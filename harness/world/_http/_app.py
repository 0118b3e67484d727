"""The world's ASGI app: an endpoint per declared action and lookup, and
the model endpoint (chat completions and responses, streamed or not),
each going through the :class:`~harness.world.WorldClient` of the world file."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import anyio.to_thread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .._chat import ModelSource
from .._client import Clock, WorldClient
from .._declare import Action, ServiceSpec
from .._errors import WorldUsageError
from .._openai_api import (
    chat_chunks,
    chat_completion,
    chat_conversation,
    chat_usage,
    response_events,
    response_item,
    response_object,
    responses_conversation,
    responses_usage,
    sse,
)
from .._services import SERVICES
from ._names import SSE
from ._replies import (
    _answer,
    _body,
    _CutReply,
    _error,
    _find_caller,
    _key,
    _NoReply,
)


def _action_endpoint(
    client: WorldClient, spec: ServiceSpec, action: Action
) -> Callable[[Request], Any]:
    def serve(request: Request, body: dict[str, Any]) -> Response:
        # One trip to a worker thread per request: on a loaded machine each
        # hop between threads waits for a core.
        try:
            keys = (
                _key(spec.idempotency_key, request, body),
                _key(spec.business_key, request, body),
            )
        except WorldUsageError as exc:
            return _error(400, "bad_request", str(exc))
        caller = _find_caller(client, request.scope)
        try:
            req = client.request(spec.name, action.name, body, *keys, caller.who)
        except WorldUsageError as exc:
            return _error(400, "bad_request", str(exc))
        try:
            outcome, done = client.perform(req, pid=caller.pid or 0, cannot_kill=caller.cannot_kill)
        except WorldUsageError as exc:
            return _error(500, "harness", str(exc))
        return _answer(action, outcome, done, caller)

    async def endpoint(request: Request) -> Response:
        try:
            body = await _body(request)
        except WorldUsageError as exc:
            return _error(400, "bad_request", str(exc))
        return await anyio.to_thread.run_sync(serve, request, body)

    return endpoint


def _lookup_endpoint(client: WorldClient, spec: ServiceSpec) -> Callable[[Request], Any]:
    lookup = spec.lookup
    assert lookup is not None

    async def endpoint(request: Request) -> Response:
        key = request.path_params["key"]
        caller = await anyio.to_thread.run_sync(_find_caller, client, request.scope)
        by_key = lookup.by == "key"
        outcome, done = await anyio.to_thread.run_sync(
            lambda: client.perform_lookup(
                spec.name,
                idempotency_key=key if by_key else None,
                business_key=None if by_key else key,
                tenant=caller.who.tenant,
                pid=caller.pid or 0,
            )
        )
        if outcome == "applied":
            if done.response is None:
                return _error(404, "not_found", f"no {spec.name} request has {lookup.by} {key!r}")
            return JSONResponse(done.response.body, 200)
        if outcome == "unknown_not_applied":
            return _NoReply()
        return _error(400, "rejected", done.error or "rejected")

    return endpoint


def _model_endpoint(
    client: WorldClient, script: ModelSource, clock: Clock, api: str
) -> Callable[[Request], Any]:
    """``POST /v1/chat/completions`` (``api`` ``chat``) or ``POST
    /v1/responses`` (``responses``): the script's reply, whole or streamed,
    in that API's shape (:mod:`._openai_api`), the call recorded first; a
    model fault armed for the call is served instead (``harness.world._chat``)."""

    async def endpoint(request: Request) -> Response:
        try:
            body = await _body(request)
            if api == "chat":
                conversation = chat_conversation(body)
            else:
                conversation = responses_conversation(body)
        except WorldUsageError as exc:
            return _error(400, "invalid_request_error", str(exc))
        try:
            # In a thread: a recorder waits there for the real model.
            step, message = await anyio.to_thread.run_sync(script.reply, conversation, body)
        except WorldUsageError as exc:
            return _error(400, "invalid_request_error", str(exc))
        caller = await anyio.to_thread.run_sync(_find_caller, client, request.scope)
        model = str(body.get("model") or "scripted")
        served = await anyio.to_thread.run_sync(
            lambda: client.record_model_call(
                caller.who,
                pid=caller.pid or 0,
                model=model,
                step=step,
                request=body,
                reply=message,
                conversation=conversation,
            )
        )
        if served.fault == "rate_limited":
            return _error(429, "rate_limit_exceeded", "Rate limit reached (injected by the "
                          "harness's model fault)", **RETRY_AFTER)  # fmt: skip
        if served.fault == "server_error":
            return _error(500, "server_error", "The server had an error while processing your "
                          "request (injected by the harness's model fault)")  # fmt: skip
        if served.fault == "timeout":
            return _NoReply()
        # The response's id: the conversation's, as the world hashed it to
        # record the call, and the how-manieth reply to it this is.
        digest = served.conversation_hash
        if served.answered:
            digest = hashlib.sha256(f"{digest}:{served.answered}".encode()).hexdigest()
        message = served.reply
        created, stream = int(clock()), bool(body.get("stream"))
        if api == "chat":
            ident = f"chatcmpl-{digest[:24]}"
            usage = chat_usage(served.prompt_tokens, served.completion_tokens)
            if not stream:
                whole = chat_completion(ident, created, model, message, usage)
                return _serve(whole, served.fault)
            options = body.get("stream_options")
            wanted = isinstance(options, dict) and bool(options.get("include_usage"))
            chunks = chat_chunks(ident, created, model, message, usage if wanted else None)
            return _stream(sse(chunks, named=False, done=True), served.fault)
        ident = digest[:24]
        used = responses_usage(served.prompt_tokens, served.completion_tokens)
        if not stream:
            item = response_item(ident, message)
            return _serve(response_object(ident, created, model, body, [item], used), served.fault)
        events = response_events(ident, created, model, body, message, used)
        return _stream(sse(events, named=True, done=False), served.fault)

    return endpoint


#: what a rate-limited model call is told to wait: the OpenAI client reads
#: ``retry-after-ms`` first (10 ms: a retry costs no test time)
RETRY_AFTER = {"retry-after": "1", "retry-after-ms": "10"}


def _serve(reply: Mapping[str, Any], fault: str | None) -> Response:
    if fault == "cut_stream":
        return _CutReply([bytes(JSONResponse(reply).body)], "application/json", streamed=False)
    return JSONResponse(reply)


def _stream(events: Iterator[bytes], fault: str | None) -> Response:
    if fault == "cut_stream":
        return _CutReply(list(events), SSE, streamed=True)
    return StreamingResponse(events, media_type=SSE)


def _app(client: WorldClient, model: ModelSource | None, clock: Clock) -> Starlette:
    routes = []
    if model is not None:
        for path, api in (("/v1/chat/completions", "chat"), ("/v1/responses", "responses")):
            routes.append(Route(path, _model_endpoint(client, model, clock, api), methods=["POST"]))
    for spec in SERVICES.values():
        for action in spec.endpoints:
            routes.append(
                Route(action.path, _action_endpoint(client, spec, action), methods=[action.method])
            )
        if spec.lookup is not None:
            routes.append(
                Route(
                    spec.lookup.path, _lookup_endpoint(client, spec), methods=[spec.lookup.method]
                )
            )
    known = ", ".join(f"{a.method} {a.path}" for spec in SERVICES.values() for a in spec.endpoints)

    async def not_found(request: Request, exc: Exception) -> Response:
        return _error(
            404,
            "no_such_action",
            f"no action answers {request.method} {request.url.path}; the world's services "
            f"answer {known} (harness list services)",
        )

    return Starlette(routes=routes, exception_handlers={404: not_found, 405: not_found})
