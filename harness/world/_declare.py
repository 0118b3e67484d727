"""Services as data: what a declaration holds, how it is read and checked.

A service of the world is a :class:`ServiceSpec`: a name, a prefix for the
external refs it generates, its actions (each an HTTP method and path, the
status it answers, whether it has a side effect, the reply body it returns),
where it reads an idempotency key (a header or a body field, or nowhere: a
key it does not honour is ignored), where it reads a business key, and how a
past request can be looked up. The four built-in services are four such
declarations (``harness.world._services``); a user declares more in a TOML or
JSON file (:func:`load_services`) and names it to the harness::

    [[services]]
    name = "billing"
    ref_prefix = "re"
    idempotency_key = { header = "Idempotency-Key" }
    lookup = { by = "key", path = "/v1/refunds/by-key/{key}" }

    [[services.actions]]
    name = "refund"
    method = "POST"
    path = "/v1/refunds"
    status = "succeeded"
    reply = { id = "$ref", object = "refund", status = "$status", amount = "$request.amount" }

A reply field is a literal JSON value or one of ``$ref`` (the ref the world
generates for the request), ``$status`` (the action's status) and
``$request.FIELD`` (that field of the request, ``null`` if absent).

Every declaration is checked when it is read (:func:`parse_service`), never
when a request arrives: a declaration that cannot work (a lookup by key on a
service that honours no key, two actions on one method and path, an unknown
``$`` source) is refused with :class:`~harness.world.WorldUsageError` naming
the service, the field and the fix.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from ._errors import WorldUsageError
from ._model import LOOKUP, Capabilities

#: The HTTP methods an action may answer.
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
#: The reply of an action that declares none: the built-in services' body.
DEFAULT_REPLY: Mapping[str, Any] = {"status": "$status", "external_ref": "$ref"}

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
_PREFIX = re.compile(r"^[a-z0-9]{1,16}$")
_HEADER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,63}$")
_PATH = re.compile(r"^(/[A-Za-z0-9._~-]+)+$")
_SOURCES = ("$ref", "$status")


@dataclass(frozen=True)
class KeyPlace:
    """Where a key is in an HTTP request: a header, or a field of the body."""

    header: str | None = None
    field: str | None = None

    def where(self) -> str:
        return f"header {self.header}" if self.header else f"body field {self.field!r}"

    def to_dict(self) -> dict[str, str]:
        return {"header": self.header} if self.header else {"field": str(self.field)}


@dataclass(frozen=True)
class Action:
    """One action of a service: how it is reached and what it answers."""

    name: str
    path: str
    status: str
    method: str = "POST"
    #: the HTTP status of a success (2xx)
    http_status: int = 200
    side_effect: bool = True
    reply: Mapping[str, Any] = field(default_factory=lambda: dict(DEFAULT_REPLY))

    def body(self, ref: str, request: Mapping[str, Any]) -> dict[str, Any]:
        """The reply body for ``request`` applied under ``ref``."""
        return {k: _fill(v, ref, self.status, request) for k, v in self.reply.items()}

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "method": self.method,
            "path": self.path,
            "status": self.status,
            "http_status": self.http_status,
            "side_effect": self.side_effect,
            "reply": dict(self.reply),
        }


@dataclass(frozen=True)
class Lookup:
    """How a past request is found: by its idempotency key or its business
    key, at ``path`` (which holds ``{key}``)."""

    by: Literal["key", "business_key"]
    path: str
    method: str = "GET"

    def to_dict(self) -> dict[str, str]:
        return {"by": self.by, "path": self.path, "method": self.method}


@dataclass(frozen=True)
class ServiceSpec:
    """One service of the world, as declared (see the module docstring)."""

    name: str
    ref_prefix: str
    endpoints: tuple[Action, ...]
    idempotency_key: KeyPlace | None = None
    business_key: KeyPlace | None = None
    lookup: Lookup | None = None

    @cached_property
    def actions(self) -> dict[str, str]:
        """Each action's name and the status it answers, in declared order."""
        return {a.name: a.status for a in self.endpoints}

    def action(self, name: str) -> Action:
        """The declared action ``name`` (:class:`WorldUsageError` if none)."""
        for a in self.endpoints:
            if a.name == name:
                return a
        raise WorldUsageError(
            f"service {self.name!r} has no action {name!r}; it offers "
            f"{', '.join(sorted(self.actions))}"
        )

    @cached_property
    def capabilities(self) -> Capabilities:
        """What the service offers for deduplication and reconciliation
        (``side_effect``: some action has one; each action says its own)."""
        return Capabilities(
            idempotency_keys=self.idempotency_key is not None,
            lookup_by_key=self.lookup is not None and self.lookup.by == "key",
            lookup_by_business_key=self.lookup is not None and self.lookup.by == "business_key",
            side_effect=any(a.side_effect for a in self.endpoints),
        )

    def to_dict(self) -> dict[str, Any]:
        """The declaration as data: what :func:`parse_service` reads back."""
        out: dict[str, Any] = {"name": self.name, "ref_prefix": self.ref_prefix}
        if self.idempotency_key is not None:
            out["idempotency_key"] = self.idempotency_key.to_dict()
        if self.business_key is not None:
            out["business_key"] = self.business_key.to_dict()
        if self.lookup is not None:
            out["lookup"] = self.lookup.to_dict()
        out["actions"] = [a.to_dict() for a in self.endpoints]
        return out


def _fill(value: Any, ref: str, status: str, request: Mapping[str, Any]) -> Any:
    if isinstance(value, str) and value.startswith("$"):
        if value == "$ref":
            return ref
        if value == "$status":
            return status
        return request.get(value.removeprefix("$request."))
    return value


# -- reading and checking ------------------------------------------------------


def load_services(path: str | Path) -> tuple[ServiceSpec, ...]:
    """The services declared in ``path`` (TOML, or JSON for a ``.json`` file):
    a list ``services`` of declarations. Raises :class:`WorldUsageError`
    naming the file, the service and the field for anything that cannot work."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise WorldUsageError(
            f"cannot read the service declarations {str(p)!r} ({exc.strerror or exc}); "
            "give the path of a TOML or JSON file with a [[services]] list"
        ) from exc
    try:
        data = json.loads(text) if p.suffix == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        kind = "JSON" if p.suffix == ".json" else "TOML"
        raise WorldUsageError(f"{str(p)!r} is not valid {kind}: {exc}") from exc
    services = data.get("services") if isinstance(data, dict) else None
    if not isinstance(services, list) or not services:
        raise WorldUsageError(
            f"{str(p)!r} declares no service: it needs a non-empty list `services` "
            "([[services]] tables in TOML), each with a name, a ref_prefix and actions"
        )
    try:
        return check_catalogue(parse_service(s) for s in services)
    except WorldUsageError as exc:
        raise WorldUsageError(f"{str(p)!r}: {exc}") from exc


def check_catalogue(specs: Iterable[ServiceSpec]) -> tuple[ServiceSpec, ...]:
    """``specs`` if they can be served together (distinct names, no method
    and path answered twice); else :class:`WorldUsageError`."""
    out = tuple(specs)
    names: set[str] = set()
    routes: dict[tuple[str, str], str] = {}
    for spec in out:
        if spec.name in names:
            raise WorldUsageError(f"service {spec.name!r} is declared twice; give each one name")
        names.add(spec.name)
        for method, path, what in _routes(spec):
            other = routes.get((method, _shape(path)))
            if other is not None:
                raise WorldUsageError(
                    f"{what} answers {method} {path}, which {other} answers too; one method "
                    "and path can reach only one action: change one path"
                )
            routes[(method, _shape(path))] = what
    return out


def _routes(spec: ServiceSpec) -> list[tuple[str, str, str]]:
    out = [(a.method, a.path, f"{spec.name}.{a.name}") for a in spec.endpoints]
    if spec.lookup is not None:
        out.append((spec.lookup.method, spec.lookup.path, f"{spec.name}'s lookup"))
    return out


def _shape(path: str) -> str:
    """A path with its ``{key}`` made a wildcard (what a route matches)."""
    return re.sub(r"\{key\}", "*", path)


def parse_service(data: Any) -> ServiceSpec:
    """One declaration (a mapping, as in the module docstring), checked."""
    if not isinstance(data, Mapping):
        raise WorldUsageError(f"a service declaration is a table (mapping); got {data!r}")
    name = data.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise WorldUsageError(
            f"a service's name must be lowercase letters, digits and _ (starting with a "
            f"letter, at most 40); got {name!r}"
        )
    where = f"service {name!r}"
    _known(data, where, {"name", "ref_prefix", "idempotency_key", "business_key", "lookup",
                         "actions"})  # fmt: skip
    prefix = data.get("ref_prefix")
    if not isinstance(prefix, str) or not _PREFIX.match(prefix):
        raise WorldUsageError(
            f"{where}: ref_prefix (what its generated refs start with, e.g. 'pay') must be "
            f"1 to 16 lowercase letters or digits; got {prefix!r}"
        )
    idem = _key_place(data.get("idempotency_key"), f"{where}: idempotency_key")
    bkey = _key_place(data.get("business_key"), f"{where}: business_key")
    raw_actions = data.get("actions")
    if not isinstance(raw_actions, list) or not raw_actions:
        raise WorldUsageError(
            f"{where} has no actions: declare at least one ([[services.actions]] with a "
            "name, a path and the status it answers)"
        )
    actions = tuple(_action(a, where) for a in raw_actions)
    seen: set[str] = set()
    for a in actions:
        if a.name in seen:
            raise WorldUsageError(f"{where}: action {a.name!r} is declared twice")
        seen.add(a.name)
    lookup = _lookup(data.get("lookup"), where)
    if lookup is not None:
        if lookup.by == "key" and idem is None:
            raise WorldUsageError(
                f"{where}: a lookup by key needs an idempotency key to look up, and the "
                'service honours none: declare idempotency_key = { header = "..." } '
                '(or { field = "..." }), or look up by business_key'
            )
        if lookup.by == "business_key" and bkey is None:
            raise WorldUsageError(
                f"{where}: a lookup by business key needs to know where requests carry "
                'it: declare business_key = { header = "..." } or { field = "..." }'
            )
    if bkey is not None and (lookup is None or lookup.by != "business_key"):
        raise WorldUsageError(
            f"{where}: business_key is declared, but nothing uses it: a business key is "
            "what a lookup finds a past request by; declare lookup = { by = "
            '"business_key", path = "/.../{key}" } or drop business_key'
        )
    return ServiceSpec(name, prefix, actions, idem, bkey, lookup)


def _known(data: Mapping[str, Any], where: str, allowed: set[str]) -> None:
    extra = sorted(set(data) - allowed)
    if extra:
        raise WorldUsageError(
            f"{where}: unknown field(s) {', '.join(map(repr, extra))}; known: "
            f"{', '.join(sorted(allowed))}"
        )


def _key_place(data: Any, where: str) -> KeyPlace | None:
    if data is None:
        return None
    if not isinstance(data, Mapping) or len(data) != 1 or not set(data) <= {"header", "field"}:
        raise WorldUsageError(
            f'{where} must say where the key is: {{ header = "Idempotency-Key" }} or '
            f'{{ field = "request_id" }}; got {data!r}'
        )
    header, fld = data.get("header"), data.get("field")
    if header is not None and (not isinstance(header, str) or not _HEADER.match(header)):
        raise WorldUsageError(f"{where}: {header!r} is not an HTTP header name")
    if fld is not None and (not isinstance(fld, str) or not fld):
        raise WorldUsageError(f"{where}: a body field's name is a non-empty string; got {fld!r}")
    return KeyPlace(header=header, field=fld)


def _method(value: Any, where: str, default: str) -> str:
    method = default if value is None else value
    if not isinstance(method, str) or method.upper() not in METHODS:
        raise WorldUsageError(f"{where}: method must be one of {', '.join(METHODS)}; got {value!r}")
    return method.upper()


def _path(value: Any, where: str, *, key: bool) -> str:
    ok = isinstance(value, str) and _PATH.match(value.replace("{key}", "k"))
    if ok and key and value.count("{key}") != 1:
        ok = False
    if ok and not key and "{" in value:
        ok = False
    if not ok:
        hold = "exactly one {key} where the key goes, e.g. /v1/refunds/by-key/{key}"
        raise WorldUsageError(
            f"{where}: path must start with / and hold only letters, digits and ._~- "
            f"between slashes{' and ' + hold if key else ' (no {...} parts)'}; got {value!r}"
        )
    return str(value)


def _action(data: Any, service: str) -> Action:
    if not isinstance(data, Mapping):
        raise WorldUsageError(f"{service}: an action is a table (mapping); got {data!r}")
    name = data.get("name")
    if not isinstance(name, str) or not _NAME.match(name) or name == LOOKUP:
        raise WorldUsageError(
            f"{service}: an action's name must be lowercase letters, digits and _ (and not "
            f"{LOOKUP!r}, which names lookups); got {name!r}"
        )
    where = f"{service}, action {name!r}"
    _known(data, where, {"name", "method", "path", "status", "http_status", "side_effect",
                         "reply"})  # fmt: skip
    status = data.get("status")
    if not isinstance(status, str) or not status:
        raise WorldUsageError(
            f"{where}: status (the word its reply's status says when applied, e.g. "
            f"'succeeded') must be a non-empty string; got {status!r}"
        )
    code = data.get("http_status", 200)
    if isinstance(code, bool) or not isinstance(code, int) or not 200 <= code <= 299:
        raise WorldUsageError(
            f"{where}: http_status is the status of a success, 200 to 299; got {code!r}"
        )
    side = data.get("side_effect", True)
    if not isinstance(side, bool):
        raise WorldUsageError(f"{where}: side_effect is true or false; got {side!r}")
    reply = data.get("reply", DEFAULT_REPLY)
    if not isinstance(reply, Mapping) or not reply:
        raise WorldUsageError(
            f"{where}: reply is a table of the reply body's fields; got {reply!r}"
        )
    for key, value in reply.items():
        if isinstance(value, str) and value.startswith("$"):
            if value not in _SOURCES and not (
                value.startswith("$request.") and len(value) > len("$request.")
            ):
                raise WorldUsageError(
                    f"{where}: reply field {key!r} is {value!r}; a $ value is one of $ref, "
                    "$status or $request.FIELD"
                )
        else:
            try:
                json.dumps(value, allow_nan=False)
            except (TypeError, ValueError) as exc:
                raise WorldUsageError(
                    f"{where}: reply field {key!r} is not plain JSON ({exc})"
                ) from exc
    return Action(
        name=name,
        path=_path(data.get("path"), where, key=False),
        status=status,
        method=_method(data.get("method"), where, "POST"),
        http_status=code,
        side_effect=side,
        reply=dict(reply),
    )


def _lookup(data: Any, service: str) -> Lookup | None:
    if data is None:
        return None
    where = f"{service}: lookup"
    if not isinstance(data, Mapping):
        raise WorldUsageError(f"{where} is a table (by, path); got {data!r}")
    _known(data, where, {"by", "path", "method"})
    by = data.get("by")
    if by not in ("key", "business_key"):
        raise WorldUsageError(f"{where}: by is 'key' or 'business_key'; got {by!r}")
    return Lookup(
        by=by,
        path=_path(data.get("path"), where, key=True),
        method=_method(data.get("method"), where, "GET"),
    )
