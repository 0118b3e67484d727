"""Storage backends behind one contract (see :mod:`reference_runtime.store._base`)."""

from __future__ import annotations

from ._base import Claim, Commit, RetentionPolicy, Snapshot, Store

__all__ = ["Claim", "Commit", "RetentionPolicy", "Snapshot", "Store"]
