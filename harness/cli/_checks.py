"""What the command line and the environment alone show to be wrong, refused
before the engine is imported (seconds on a loaded machine): an adapter spec
that cannot name an adapter, a malformed ``--shard``, a network backend that
does not exist or a Toxiproxy server that does not answer, options for no
adapter. Each is a :class:`UsageError` (exit 2)."""

from __future__ import annotations

import argparse
import os

from .._errors import UsageError


def _shard(value: str) -> tuple[int, int]:
    """``--shard K/N``, strictly: an empty value (an unset ``$CI_NODE_INDEX``)
    is refused, not taken for "no shard" (the whole search on every machine).
    Raises :class:`UsageError` (exit 2, the message says how to fix it)."""
    from .._settings import SHARD_FIX, parse_shard

    if not value.strip():
        raise UsageError(
            f"--shard {value!r} is empty (an unset variable, such as $CI_NODE_INDEX?); {SHARD_FIX}"
        )
    shard = parse_shard(value)
    if shard is None:  # "none": leave --shard out instead
        raise UsageError(f"shard {value!r} from the command line is not K/N; {SHARD_FIX}")
    return shard


def _check_before_imports(ns: argparse.Namespace) -> None:
    """What the command line alone shows to be wrong, refused before the
    engine is imported (seconds on a loaded machine): an adapter spec that
    cannot name an adapter, options for no adapter."""
    from ..adapters._specs import check_spec

    spec = getattr(ns, "spec", None) or getattr(ns, "adapter", None)
    if spec is not None:
        check_spec(spec)
    if getattr(ns, "shard", None) is not None:
        ns.shard = _shard(ns.shard)
    if getattr(ns, "network_backend", None):
        # Through the environment: --jobs children and shards choose alike.
        os.environ["HARNESS_NETWORK_BACKEND"] = ns.network_backend
    elif os.environ.get("HARNESS_NETWORK_BACKEND", "").strip().lower() not in (
        "",
        "auto",
        "toxiproxy",
        "kernel",
    ):
        raise UsageError(
            f"HARNESS_NETWORK_BACKEND={os.environ['HARNESS_NETWORK_BACKEND']!r} is not auto, "
            "toxiproxy or kernel: set one of those (or --network-backend)"
        )
    _check_toxiproxy_url()
    if ns.command == "replay" and ns.adapter is None and ns.adapter_opt:
        raise UsageError(
            f"--adapter-opt {ns.adapter_opt[0]!r} without --adapter: the options go with the "
            "adapter you name; to replay against other options (your fix), name the adapter "
            "too: harness replay DIR --adapter NAME --adapter-opt KEY=VALUE (the folder's "
            "adapter and options are in its report.json)"
        )


def _check_toxiproxy_url() -> None:
    """A Toxiproxy server named in ``HARNESS_TOXIPROXY_URL`` answers, unless
    the kernel backend was asked for: every worker's connections would go
    through it, so a dead one is the user's to fix before the run starts."""
    import urllib.request

    url = os.environ.get("HARNESS_TOXIPROXY_URL", "").strip().rstrip("/")
    mode = os.environ.get("HARNESS_NETWORK_BACKEND", "").strip().lower()
    if not url or mode == "kernel":
        return
    api = url if "://" in url else f"http://{url}"
    try:
        with urllib.request.urlopen(f"{api}/version", timeout=5):
            return
    except (OSError, ValueError) as exc:
        raise UsageError(
            f"HARNESS_TOXIPROXY_URL={url!r} does not answer ({exc}): start the Toxiproxy "
            "server there (its HTTP API, port 8474 by default), point the variable at the one "
            "you run, or unset it (or --network-backend kernel)"
        ) from exc
