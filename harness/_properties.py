"""Where a run's own invariants come from, checked once before it starts.

A user's invariants (``harness.invariant``, ``harness.Property`` records)
reach a run four ways, all gathered by :func:`resolve_properties`:

- given to it: ``harness.run(..., properties=[...])``,
  ``resilience_suite(..., properties=[...])``, or on the command line as
  ``--property package.module:attr`` (loaded by :func:`load_property`);
- from the adapter: an optional ``properties()`` method returning records;
- from an installed package: the ``harness.properties`` entry-point group
  (each entry point names a record, or a list of them).

Each is checked when the run begins (a name that is not lower_snake_case
or that a built-in property or another invariant already has, a capability
or fault family that does not exist): a :class:`~harness.UsageError` (exit
2) saying what and how to fix it, never a surprise halfway through a search.
"""

from __future__ import annotations

import difflib
import importlib
import traceback
from collections.abc import Iterable, Sequence
from importlib.metadata import entry_points
from typing import Any

from ._errors import AdapterError, UsageError
from .checkers import BUILTIN, Property

#: the entry-point group an installed package registers its invariants under
ENTRY_POINT_GROUP = "harness.properties"

#: what a --property names
FORM = "'package.module:attr' (an @harness.invariant or a harness.Property), or 'package.module'"


def load_property(spec: str) -> tuple[Property, ...]:
    """The invariants ``spec`` names: ``package.module:attr`` (a
    :class:`Property`, or a list or tuple of them), or ``package.module``
    (every :class:`Property` defined at its top level). Each loaded record
    remembers ``spec`` (a replay command names it again). Raises
    :class:`UsageError` when it cannot be imported or is not a property."""
    module_name, sep, attr = spec.strip().partition(":")
    if (
        not module_name
        or not all(p.isidentifier() for p in module_name.split("."))
        or (sep and not attr.isidentifier())
    ):
        hint = ""
        if module_name.endswith(".py") or "/" in module_name:
            dotted = module_name.removesuffix(".py").replace("/", ".").strip(".")
            hint = (
                f"; a file path is not a spec: name the module, e.g. --property "
                f"{dotted}{sep}{attr} (with its folder on PYTHONPATH)"
            )
        raise UsageError(f"--property {spec!r} is not of the form {FORM}{hint}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageError(
            f"--property {spec!r}: cannot import module {module_name!r} ({exc}); put its "
            "folder on PYTHONPATH (PYTHONPATH=. for the current one) or install its package"
        ) from exc
    except Exception as exc:
        raise UsageError(
            f"--property {spec!r}: module {module_name!r} raised {type(exc).__name__} while "
            f"it was imported: {exc}\n{''.join(traceback.format_exception(exc)).rstrip()}"
        ) from exc
    if not sep:
        found = tuple(v for v in vars(module).values() if isinstance(v, Property))
        if not found:
            raise UsageError(
                f"--property {spec!r}: module {module_name!r} defines no property at its top "
                "level (decorate a function of a ScenarioView with @harness.invariant)"
            )
        return tuple(_named(p, f"{module_name}:{_attr_of(module, p)}") for p in found)
    if not hasattr(module, attr):
        offered = [n for n, v in vars(module).items() if isinstance(v, Property)]
        close = difflib.get_close_matches(attr, offered, n=1)
        hint = (
            f"did you mean {module_name}:{close[0]}?"
            if close
            else f"it defines {', '.join(offered)}"
            if offered
            else "it defines no property"
        )
        raise UsageError(f"--property {spec!r}: module {module_name!r} has no {attr!r}; {hint}")
    return tuple(_named(p, spec) for p in _records(getattr(module, attr), f"--property {spec!r}"))


def _attr_of(module: Any, p: Property) -> str:
    return str(next(n for n, v in vars(module).items() if v is p))


def _named(p: Property, spec: str) -> Property:
    """``p``, remembering the spec it was loaded by (a list's members share
    it: loading the spec loads them all)."""
    from dataclasses import replace

    return p if p.spec == spec else replace(p, spec=spec, origin=spec)


def _records(value: Any, where: str) -> tuple[Property, ...]:
    """``value`` as property records: one, or a list or tuple of them."""
    items = list(value) if isinstance(value, list | tuple) else [value]
    bad = [v for v in items if not isinstance(v, Property)]
    if bad:
        thing = bad[0]
        hint = (
            "; decorate it with @harness.invariant"
            if callable(thing) and not isinstance(thing, type)
            else ""
        )
        raise UsageError(
            f"{where} gave {type(thing).__name__} {thing!r:.80}, which is not a property: "
            f"give an @harness.invariant function or a harness.Property{hint}"
        )
    return tuple(items)


def entry_point_properties() -> tuple[Property, ...]:
    """The invariants installed packages register under
    :data:`ENTRY_POINT_GROUP`."""
    out: list[Property] = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        where = f"entry point {ep.name!r} ({ep.value}) of group {ENTRY_POINT_GROUP}"
        try:
            value = ep.load()
        except Exception as exc:
            raise UsageError(
                f"{where} cannot be loaded ({type(exc).__name__}: {exc}); fix or uninstall "
                "the package that registers it"
            ) from exc
        spec = ep.value.replace(" ", "")
        out += [_named(p, spec) for p in _records(value, where)]
    return tuple(out)


def adapter_properties(adapter: Any) -> tuple[Property, ...]:
    """The invariants the adapter's optional ``properties()`` returns."""
    hook = getattr(adapter, "properties", None)
    if hook is None:
        return ()
    where = f"adapter {getattr(adapter, 'name', type(adapter).__name__)}: properties()"
    if not callable(hook):
        raise AdapterError(f"{where} is not a method (it is {type(hook).__name__})")
    try:
        value = hook()
    except Exception as exc:
        raise AdapterError(
            f"{where} raised {type(exc).__name__}: {exc}",
            detail="".join(traceback.format_exception(exc)),
        ) from exc
    return _records(list(value or ()), where)


def resolve_properties(
    given: Iterable[Property | str] = (), adapter: Any = None, *, installed: bool = True
) -> tuple[Property, ...]:
    """A run's invariants, checked: ``given`` (records, or specs to
    :func:`load_property`), then the ``adapter``'s, then the installed ones
    (``installed``). The same record given twice counts once."""
    found: list[Property] = []
    for item in given:
        if isinstance(item, str):
            found += load_property(item)
        else:
            found += _records(item, "properties=")
    if adapter is not None:
        found += adapter_properties(adapter)
    if installed:
        found += entry_point_properties()
    out: dict[str, Property] = {}
    for p in found:
        check_property(p)
        same = out.get(p.name)
        if same is not None and same.check is not p.check:
            raise UsageError(
                f"two invariants are named {p.name!r} ({same.origin or same.check!r} and "
                f"{p.origin or p.check!r}): rename one (@harness.invariant(name=...))"
            )
        out.setdefault(p.name, p)
    return tuple(out.values())


def check_property(p: Property) -> None:
    """Refuse a user's property that could not be judged as declared."""
    from .adapters import Capability
    from .scenarios import FAMILIES

    if p.builtin or p.name in BUILTIN:
        raise UsageError(
            f"invariant {p.name!r} ({p.origin or p.check!r}) has the name of a built-in "
            f"property; choose another name (built in: {', '.join(BUILTIN)})"
        )
    known = [c.value for c in Capability]
    for need in p.needs:
        if need not in known:
            close = difflib.get_close_matches(need, known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise UsageError(
                f"invariant {p.name!r} needs capability {need!r}, which does not exist; "
                f"{hint}(capabilities: {', '.join(known)})"
            )
    if p.family is not None and p.family not in FAMILIES:
        raise UsageError(
            f"invariant {p.name!r} is exercised by fault family {p.family!r}, which does not "
            f"exist (families: {', '.join(FAMILIES)}; harness list faults)"
        )


def specs_of(properties: Sequence[Property]) -> list[str] | None:
    """The specs a command line names ``properties`` by (``--property``),
    each once, in order; None when one of them has none (defined in
    ``__main__`` or in a function: nothing can import it again)."""
    out: list[str] = []
    for p in properties:
        if p.spec is None:
            return None
        if p.spec not in out:
            out.append(p.spec)
    return out
