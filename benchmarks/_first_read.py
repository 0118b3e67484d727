"""The floor of a kill-and-resume cycle (``kill_resume.py``): a worker forked
from the preloaded fork server that reaches the runtime's first durable read
(its configuration, its store opened and set up, the run read back) and is
SIGKILLed there. A real cycle also claims, loads, builds a context and
commits. Preloaded by the fork server beside the runtime's own modules, so a
worker costs what a runtime worker costs up to that read."""

from __future__ import annotations

import os
import signal
from typing import Any

from reference_runtime._config import RuntimeConfig
from reference_runtime._runtime import Runtime


def first_read(args: dict[str, Any]) -> None:
    """Read run ``args["run_id"]`` from the store the ``RR_*`` variables name, then die."""
    env = {**os.environ, **{k: str(v) for k, v in args["env"].items()}}
    runtime = Runtime(RuntimeConfig.from_env(env))
    if runtime.store.get_run(args["run_id"]) is None:
        raise SystemExit(f"no run {args['run_id']!r} in the store")
    os.kill(os.getpid(), signal.SIGKILL)
