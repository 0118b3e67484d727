"""Loading and validating adapters by name, once, at the boundary."""

from __future__ import annotations

import importlib
import traceback
from collections.abc import Callable, Mapping
from typing import Any

from .._errors import AdapterLoadError, UsageError
from ._contract import Adapter, Capability
from ._guard import call, check_workflows, raise_escaped
from ._hooks import ADAPTER_HOOKS, ADAPTER_MEMBERS, check_hooks
from ._registry import BUILTIN, Registered, extra_for
from ._specs import check_spec

__all__ = ["BUILTIN", "load_adapter", "parse_opts", "validate_adapter"]


def load_adapter(spec: str, opts: Mapping[str, str] | None = None) -> Adapter:
    """An adapter from an installed adapter's name (``"reference"``,
    ``"temporal"``, a third party's: the ``harness.adapters`` entry points)
    or ``"package.module:attr"``.

    The target may be an adapter instance, or a class/factory called with
    the options as keyword arguments (strings: the adapter parses its own).
    The result is validated against the contract here, so that nothing
    deeper has to.
    """
    opts = dict(opts or {})
    found = check_spec(spec)  # a typo or a file path: refused, with what was meant
    if found is None:
        module_name, _, attr = spec.partition(":")
        module = _import(module_name, f"adapter module {module_name!r}", None)
        target: Any = getattr(module, attr, None)
        if target is None:
            listed = _adapters_in(module)
            raise AdapterLoadError(
                f"module {module_name!r} has no attribute {attr!r}; "
                + (
                    f"it offers {', '.join(f'{module_name}:{n}' for n in listed)}"
                    if listed
                    else "name the adapter class, factory or instance it defines"
                )
            )
        label = spec
    else:
        label = f"adapter {found.describe()}"
        target = _registered_target(found, label)
    # A class has the protocol's attributes too (as unbound functions and
    # class attributes), so it must be told apart from an instance first.
    if not isinstance(target, type) and isinstance(target, Adapter):
        if opts:
            raise AdapterLoadError(
                f"{label} is an adapter instance and takes no options (got {sorted(opts)})"
            )
        adapter = target
    elif callable(target):
        factory: Callable[..., Any] = target
        try:
            adapter = factory(**opts)
        except UsageError:  # the adapter's own word on its options: as it said it
            raise
        except (TypeError, ValueError) as exc:
            fix = "check the option names and values the adapter documents"
            if found is not None and found.shipped is not None:
                fix = f"it takes {found.shipped.options} (harness list adapters)"
            raise AdapterLoadError(f"{label} rejected the options {opts}: {exc}; {fix}") from exc
        except Exception as exc:
            raise AdapterLoadError(
                f"{label}({', '.join(f'{k}=...' for k in opts)}) raised "
                f"{type(exc).__name__}: {exc}",
                detail="".join(traceback.format_exception(exc)),
            ) from exc
        except BaseException as exc:
            raise_escaped(f"{label}({', '.join(f'{k}=...' for k in opts)})", exc)
    else:
        raise AdapterLoadError(f"{label} is neither an adapter nor a factory of one")
    validate_adapter(adapter, spec)
    return adapter


def _import(module_name: str, what: str, found: Registered | None) -> Any:
    """``module_name`` imported; each way it can fail is the user's to fix,
    and the message says how (a missing extra names it)."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        ours = missing == module_name or module_name.startswith(missing + ".")
        extra = extra_for(module_name)
        if extra and missing and not ours:
            raise AdapterLoadError(
                f"{what} needs the {extra} extra, which is not installed here ({exc}): "
                f"pip install 'stateful-agent-harness[{extra}]'"
            ) from exc
        raise AdapterLoadError(_unimportable(what, module_name, found, exc)) from exc
    except ImportError as exc:
        raise AdapterLoadError(_unimportable(what, module_name, found, exc)) from exc
    except Exception as exc:  # the module's own code failed while importing
        raise AdapterLoadError(
            f"{what} raised {type(exc).__name__} while it was imported: {exc}",
            detail="".join(traceback.format_exception(exc)),
        ) from exc
    except BaseException as exc:  # sys.exit() at import, say: never a silent exit
        raise_escaped(f"importing {what}", exc)


def _unimportable(what: str, module_name: str, found: Registered | None, exc: ImportError) -> str:
    if found is None or not found.distribution:
        return (
            f"cannot import {what} ({exc}); install the package that holds it or put its "
            "folder on PYTHONPATH"
        )
    return (
        f"cannot import {what}, module {module_name!r} ({exc}); install what "
        f"{found.distribution} requires, or reinstall it (pip install --force-reinstall "
        f"{found.distribution})"
    )


def _registered_target(found: Registered, label: str) -> Any:
    """What a registered name's ``module:attr`` (``attr`` may be dotted)
    names, imported now."""
    target: Any = _import(found.module, label, found)
    for part in found.attr.split("."):
        target = getattr(target, part, None) if part else None
        if target is None:
            raise AdapterLoadError(
                f"{label}: module {found.module!r} has no attribute {found.attr!r}; the "
                f"registration is wrong: fix or reinstall "
                f"{found.distribution or 'stateful-agent-harness'}"
            )
    return target


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
    check_hooks(adapter, spec, ADAPTER_HOOKS, ADAPTER_MEMBERS)


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
