"""Worker process entry points.

``main(args)`` is what a supervisor (or a harness's fork server) runs in a
fresh worker process: it reads the configuration from ``RR_*`` environment
variables (overridden by ``args``), arms crash points from ``RR_CRASHPOINTS``,
opens its own connections, and works until idle (or forever).
"""

from __future__ import annotations

import os
from typing import Any

from . import crashpoints
from ._config import RuntimeConfig
from ._runtime import Runtime


def main(args: dict[str, Any] | None = None) -> int:
    """Run one worker. ``args``: worker_id, mode ("until_idle"|"forever"),
    run_id (only this run), max_claims, env (extra RR_* variables)."""
    args = dict(args or {})
    env = {**os.environ, **{k: str(v) for k, v in (args.get("env") or {}).items()}}
    config = RuntimeConfig.from_env(env)
    crashpoints.arm(
        env.get(crashpoints.ENV_SPEC, ""),
        env.get(crashpoints.ENV_LOG),
        trace=env.get(crashpoints.ENV_TRACE, "") == "1",
    )
    worker_id = str(args.get("worker_id") or env.get("RR_WORKER_ID") or f"w{os.getpid()}")
    with Runtime(config) as runtime:
        worker = runtime.worker(worker_id, context_log=env.get("RR_CONTEXT_LOG") or None)
        try:
            if args.get("run_id"):
                worker.run_once(str(args["run_id"]))
            elif args.get("mode", "until_idle") == "forever":
                worker.run_forever(stop_after_idle=args.get("stop_after_idle"))
            else:
                worker.run_until_idle(int(args.get("max_claims", 10_000)))
        finally:
            worker.close()
    return 0
