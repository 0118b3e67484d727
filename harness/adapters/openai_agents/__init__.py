"""Point the harness at an OpenAI Agents SDK application (the ``openai-agents`` extra).

    harness run --adapter harness.adapters.openai_agents:OpenAIAgentsAdapter \\
        --adapter-opt app=examples.openai_agents_refund.careful:APP

An application is an :class:`AgentsApp` (agent factory, workflows, delivery
declarations, the user's message of a run, how a worker resumes); its tools
reach the world through the :class:`AgentsContext` each turn runs with
(``RunContextWrapper.context``). A run is one user message in a
``SQLiteSession`` of its own. See ``docs/adapters.md``. The SDK is imported
only when an environment is opened or a worker runs.
"""

from __future__ import annotations

from ._adapter import AgentsApp, AgentsContext, AgentsEnvironment, OpenAIAgentsAdapter

__all__ = ["AgentsApp", "AgentsContext", "AgentsEnvironment", "OpenAIAgentsAdapter"]
