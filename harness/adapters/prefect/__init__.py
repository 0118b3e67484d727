"""Point the harness at a Prefect flow (the ``prefect`` extra), as it is.

    harness run --adapter prefect --adapter-opt app=examples.prefect_refund.careful:APP

The flow imports nothing from the harness: its tasks call their providers
over HTTP at URLs a :class:`PrefectWorkload` points at the world's HTTP face.
The adapter owns a local Prefect server for the whole run; a run is a flow
run of a deployment per scenario, and the worker plays the deployment's
recovery (crash detection, the retry automation, the work pool's worker).
See ``docs/adapters.md`` and ``docs/findings.md``.
"""

from __future__ import annotations

from ._adapter import PrefectAdapter, PrefectEnvironment, PrefectWorkload

__all__ = ["PrefectAdapter", "PrefectEnvironment", "PrefectWorkload"]
