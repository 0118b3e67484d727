"""The reference runtime's adapter (SQLite, Postgres and Redis variants).

Names are imported on first use: a worker forked from the fork server imports
only ``_services`` (its tool interface, served by the world), not the adapter
and everything the adapter imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "Deployment": "harness.adapters.reference._deployment",
    "ReferenceAdapter": "harness.adapters.reference._adapter",
    "ReferenceEnvironment": "harness.adapters.reference._adapter",
    "normalize": "harness.adapters.reference._adapter",
}

__all__ = ["Deployment", "ReferenceAdapter", "ReferenceEnvironment", "normalize"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        # A submodule, as before names were imported on first use (probes
        # such as __wrapped__ are no modules).
        if not name.startswith("__"):
            try:
                return importlib.import_module(f"{__name__}.{name}")
            except ModuleNotFoundError as exc:
                if exc.name != f"{__name__}.{name}":
                    raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from ._adapter import ReferenceAdapter, ReferenceEnvironment, normalize
    from ._deployment import Deployment
