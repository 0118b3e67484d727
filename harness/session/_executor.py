"""The executor: one scenario, run and judged.

One *example* is a scenario executed in a fresh environment (the runner's
:func:`~harness.runner.run_scenario`), its history checked by every
property against the history of the same workload run without faults (the
oracle, cached per workload; each tenant's runs in a deployment of their
own, see ``_oracle``). The executor knows nothing of a search: the engine
asks it for examples, and sums them.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..adapters._contract import Adapter
from ..checkers import Property, check_properties
from ..history import History
from ..model import RunSpec, Scenario
from ..nemesis import worker_timeout
from ..outcome import Example
from ..runner import RunResult, run_scenario
from ._coverage import combinations
from ._oracle import Agreement, merge_histories, tenant_parts
from ._shared import SharedOracles


class Executor:
    """Runs scenarios against one adapter in folders of ``workdir``, each
    checked against its oracle (run once per workload and kept).

    ``budget_left`` says how many seconds of the run's budget are left: a
    worker is never given longer (see
    :func:`~harness.nemesis.worker_timeout`).
    """

    def __init__(
        self,
        adapter: Adapter,
        workdir: Path,
        *,
        agreement: Agreement,
        budget_left: Callable[[], float],
        shared: SharedOracles | None = None,
        properties: Sequence[Property] = (),
    ) -> None:
        self.adapter = adapter
        self.workdir = workdir
        #: the user's invariants, judged after the built-in properties
        self.properties = tuple(properties)
        #: whether each workflow's fault-free runs agree (see _oracle.Agreement)
        self.agreement = agreement
        #: fault-free histories shared with the other jobs of the run (--jobs N)
        self._shared = shared
        self._budget_left = budget_left
        #: seconds of every fault-free run so far (the probe's first): what
        #: a scenario costs, when the adapter does not say (see _plan.scenario_cost)
        self.fault_free_seconds: list[float] = []
        self._oracles: dict[str, Path] = {}
        #: one tenant's fault-free runs, by what runs (shared by workloads)
        self._tenant_oracles: dict[str, Path] = {}
        self._n = 0

    def oracle(self, scenario: Scenario) -> Path:
        """History of the scenario's workload without faults (cached).

        Each tenant's runs run in a deployment of their own, and the
        histories are merged into one (:func:`merge_histories`): a run's
        fault-free result then depends on its own tenant's data only, so a
        runtime that lets one tenant's data change another's result differs
        from its oracle instead of agreeing with it.
        """
        keep = getattr(self.adapter, "keeps_definitions", False) is True
        free = scenario.fault_free(self._migrated_input, keep_releases=keep)
        key = scenario_key(free)
        if key not in self._oracles:
            parts = tenant_parts(free)
            folder = self.workdir / f"oracle-{len(self._oracles)}"
            if len(parts) == 1:
                self._oracles[key] = self._run_oracle(free, folder)
            else:
                paths = [(t, self.tenant_oracle(part)) for t, part in parts]
                self._oracles[key] = merge_histories(paths, folder / "oracle.jsonl")
        return self._oracles[key]

    def tenant_oracle(self, part: Scenario) -> Path:
        """The fault-free history of one tenant's runs (cached)."""
        key = scenario_key(part)
        if key not in self._tenant_oracles:
            folder = self.workdir / f"tenant-oracle-{len(self._tenant_oracles)}"
            self._tenant_oracles[key] = self._run_oracle(part, folder)
        return self._tenant_oracles[key]

    def _run_oracle(self, free: Scenario, folder: Path) -> Path:
        key = scenario_key(free)
        kept = None if self._shared is None else self._shared.get(key)
        if kept is not None:
            return kept  # another job (or the parent's probe) ran it

        def again(k: int) -> Path:
            # Not a sample of what a scenario costs: the plan's estimate
            # stays what it was (see scenario_cost).
            return self._run_free(free, folder / f"again-{k}").history_path

        result = self._run_free(free, folder)
        self.fault_free_seconds.append(result.seconds)
        path = self.agreement.settle(free, result.history_path, again)
        if self._shared is not None:
            self._shared.put(key, path)
        return path

    def _run_free(self, free: Scenario, folder: Path) -> RunResult:
        return run_scenario(
            self.adapter,
            free,
            folder,
            history_name="oracle.jsonl",
            worker_timeout=self._worker_timeout(),
        )

    def _migrated_input(self, run: RunSpec) -> dict[str, Any]:
        """A run an older release accepted, as the oracle submits it to today's
        code: the adapter's optional ``migrated_input``, else its input as is."""
        hook = getattr(self.adapter, "migrated_input", None)
        if hook is None or run.code_version is None:
            return dict(run.input)
        return dict(hook(run.workflow, run.input, run.code_version))

    def execute(self, scenario: Scenario, folder: Path | None = None) -> Example:
        """Run ``scenario`` in ``folder`` (else the next ``example-N`` of the
        workdir) beside its oracle, and judge it with every property."""
        self._n += 1
        folder = folder or self.workdir / f"example-{self._n}"
        oracle_path = self.oracle(scenario)
        result = run_scenario(self.adapter, scenario, folder, worker_timeout=self._worker_timeout())
        shutil.copyfile(oracle_path, folder / "oracle.jsonl")
        (folder / "scenario.json").write_text(scenario.model_dump_json(indent=2))
        history = History.load(result.history_path)
        oracle = History.load(oracle_path)
        results = check_properties(history, oracle, self.properties)
        return Example(
            scenario, results, folder, result.coverage, result.seconds, combinations(history)
        )

    def _worker_timeout(self) -> float:
        return worker_timeout(self._budget_left())


def scenario_key(scenario: Scenario) -> str:
    """A fault-free scenario's cache key: what runs (submissions and seed),
    not its name, so the targeted schedules of one workflow, and the shrinks
    of one example, share one fault-free run."""
    return scenario.model_copy(update={"name": ""}).model_dump_json()
