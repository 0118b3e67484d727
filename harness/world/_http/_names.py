"""The face's constants."""

from __future__ import annotations

#: The tenant of a request from a process no worker attributed.
UNATTRIBUTED = "(unattributed)"


#: The environment variable an adapter may give its app: the face's base URL.
ENV_WORLD_URL = "HARNESS_WORLD_URL"


#: How long the face waits for a killed caller to die, in seconds.
KILL_WAIT = 10.0


#: The media type of a streamed model reply (server-sent events).
SSE = "text/event-stream"
