"""The targeted schedules of the ``memory`` family: every kind of planted record,
before and after the clock moves, and while the runs are down; and its
sampled-search episode."""

from __future__ import annotations

from hypothesis import strategies as st

from ...adapters import Capability
from ...model import AdvanceClock, CrashSpec, InjectMemory, RunSpec, RunWorker, Scenario, Step
from .._universe import Universe
from ._common import MEMORY_KINDS, MEMORY_SHAPES, _Aim, _interleave, _rounds, _run, _scenario
from ._draws import _kind
from ._registry import category, episode_of, sweep
from ._swarm import Swarm

#: plants of each shape at most (on the first workflows with a memory target)
MAX_LAPSED = 1


#: memory schedules at most, first each (kind, when, key) once
MAX_MEMORY = 20


@category("memory", place=40)
def _memory(a: _Aim) -> list[Scenario]:
    """Memory planted before the run reads it, at its workflow's first
    memory target (declared, or a namespace its fault-free run read):
    user-supplied text where a workflow waits for an approval (it could
    waive one), other tenants' / expired / superseded records elsewhere.
    And, on the first few workflows, a verified version whose newer
    version has lapsed (``lapsed_newest``): the key is absent, as in the
    oracle; a reader that drops lapsed versions before it picks the newest
    reads the superseded one (where a workflow waits for an approval, a
    verified waiver that no longer holds). Likewise a verified version
    whose newer version only a user supplied (``untrusted_newest``): below
    the trust floor a workflow reads at, the key is absent, never answered
    by the older version."""
    if "memory" not in a.families:
        return []
    by_kind: dict[str, list[Scenario]] = {}
    for wf in a.workflows:
        run = _run(wf)
        aimed = a.u.memory_targets(run)
        if not aimed:
            continue  # no place its runs read: a plant would test nothing
        namespace, key, value = aimed[0]
        kinds: tuple[str, ...] = ("poisoned",)
        if not wf.needs_approval:
            kinds = ("cross_tenant", "expired", "stale")
        kinds += tuple(k for k in MEMORY_SHAPES if len(by_kind.get(k, ())) < MAX_LAPSED)
        for kind in kinds:
            plant = InjectMemory(
                tenant=run.tenant,
                namespace=namespace,
                key=key,
                value=value,
                kind=kind,
                provenance="user_supplied" if kind == "poisoned" else "system_verified",
            )
            by_kind.setdefault(kind, []).append(
                _scenario(f"{wf.name}/memory/{kind}", run, plant, RunWorker(worker_id="w1"))
            )
    # The same shapes at a key the run writes (one its fault-free run
    # wrote and read back): the run's write must number past every stored
    # version, the lapsed newest too, and the key must then read as the
    # run wrote it. Planted as the runtime names its own versions where
    # the environment says how (``memory_id``), a write numbered past the
    # live versions only lands on the lapsed one's id.
    for wf in a.workflows:
        run = _run(wf)
        for ns, k in a.profile(wf).memory_keys[:1]:
            for kind in MEMORY_SHAPES:
                if len(by_kind.get(f"{kind}/writes", ())) >= MAX_LAPSED:
                    continue
                plant = InjectMemory(
                    tenant=run.tenant,
                    namespace=ns,
                    key=k,
                    value={"planted": True},
                    kind=kind,
                    provenance="system_verified",
                    at_written_key=True,
                )
                by_kind.setdefault(f"{kind}/writes", []).append(
                    _scenario(
                        f"{wf.name}/memory/{kind}/writes/{ns}/{k}",
                        run,
                        plant,
                        RunWorker(worker_id="w1"),
                    )
                )
    # Each kind once (on its first workflow), then each again on the next.
    return _interleave(list(by_kind.values()))


@sweep("memory", place=40)
def _memory_clock(a: _Aim) -> list[Scenario]:
    """Every kind of planted memory, planted before the clock moves and
    after it has moved, at a key the run reads and at keys it writes (the
    records its fault-free run read back: see the site profile). Before:
    an ``expired`` record is still live when planted and lapses as the
    clock moves. After: it expired just now, by the moved clock. Each
    (kind, when, key) once before any is tried on another workflow."""
    if "memory" not in a.families or Capability.CLOCK not in a.u.capabilities:
        return []
    step = a.u.lease_seconds + 1
    by_variant: dict[tuple[str, str, str], list[Scenario]] = {}
    for wf in a.workflows:
        run = _run(wf)
        targets = [("reads", ns, k, v) for ns, k, v in a.u.memory_targets(run)[:1]]
        targets += [("writes", ns, k, {"planted": True}) for ns, k in a.profile(wf).memory_keys[:1]]
        for kind in MEMORY_KINDS:
            for when in ("before", "after"):
                for target, ns, k, v in targets:
                    plant = InjectMemory(
                        tenant=run.tenant,
                        namespace=ns,
                        key=k,
                        value=v,
                        kind=kind,
                        provenance="user_supplied" if kind == "poisoned" else "system_verified",
                        expires_in=step / 2 if kind == "expired" and when == "before" else None,
                        at_written_key=target == "writes",
                    )
                    clock = AdvanceClock(seconds=step)
                    steps = (plant, clock) if when == "before" else (clock, plant)
                    by_variant.setdefault((kind, when, target), []).append(
                        _scenario(
                            f"{wf.name}/memory_{when}_clock/{kind}/{target}/{ns}/{k}",
                            run,
                            *steps,
                            RunWorker(worker_id="w1"),
                        )
                    )
    return _interleave(list(by_variant.values()))[:MAX_MEMORY]


@category("memory", place=80)
def _memory_while_down(a: _Aim) -> list[Scenario]:
    """A record at the run's memory target that lapses while the run is
    down: the worker is killed right after the run's first commit, the
    clock moves, a record that expired just now is planted, another worker
    resumes. Its expiry falls between the run's last commit and the resume,
    so a runtime that rebuilds the context as of its checkpoint (to replay
    what the run saw) reads it; one per workflow, with the clock and a
    commit the profile traced."""
    if "memory" not in a.families or Capability.CLOCK not in a.u.capabilities:
        return []
    out = []
    for wf in a.workflows:
        run = _run(wf)
        aimed = a.u.memory_targets(run)
        first = next((c for c in a.profile(wf).commits(a.in_txn) if c.after is not None), None)
        if not aimed or first is None or first.after is None:
            continue
        ns, key, value = aimed[0]
        out.append(
            _scenario(
                f"{wf.name}/memory_while_down/expired/{ns}/{key}",
                run,
                *_rounds(first.round),
                RunWorker(worker_id="w1", crash=CrashSpec(site=first.after[0], nth=first.after[1])),
                AdvanceClock(seconds=a.u.lease_seconds + 1),
                InjectMemory(
                    tenant=run.tenant,
                    namespace=ns,
                    key=key,
                    value=value,
                    kind="expired",
                    provenance="system_verified",
                ),
                RunWorker(worker_id="w2"),
            )
        )
    return out


#: memory kinds planted where they could waive an approval (a verified
#: waiver under a newer version that must hide it), as ``poisoned`` is
GATED_MEMORY_KINDS = frozenset({"poisoned", "lapsed_newest", "untrusted_newest"})


@episode_of("memory")
def _memory_episode(
    draw: st.DrawFn, u: Universe, runs: tuple[RunSpec, ...], n: int, swarm: Swarm
) -> list[Step]:
    kind = _kind(draw, swarm, "memory")
    # Poison is planted where it could do harm: as a stand-in for an
    # approval, so for a run whose workflow asks for one (if any does).
    # Only runs whose workflow has a place to plant at (the universe
    # enables the family when one has): none in this workload, and the
    # episode plants nothing (no fault armed, none counted).
    aimed = tuple(r for r in runs if u.memory_targets(r))
    if not aimed:
        return [RunWorker(worker_id=f"w{n}")]
    gated = tuple(
        r for r in aimed for wf in u.workflows if wf.name == r.workflow and wf.needs_approval
    )
    run = draw(st.sampled_from(gated if kind in GATED_MEMORY_KINDS and gated else aimed))
    namespace, key, value = draw(st.sampled_from(u.memory_targets(run)))
    provenance = "user_supplied" if kind == "poisoned" else "system_verified"
    return [
        InjectMemory(
            tenant=run.tenant,
            namespace=namespace,
            key=key,
            value=value,
            kind=kind,
            provenance=provenance,
        ),
        RunWorker(worker_id=f"w{n}"),
    ]
