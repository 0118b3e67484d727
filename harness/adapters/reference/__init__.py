"""The reference runtime's adapter (SQLite, Postgres and Redis variants);
``--adapter reference`` loads :func:`from_options`, which parses its options.

Names are imported on first use: a worker forked from the fork server imports
only ``_services`` (its tool interface, served by the world), not the adapter
and everything the adapter imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy_exports

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "Deployment": "harness.adapters.reference._deployment",
    "ReferenceAdapter": "harness.adapters.reference._adapter",
    "ReferenceEnvironment": "harness.adapters.reference._adapter",
    "normalize": "harness.adapters.reference._adapter",
    "from_options": "harness.adapters.reference._options",
}

__all__ = ["Deployment", "ReferenceAdapter", "ReferenceEnvironment", "from_options", "normalize"]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals(), __all__)


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from ._adapter import ReferenceAdapter, ReferenceEnvironment, normalize
    from ._deployment import Deployment
    from ._options import from_options
