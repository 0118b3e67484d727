"""Command line: ``python -m reference_runtime COMMAND`` (worker, submit, cancel, ...).

Configuration comes from ``RR_*`` environment variables and the options below
(options win). Exit codes: 0 ok, 1 the command ran but found a problem, 2 bad
input or configuration, including a store that cannot be reached or is not
one (the message says what and how to fix it).

This is an operator's tool: whoever can reach the store can read (status) and
cancel any tenant's runs by run id; there is no per-tenant access control
here. Commands that only look (status) never write: they refuse a missing
store instead of creating one. JSON given to submit and deliver is limited to
{depth} levels of nesting and {size} bytes.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from . import crashpoints
from ._config import RuntimeConfig
from ._errors import InputError, RuntimeFault, StorageUnavailable
from ._inputs import MAX_BYTES, MAX_DEPTH, check_name, scan_depth
from ._runtime import Runtime

__doc__ = (__doc__ or "").format(depth=MAX_DEPTH, size=f"{MAX_BYTES:,}")


def _config(ns: argparse.Namespace) -> RuntimeConfig:
    import os

    env = dict(os.environ)
    for opt, var in [
        ("store", "RR_STORE"),
        ("schema", "RR_SCHEMA"),
        ("services", "RR_SERVICES"),
        ("services_arg", "RR_SERVICES_ARG"),
        ("clock", "RR_CLOCK"),
        ("artifacts", "RR_ARTIFACTS"),
        ("queue", "RR_QUEUE"),
        ("redis_url", "RR_REDIS_URL"),
        ("code_version", "RR_CODE_VERSION"),
    ]:
        if getattr(ns, opt, None) is not None:
            env[var] = str(getattr(ns, opt))
    if getattr(ns, "tenant_key", None):
        env["RR_TENANT_KEYS"] = ",".join(ns.tenant_key)
    return RuntimeConfig.from_env(env)


def _json_object(text: str, what: str, example: str) -> dict[str, Any]:
    """Parse ``text`` as a JSON object, or raise an InputError naming ``what``
    was wrong and showing ``example`` (the decoder's own message says neither)."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_BYTES:
        raise InputError(f"{what} is {size:,} bytes; the limit is {MAX_BYTES:,}")
    if scan_depth(text) > MAX_DEPTH:
        # Checked before decoding: the decoder dies of recursion on deep input.
        raise InputError(f"{what} nests deeper than {MAX_DEPTH} levels (the limit)")
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except (json.JSONDecodeError, ValueError) as exc:
        raise InputError(
            f"{what} is not valid JSON ({exc}); pass a JSON object, e.g. {example}"
        ) from exc
    if not isinstance(value, dict):
        raise InputError(
            f"{what} must be a JSON object, got {type(value).__name__}; e.g. {example}"
        )
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _stdin_text() -> str:
    data = sys.stdin.buffer.read(MAX_BYTES + 1)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"the message on stdin is not UTF-8 text ({exc})") from None


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m reference_runtime",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--store", help="sqlite:///path.db or postgresql://... (RR_STORE)")
        sp.add_argument("--schema", help="Postgres schema (RR_SCHEMA)")
        sp.add_argument("--clock", help="system or file:PATH (RR_CLOCK)")
        sp.add_argument("--code-version", type=int, dest="code_version")

    w = sub.add_parser("worker", help="claim and advance runnable runs")
    common(w)
    w.add_argument("--services", help="module:factory of the external services (RR_SERVICES)")
    w.add_argument("--services-arg", dest="services_arg")
    w.add_argument("--artifacts", help="artifact directory (RR_ARTIFACTS)")
    w.add_argument("--queue", choices=["store", "redis"])
    w.add_argument("--redis-url", dest="redis_url")
    w.add_argument("--tenant-key", action="append", help="TENANT=HEX approval key")
    w.add_argument("--worker-id", dest="worker_id")
    w.add_argument("--forever", action="store_true", help="poll instead of exiting when idle")

    s = sub.add_parser("submit", help="create a run")
    common(s)
    s.add_argument("workflow")
    s.add_argument("--tenant", required=True)
    s.add_argument("--run-id", required=True, dest="run_id")
    s.add_argument("--input", required=True, help="JSON object")

    d = sub.add_parser("deliver", help="deliver an inbound message (JSON on stdin or --message)")
    common(d)
    d.add_argument("--message")

    st = sub.add_parser(
        "status",
        help="print any tenant's run as JSON (an operator's view; reads only)",
    )
    common(st)
    st.add_argument("run_id")

    c = sub.add_parser(
        "cancel",
        help="cancel any tenant's run now, as an operator (exit 1 if it had already ended)",
    )
    common(c)
    c.add_argument("run_id")
    c.add_argument("--reason", default="cancelled", help="recorded in the run and its audit")
    c.add_argument("--actor", default="operator", help="who cancels (audit)")

    sub.add_parser("crashpoints", help="list crash point names")
    sub.add_parser("workflows", help="list workflows and their definition versions")
    sub.add_parser("bugs", help="list the seeded bugs (RR_BUGS=NAME,...; off by default)")
    return p


def main(argv: list[str] | None = None) -> int:
    ns = _parser().parse_args(argv)
    try:
        return _run(ns)
    except (InputError, json.JSONDecodeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except StorageUnavailable as exc:
        # Reaching the store is the command's precondition, like a valid URL:
        # configuration (or a server that is down), not a finding.
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except RuntimeFault as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def _run(ns: argparse.Namespace) -> int:
    from . import _executor  # noqa: F401  (declares the executor's crash points)

    if ns.command == "crashpoints":
        for name, doc in sorted(crashpoints.SITES.items()):
            print(f"{name:28} {doc}")
        return 0
    if ns.command == "bugs":
        from ._bugs import BUGS

        for bug in BUGS.values():
            print(f"{bug.name:28} [{bug.layer}] {bug.description}")
        return 0
    if ns.command == "workflows":
        from ._workflows import DEFINITIONS_BY_CODE

        for code, defs in sorted(DEFINITIONS_BY_CODE.items()):
            for d in defs:
                print(f"code v{code}  {d.name} v{d.version}: {' -> '.join(d.steps)}")
        return 0
    if ns.command == "worker":
        from ._worker import main as worker_main

        cfg = _config(ns)
        args: dict[str, Any] = {
            "mode": "forever" if ns.forever else "until_idle",
            "worker_id": ns.worker_id and check_name(ns.worker_id, "--worker-id"),
            "env": cfg.to_env(),
        }
        return worker_main(args)
    # Only submit creates a store; status only reads; cancel and deliver act
    # on runs that must already exist.
    with Runtime(
        _config(ns),
        create_store=ns.command == "submit",
        read_only=ns.command == "status",
    ) as rt:
        if ns.command == "submit":
            data = _json_object(
                ns.input, "--input", """--input '{"customer_id": "c1", "amount_cents": 500}'"""
            )
            run = rt.submit(ns.workflow, data, tenant=ns.tenant, run_id=ns.run_id)
            print(run.model_dump_json())
        elif ns.command == "deliver":
            msg = _json_object(
                ns.message if ns.message else _stdin_text(),
                "the message (--message or stdin)",
                """--message '{"message_id": "m1", "tenant": "acme", "run_id": "r1", """
                """"kind": "event", "payload": {"event_key": "k"}}'""",
            )
            print("delivered" if rt.deliver(msg) else "duplicate (ignored)")
        elif ns.command == "cancel":
            if rt.get(ns.run_id) is None:
                raise InputError(
                    f"no run {ns.run_id!r} in this store; check the run id and --store "
                    "(python -m reference_runtime status RUN_ID)"
                )
            if not rt.cancel(ns.run_id, reason=ns.reason, actor=ns.actor):
                r = rt.get(ns.run_id)
                status = r.status.value if r is not None else "gone"
                print(
                    f"run {ns.run_id!r} had already ended ({status}); nothing cancelled",
                    file=sys.stderr,
                )
                return 1
            r = rt.get(ns.run_id)
            assert r is not None
            print(r.model_dump_json())
        elif ns.command == "status":
            r = rt.get(ns.run_id)
            if r is None:
                print(f"no run {ns.run_id!r}", file=sys.stderr)
                return 1
            print(r.model_dump_json())
    return 0


if __name__ == "__main__":
    sys.exit(main())
