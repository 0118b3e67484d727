"""``harness list adapters|faults|properties|bugs|services``: what exists,
one line each."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, TextIO

from .._errors import UsageError
from ._exits import EXIT_OK, EXIT_USAGE


def list_command(ns: argparse.Namespace, out: TextIO) -> int:
    """``harness list WHAT``: the exit code."""
    if ns.what == "properties":
        return _list_properties(ns, out)
    if ns.what == "bugs" and not ns.properties:
        return _list_bugs(ns, out)
    if ns.properties or ns.adapter:
        raise UsageError(
            "--property and --adapter go with 'harness list properties' (--adapter "
            f"also with 'harness list bugs'), not 'harness list {ns.what}'"
        )
    return _list(ns.what, out, ns.services)


def _list(what: str, out: TextIO, services: Path | None = None) -> int:
    if what == "adapters":
        _list_adapters(out)
    elif what == "faults":
        from ..vocabulary import FAULT_FAMILIES

        for fam in FAULT_FAMILIES:
            doc = fam.doc
            if fam.name == "network":
                doc = f"{doc[:-1]}; here: {_network_backend()})"
            print(f"{fam.name:14} {doc}", file=out)
    elif what == "services":
        code = _list_services(out, services)
        print(f"network faults run on: {_network_backend()}", file=out)
        return code
    return EXIT_OK


def _list_bugs(ns: argparse.Namespace, out: TextIO) -> int:
    """``harness list bugs [--adapter NAME]``: what the adapter's optional
    ``seeded_bugs()`` hook says (the reference adapter's by default)."""
    from ..adapters._guard import call
    from ..adapters._loading import load_adapter, parse_opts

    spec = ns.adapter or "reference"
    adapter = load_adapter(spec, parse_opts(ns.adapter_opt))
    hook = getattr(adapter, "seeded_bugs", None)
    if hook is None:
        print(f"adapter {spec} has no seeded bugs (it defines no seeded_bugs() hook)", file=out)
        return EXIT_OK
    bugs = list(call(f"adapter {spec}: seeded_bugs()", hook))
    print(f"seeded bugs of {spec} (--adapter {spec} --adapter-opt bug=NAME):", file=out)
    for bug in bugs:
        print(f"{bug.name:28} breaks {bug.breaks:21} {bug.description}", file=out)
    return EXIT_OK


def _list_adapters(out: TextIO) -> None:
    """One line per installed adapter name (the ``harness.adapters`` entry
    points, read as metadata: nothing is imported), then your own."""
    from collections import Counter

    from ..adapters._registry import BUILTIN, registered

    found = registered()
    twice = Counter(r.name for r in found)
    for r in found:
        if r.shipped is not None:
            about = r.shipped.options
            if r.name in BUILTIN:
                about = f"built in; {about}"
            elif r.shipped.extra:
                about = (
                    f"needs the {r.shipped.extra} extra: pip install "
                    f"'stateful-agent-harness[{r.shipped.extra}]'; {about}"
                )
        else:
            about = r.summary or "no summary"
        if twice[r.name] > 1:
            about += (
                f"; another package registers {r.name!r} too: --adapter {r.name} is refused, "
                "name the target"
            )
        print(f"{r.name:14} {r.target}  [{r.who}]  ({about})", file=out)
    print(
        f"{'any':14} package.module:attr  (your own, importable from PYTHONPATH; or register "
        'it by name under [project.entry-points."harness.adapters"]: see docs/adapters.md)',
        file=out,
    )


def _list_properties(ns: argparse.Namespace, out: TextIO) -> int:
    """``harness list properties``: the built-in ones, then the user's
    invariants: those named (``--property``), the adapter's (``--adapter``)
    and the installed ones (the ``harness.properties`` entry points)."""
    from .._properties import adapter_properties, resolve_properties
    from ..checkers import BUILTIN

    def needs(p: Any) -> str:
        parts = [*p.needs, *([f"family {p.family}"] if p.family else [])]
        return f" (needs {', '.join(parts)})" if parts else ""

    for name, p in BUILTIN.items():
        print(f"{name:22} {p.summary}{needs(p)}", file=out)
    mine = resolve_properties(ns.properties, installed=False)
    hooked: tuple[Any, ...] = ()
    if ns.adapter is not None:
        from ..adapters._loading import load_adapter, parse_opts

        hooked = adapter_properties(load_adapter(ns.adapter, parse_opts(ns.adapter_opt)))
    for p in resolve_properties([*mine, *hooked]):
        source = (
            "--property" if p in mine else f"adapter {ns.adapter}" if p in hooked else "installed"
        )
        print(f"{p.name:22} {p.summary}{needs(p)} [your invariant: {source}, {p.origin}]", file=out)
    return EXIT_OK


def _network_backend() -> str:
    """Which backend the network faults would run on here, and why."""
    from .. import _toxiproxy

    try:
        return _toxiproxy.choose().describe()
    except ValueError as exc:
        return str(exc)


def _list_services(out: TextIO, file: Path | None) -> int:
    """The world's effect kinds: what ``WorkflowSpec.effects`` may name; with
    ``file`` (or ``$HARNESS_SERVICES_FILE``), the user's declared ones too."""
    from ..world import WorldUsageError, declare_services, load_services, service_catalogue

    if file is None and os.environ.get("HARNESS_SERVICES_FILE", "").strip():
        file = Path(os.environ["HARNESS_SERVICES_FILE"])
    declared: set[str] = set()
    if file is not None:
        try:
            declared = {s.name for s in declare_services(load_services(file))}
        except WorldUsageError as exc:
            print(f"harness: error: {exc}", file=sys.stderr)
            return EXIT_USAGE
    print(
        "effect kinds of the world's services (name them in WorkflowSpec.effects and "
        "Declarations.delivery):",
        file=out,
    )
    print(
        f"  {'kind':27} {'answers':10} {'idempotency keys':17} {'lookup':16} {'http':30} delivery",
        file=out,
    )
    for k in service_catalogue():
        caps = k.capabilities
        lookup = (
            "by key"
            if caps.lookup_by_key
            else "by business key"
            if caps.lookup_by_business_key
            else "none"
        )
        keys = "yes" if caps.idempotency_keys else "no (ignored)"
        where = f"{k.method} {k.path}"
        print(
            f"  {k.kind:27} {k.status:10} {keys:17} {lookup:16} {where:30} {k.delivery}",
            file=out,
        )
    if declared:
        print(f"declared in {file}: {', '.join(sorted(declared))}", file=out)
    return EXIT_OK
