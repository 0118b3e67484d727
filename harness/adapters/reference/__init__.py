"""The reference runtime's adapter (SQLite, Postgres and Redis variants)."""

from __future__ import annotations

from ._adapter import ReferenceAdapter, ReferenceEnvironment, normalize
from ._deployment import Deployment

__all__ = ["Deployment", "ReferenceAdapter", "ReferenceEnvironment", "normalize"]
