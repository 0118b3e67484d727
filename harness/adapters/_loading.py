"""Loading and validating adapters by name, once, at the boundary."""

from __future__ import annotations

import importlib
import math
import traceback
from collections.abc import Callable, Mapping
from typing import Any

from .._errors import AdapterLoadError
from ._contract import Adapter, Capability
from ._guard import call, check_workflows, raise_escaped
from ._specs import BUILTIN, check_spec

__all__ = ["BUILTIN", "load_adapter", "parse_opts", "validate_adapter"]


def _reference(opts: Mapping[str, str]) -> Adapter:
    from reference_runtime import service_urls

    from .reference import ReferenceAdapter

    known = {
        "backend",
        "queue",
        "lease_seconds",
        "postgres_url",
        "redis_url",
        "bug",
        "network_timeout",
    }
    unknown = set(opts) - known
    if unknown:
        raise AdapterLoadError(
            f"the reference adapter has no option {', '.join(sorted(unknown))}; "
            f"known options: {', '.join(sorted(known))}"
        )
    backend = opts.get("backend", "sqlite")
    queue = opts.get("queue", "store")
    if backend not in ("sqlite", "postgres"):
        raise AdapterLoadError(f"backend={backend!r}: choose sqlite or postgres")
    if queue not in ("store", "redis"):
        raise AdapterLoadError(f"queue={queue!r}: choose store or redis")
    from reference_runtime import ConfigError
    from reference_runtime._bugs import parse_bugs
    from reference_runtime._config import MIN_LEASE_SECONDS

    try:
        # bug=NAME or bug=NAME,NAME: seeded bugs of the reference runtime
        bugs = parse_bugs(opts.get("bug", ""))
    except ConfigError as exc:
        raise AdapterLoadError(f"bug={opts['bug']!r}: {exc}; harness list bugs") from exc
    try:
        pg = opts.get("postgres_url") or (
            service_urls.postgres_url() if backend == "postgres" else None
        )
        rd = opts.get("redis_url") or (service_urls.redis_url() if queue == "redis" else None)
    except service_urls.ServiceUnavailable as exc:
        raise AdapterLoadError(str(exc)) from exc
    try:
        lease = float(opts.get("lease_seconds", "30"))
    except ValueError as exc:
        raise AdapterLoadError(f"lease_seconds={opts['lease_seconds']!r} is not a number") from exc
    if not math.isfinite(lease) or not MIN_LEASE_SECONDS <= lease <= 86_400:
        raise AdapterLoadError(
            f"lease_seconds={opts['lease_seconds']!r} is out of range: a worker's lease must "
            f"be a finite number of seconds from {MIN_LEASE_SECONDS:g} to 86400 (the runtime "
            "starts an external call only with a second of lease left)"
        )
    extra: dict[str, float] = {}
    if "network_timeout" in opts:
        try:
            extra["network_timeout"] = float(opts["network_timeout"])
        except ValueError:
            extra["network_timeout"] = math.nan
        if not 0.5 <= extra["network_timeout"] <= 3_600:  # NaN too
            raise AdapterLoadError(
                f"network_timeout={opts['network_timeout']!r}: give the seconds after which a "
                "worker's connection to a silent Postgres or Redis server is broken, from 0.5 "
                "to 3600 (e.g. 5)"
            )
    return ReferenceAdapter(
        backend, queue, postgres_url=pg, redis_url=rd, lease_seconds=lease, bugs=bugs, **extra
    )


def load_adapter(spec: str, opts: Mapping[str, str] | None = None) -> Adapter:
    """An adapter from ``"reference"`` or ``"package.module:attr"``.

    ``attr`` may be an adapter instance, or a class/factory called with the
    options as keyword arguments. The result is validated against the contract
    here, so that nothing deeper has to.
    """
    opts = dict(opts or {})
    if spec == "reference":
        adapter = _reference(opts)
    else:
        check_spec(spec)  # a typo or a file path: refused, with what was meant
        module_name, _, attr = spec.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise AdapterLoadError(
                f"cannot import adapter module {module_name!r} ({exc}); install the package "
                "that holds it or put its folder on PYTHONPATH"
            ) from exc
        except Exception as exc:  # the module's own code failed while importing
            raise AdapterLoadError(
                f"adapter module {module_name!r} raised {type(exc).__name__} while it was "
                f"imported: {exc}",
                detail="".join(traceback.format_exception(exc)),
            ) from exc
        except BaseException as exc:  # sys.exit() at import, say: never a silent exit
            raise_escaped(f"importing adapter module {module_name!r}", exc)
        target: Any = getattr(module, attr, None)
        if target is None:
            found = _adapters_in(module)
            raise AdapterLoadError(
                f"module {module_name!r} has no attribute {attr!r}; "
                + (
                    f"it offers {', '.join(f'{module_name}:{n}' for n in found)}"
                    if found
                    else "name the adapter class, factory or instance it defines"
                )
            )
        # A class has the protocol's attributes too (as unbound functions and
        # class attributes), so it must be told apart from an instance first.
        if not isinstance(target, type) and isinstance(target, Adapter):
            if opts:
                raise AdapterLoadError(
                    f"{spec} is an adapter instance and takes no options (got {sorted(opts)})"
                )
            adapter = target
        elif callable(target):
            factory: Callable[..., Any] = target
            try:
                adapter = factory(**opts)
            except (TypeError, ValueError) as exc:
                raise AdapterLoadError(
                    f"{spec} rejected the options {opts}: {exc}; check the option names and "
                    "values the adapter documents"
                ) from exc
            except Exception as exc:
                raise AdapterLoadError(
                    f"{spec}({', '.join(f'{k}=...' for k in opts)}) raised "
                    f"{type(exc).__name__}: {exc}",
                    detail="".join(traceback.format_exception(exc)),
                ) from exc
            except BaseException as exc:
                raise_escaped(f"{spec}({', '.join(f'{k}=...' for k in opts)})", exc)
        else:
            raise AdapterLoadError(f"{spec} is neither an adapter nor a factory of one")
    validate_adapter(adapter, spec)
    return adapter


def _adapters_in(module: Any) -> list[str]:
    """Public names in ``module`` that look like adapters (for a helpful error)."""
    return sorted(
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and all(hasattr(value, a) for a in ("name", "capabilities", "workflows", "open"))
    )


def validate_adapter(adapter: Any, spec: str) -> None:
    """Raise AdapterLoadError unless ``adapter`` fulfils the contract's shape."""
    if not isinstance(adapter, Adapter):
        missing = [
            name
            for name in ("name", "capabilities", "workflows", "open", "describe")
            if not hasattr(adapter, name)
        ]
        raise AdapterLoadError(
            f"{spec} gave {type(adapter).__name__}, which is not an adapter: it lacks "
            f"{', '.join(missing)} (see harness.adapters.Adapter)"
        )
    try:
        capabilities = list(adapter.capabilities)
    except TypeError as exc:
        raise AdapterLoadError(f"{spec}: capabilities is not a collection ({exc})") from exc
    bad = [c for c in capabilities if not isinstance(c, Capability)]
    if bad:
        raise AdapterLoadError(
            f"{spec} declares unknown capabilities {bad}; use harness.adapters.Capability values"
        )
    where = f"{spec}: workflows()"
    workflows = check_workflows(where, call(where, adapter.workflows))
    if not workflows:
        raise AdapterLoadError(f"{spec} declares no workflows: the harness has nothing to run")
    for wf in workflows:
        if not wf.inputs:
            raise AdapterLoadError(f"{spec}: workflow {wf.name!r} has no example inputs")


def parse_opts(pairs: list[str] | None) -> dict[str, str]:
    """``["k=v", ...]`` -> dict; raises AdapterLoadError for a malformed pair."""
    out: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise AdapterLoadError(
                f"--adapter-opt {pair!r} is not KEY=VALUE (e.g. backend=postgres)"
            )
        out[key.strip()] = value.strip()
    return out
