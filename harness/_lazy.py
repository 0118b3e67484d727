"""Public names imported on first use, for a package's ``__init__``.

A worker forked from the fork server imports only what it runs; a package
whose ``__init__`` imported every public name would drag the whole harness
into it. Such a package declares where each name lives and takes its
module-level ``__getattr__`` and ``__dir__`` from :func:`lazy_exports`::

    _EXPORTS = {"ReferenceAdapter": "harness.adapters.reference._adapter"}
    __all__ = ["ReferenceAdapter"]
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals(), __all__)
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any


def lazy_exports(
    package: str,
    exports: Mapping[str, str],
    namespace: MutableMapping[str, Any],
    public: Sequence[str],
    *,
    submodules: bool = True,
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: a name of ``exports``
    (name -> defining module) is imported on first use and kept in
    ``namespace`` (the package's globals), so later lookups skip the hook.
    With ``submodules``, any other name is tried as a submodule, as
    ``package.name`` worked without an import when names were imported
    eagerly (dunder probes such as ``__wrapped__`` are never modules)."""

    def getattr_(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            if submodules and not name.startswith("__"):
                try:
                    return importlib.import_module(f"{package}.{name}")
                except ModuleNotFoundError as exc:
                    if exc.name != f"{package}.{name}":
                        raise
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted(set(namespace) | set(public))

    return getattr_, dir_
