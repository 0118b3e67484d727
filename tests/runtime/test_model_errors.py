"""A model (or step code) that raises makes the run back off and fail, never
crash-loop the workers that claim it."""

from __future__ import annotations

from typing import Any

from harness.adapters.reference import Deployment
from reference_runtime import RunStatus
from reference_runtime._model import ModelContext
from reference_runtime._workflows import Definition


def broken_model(ctx: ModelContext, d: Definition) -> Any:
    raise KeyError("claim")


def test_a_raising_model_schedules_retries_then_fails_the_run(make_deployment: Any) -> None:
    d: Deployment = make_deployment("sqlite")
    d.submit("research", {"topic": "t", "requester": "u"}, tenant="acme", run_id="q1")
    worker = d.runtime.worker("w1")
    worker.executor._model = broken_model
    seen = []
    for _ in range(10):
        worker.run_until_idle()
        run = d.snapshot("q1").run
        seen.append(run.status)
        if run.status is RunStatus.FAILED:
            break
        assert run.status is RunStatus.RETRY_SCHEDULED
        assert run.wake_at is not None
        d.clock.set(run.wake_at)
    assert seen[-1] is RunStatus.FAILED
    assert len(seen) == d.config.max_attempts
    run = d.snapshot("q1").run
    assert run.error is not None and "KeyError" in run.error and "gather" in run.error
    actions = [e.action for e in d.runtime.store.audit("q1")]
    assert actions.count("model_error") == d.config.max_attempts - 1
    assert actions[-1] == "model_failed"
