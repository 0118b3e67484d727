"""Point the harness at a Google ADK application (the ``adk`` extra), as it is.

    harness run --adapter adk --adapter-opt app=examples.adk_refund.careful:APP

The application is an ADK ``App`` with ``ResumabilityConfig(is_resumable=True)``
that imports nothing from the harness: its tools call their providers over
HTTP, at URLs the :class:`ADKWorkload` points at the world's HTTP face, and
its model may be the world's scripted OpenAI-compatible endpoint. A run is
one session of a ``DatabaseSessionService`` on SQLite; the worker plays the
application's resumer (``Runner.run_async(invocation_id=...)``). See
``docs/adapters.md`` and ``docs/findings.md``. ADK is imported only by
workers.
"""

from __future__ import annotations

from ._adapter import ADKAdapter, ADKEnvironment, ADKWorkload, json_message

__all__ = ["ADKAdapter", "ADKEnvironment", "ADKWorkload", "json_message"]
