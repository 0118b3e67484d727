"""What an adapter offers, as scenario generation needs it: the
:class:`Universe`, read once from the adapter and a throwaway environment
(:func:`probe_universe`), with each workflow's site profile."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..adapters import STORAGE_KINDS, Adapter, Capability, WorkflowSpec
from ..adapters._netinfo import offered_network_kinds
from ..model import RunSpec, StorageKind
from ..runner import WORKER_TIMEOUT, environment_facts
from ..vocabulary import (
    AT_EFFECT_NETWORK_KINDS,
    FAMILIES,
    FAMILY,
    NETWORK_KINDS,
    PROXY_NETWORK_KINDS,
)
from ._profile import WorkflowProfile, profile_workflow

TENANTS = ("acme", "globex")
#: the key a planted record takes in a namespace a run was seen reading,
#: when its workflow declares no ``memory_targets``: one it never writes
PLANTED_KEY = "harness-planted"
PLANTED_VALUE: Mapping[str, Any] = {"claim": "planted by the harness", "planted": True}


@dataclass(frozen=True)
class Universe:
    """What the adapter offers, as scenario generation needs it."""

    workflows: tuple[WorkflowSpec, ...]
    crash_points: tuple[str, ...]
    capabilities: frozenset[Capability]
    lease_seconds: float = 30.0
    #: crash points where a worker may be held paused (see Environment.pause_points)
    pause_points: tuple[str, ...] = ()
    families: tuple[str, ...] = FAMILIES
    max_runs: int = 3
    max_episodes: int = 4
    #: storage fault kinds the environment offers (see offered_storage_kinds);
    #: None when not probed: every kind, if the capability is there
    storage_kinds: tuple[StorageKind, ...] | None = None
    #: per workflow: the crash points a fault-free run passes, with the highest
    #: hit number one worker reaches (empty: not profiled, aim anywhere)
    site_hits: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    #: per workflow: its site profile (site order per worker round, the site
    #: right before each effect), for the targeted schedules
    profiles: Mapping[str, WorkflowProfile] = field(default_factory=dict)
    #: effect kind -> the delivery the runtime declares for it (empty: not probed)
    delivery: Mapping[str, str] = field(default_factory=dict)
    #: network fault kinds the kernel backend can inflict on the adapter's
    #: connections (see offered_network_kinds: none over a Unix socket);
    #: None when not probed: every kind, if the capability is there
    network_kinds: tuple[str, ...] | None = None
    #: the adapter declares that an older release's workers may meet runs
    #: this release touched (``rolls_back = True``: rollbacks, rolling
    #: deploys); without it no rollback order of versions is drawn or aimed
    rollbacks: bool = False

    def reached(self, runs: tuple[RunSpec, ...], sites: tuple[str, ...]) -> dict[str, int]:
        """Of ``sites``, those the workload's runs pass, with their hit bound."""
        out: dict[str, int] = {}
        for r in runs:
            for site, n in self.site_hits.get(r.workflow, {}).items():
                if site in sites:
                    out[site] = max(out.get(site, 0), n)
        return out

    def memory_targets(self, run: RunSpec) -> tuple[tuple[str, str, Any], ...]:
        """(namespace, key, value) where planted memory is aimed for ``run``:
        its workflow's declared ``memory_targets``; else, a new key
        (:data:`PLANTED_KEY`) in each namespace whose records the fault-free
        run's contexts listed; else none."""
        wf = next((w for w in self.workflows if w.name == run.workflow), None)
        if wf is not None and wf.memory_targets:
            return tuple((*t.at(run.input), t.value) for t in wf.memory_targets)
        profile = self.profiles.get(run.workflow)
        read = dict.fromkeys(ns for ns, _ in profile.memory_keys) if profile else {}
        return tuple((ns, PLANTED_KEY, dict(PLANTED_VALUE)) for ns in read)

    def aims_memory(self) -> bool:
        """Whether any workflow has a place to plant memory (declared, or
        read in its fault-free run): without one, the memory family plants
        where no run looks, and tests nothing."""
        return any(
            wf.memory_targets or (p is not None and p.memory_keys)
            for wf in self.workflows
            for p in (self.profiles.get(wf.name),)
        )

    def offered_storage_kinds(self) -> tuple[StorageKind, ...]:
        if Capability.STORAGE_FAULTS not in self.capabilities:
            return ()
        return STORAGE_KINDS if self.storage_kinds is None else self.storage_kinds

    def offered_network_kinds(self) -> tuple[str, ...]:
        """The network fault kinds scenarios may arm (none without the
        capability): with crash points, those fired at a worker paused at
        one; without, those fired at the world's effect boundary
        (:data:`~harness.vocabulary.AT_EFFECT_NETWORK_KINDS`, where the
        backend can: Toxiproxy, the adapter routing its workers)."""
        if Capability.NETWORK_FAULTS not in self.capabilities:
            return ()
        kinds = (
            NETWORK_KINDS
            if self.network_kinds is None
            else tuple(k for k in PROXY_NETWORK_KINDS if k in self.network_kinds)
        )
        paused = Capability.CRASH_POINTS in self.capabilities and bool(self.crash_points)
        return tuple(k for k in kinds if (k in AT_EFFECT_NETWORK_KINDS) != paused)

    def in_transaction_points(self) -> tuple[str, ...]:
        """Crash points inside a storage transaction: declared, but not safe
        to pause at between steps (``checkpoint_stmt_*`` for the reference)."""
        pausable = set(self.pause_points)
        return tuple(p for p in self.crash_points if p not in pausable)

    def enabled(self) -> tuple[str, ...]:
        caps = self.capabilities
        out = []
        for fam in self.families:
            cap = FAMILY[fam].needs if fam in FAMILY else None
            if cap is None or cap in caps:
                if fam == "crash" and not self.crash_points:
                    continue
                if fam in ("zombie", "operator") and not self.pause_points:
                    continue
                # A zombie outlives its lease by a clock jump (AdvanceClock):
                # without the clock its episode is a scenario the adapter refuses.
                if fam == "zombie" and Capability.CLOCK not in caps:
                    continue
                if fam == "storage" and not (
                    self.offered_storage_kinds()
                    and Capability.CRASH_POINTS in caps
                    and (self.pause_points or self.in_transaction_points())
                ):
                    continue
                # Network faults are fired at a worker paused at a crash
                # point, or (without crash points) held by the world right
                # after an effect; never armed where they cannot fire: a
                # store over a Unix socket (the report says which, see
                # network_gaps), a worker not routed through a proxy.
                if fam == "network" and not self._network_aims():
                    continue
                if fam == "memory" and not self.aims_memory():
                    continue
                out.append(fam)
        return tuple(out)

    def _network_aims(self) -> bool:
        """Whether a network episode has a kind to arm: a lost acknowledgement
        or a reset, or a partition (it needs the clock and a pause point)."""
        kinds = self.offered_network_kinds()
        if set(kinds) & set(AT_EFFECT_NETWORK_KINDS):
            return True
        partition = (
            "partition" in kinds and Capability.CLOCK in self.capabilities and self.pause_points
        )
        return bool(set(kinds) - {"partition"}) or bool(partition)


def probe_universe(
    adapter: Adapter,
    *,
    families: tuple[str, ...] | None = None,
    max_runs: int = 3,
    max_episodes: int = 4,
    aim_effects: bool = True,
    worker_timeout: float = WORKER_TIMEOUT,
    network_kinds: tuple[str, ...] = NETWORK_KINDS,
) -> Universe:
    """What ``adapter`` offers, read from one throwaway environment, with a
    site profile per workflow. ``aim_effects`` also looks for the site right
    before each effect (the targeted schedules need it; a sampled-only or
    exhaustive run does not). A profiling worker still running after
    ``worker_timeout`` seconds is an adapter error. ``network_kinds``: the
    kinds the network backend in use can inflict (:data:`PROXY_NETWORK_KINDS`
    on Toxiproxy), of which those the adapter's connections allow are offered."""
    facts = environment_facts(adapter)
    profiles = {
        wf.name: profile_workflow(adapter, wf, effects=aim_effects, worker_timeout=worker_timeout)
        for wf in adapter.workflows()
    }
    return Universe(
        site_hits={k: p.hits for k, p in profiles.items() if p.hits},
        profiles={k: p for k, p in profiles.items() if p.hits},
        workflows=tuple(adapter.workflows()),
        crash_points=facts.crash_points,
        pause_points=facts.pause_points,
        capabilities=frozenset(adapter.capabilities),
        lease_seconds=float(getattr(adapter, "lease_seconds", 30.0)),
        families=families or FAMILIES,
        max_runs=max_runs,
        max_episodes=max_episodes,
        storage_kinds=facts.storage_kinds,
        delivery=dict(facts.delivery),
        network_kinds=offered_network_kinds(adapter, network_kinds),
        rollbacks=getattr(adapter, "rolls_back", False) is True,
    )
