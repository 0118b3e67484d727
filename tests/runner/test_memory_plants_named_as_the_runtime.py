"""Planted memory records are numbered and named as the runtime numbers and
names its own versions, where the environment says how (``memory_versions``
and ``memory_id``): the reference runtime's scheme, ``tenant:namespace:key:vN``.

A run that writes a key whose newest version lapsed must number its write
past the lapsed one; planted under the runtime's own ids, a write numbered
past the live versions only would land on the lapsed version's id."""

from __future__ import annotations

from pathlib import Path

from harness import Engine, load_settings
from harness.adapters.reference import ReferenceAdapter
from harness.history import History
from harness.scenarios import probe_universe, targeted


def test_a_lapsed_newest_plant_at_a_written_key_takes_the_runtimes_ids(tmp_path: Path) -> None:
    plan = targeted(probe_universe(ReferenceAdapter()))
    scenario = next(s for s in plan if "/memory/lapsed_newest/writes/" in s.name)
    engine = Engine(ReferenceAdapter(), load_settings("dev"), workdir=tmp_path)
    example = engine.execute(scenario, folder=tmp_path / "example")
    assert {r.name: r.verdict.value for r in example.results if r.verdict.value == "fail"} == {}
    history = History.load(tmp_path / "example" / "history.jsonl")
    plant = next(e.value for e in history.by_f("memory"))
    ns, key = plant["namespace"], plant["key"]
    # the live older version, as the runtime would have named it
    assert plant["memory_id"] == f"acme:{ns}:{key}:v1" and plant["version"] == 1
    # the run numbered its own write past the lapsed v2, and read it back
    read = {m for e in history.by_f("context") for m in e.value.get("memory_ids") or ()}
    assert f"acme:{ns}:{key}:v3" in read, sorted(read)
    assert f"acme:{ns}:{key}:v2" not in read
