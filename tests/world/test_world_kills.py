"""Real SIGKILL of the calling process, and what the world remembers after it."""

from __future__ import annotations

import importlib
import multiprocessing
import os
import signal
from multiprocessing.process import BaseProcess
from typing import Literal

import pytest

from harness.world import Caller, FaultRule, World

CHARGE = {"amount": 5, "currency": "EUR"}
KILLED = -signal.SIGKILL


def _charge(path: str, key: str, calls: int = 1) -> None:
    """A worker: builds its client from the spec string, as a runtime would."""
    module, _, attr = "harness.world:open_world".partition(":")
    client = getattr(importlib.import_module(module), attr)(path)
    for i in range(calls):
        client.call(
            "payments", "charge", CHARGE, idempotency_key=f"{key}-{i}",
            caller=Caller("t1", "r1", op_id=f"op{i}", worker_id="child"),
        )  # fmt: skip


def _run(method: Literal["fork", "spawn"], path: str, key: str, calls: int = 1) -> BaseProcess:
    args = (path, key, calls)
    child: BaseProcess
    if method == "fork":
        child = multiprocessing.get_context("fork").Process(target=_charge, args=args)
    else:
        child = multiprocessing.get_context("spawn").Process(target=_charge, args=args)
    child.start()
    child.join(timeout=30)
    return child


def test_kill_before_apply_kills_the_caller_and_nothing_is_applied(world: World) -> None:
    world.arm(FaultRule("payments", nth=1, mode="kill_before_apply"))

    child = _run("fork", world.path, "k")

    assert child.exitcode == KILLED
    [record] = world.requests()
    assert (record.outcome, record.applied, record.pid) == ("killed_before_apply", False, child.pid)
    assert world.effects() == []
    [fired] = world.fired()
    assert (fired.mode, fired.pid, fired.worker_id) == ("kill_before_apply", child.pid, "child")


def test_kill_after_apply_kills_the_caller_after_the_effect_is_committed(world: World) -> None:
    world.arm(FaultRule("payments", nth=1, mode="kill_after_apply"))

    child = _run("fork", world.path, "k")

    assert child.exitcode == KILLED
    [effect] = world.effects()
    assert (effect.outcome, effect.pid) == ("killed_after_apply", child.pid)
    assert world.fired()[0].request_seq == effect.seq
    # The successor's retry with the same key is recognised: still one charge.
    retry = world.client().call(
        "payments", "charge", CHARGE, idempotency_key="k-0", caller=Caller("t1", "r1")
    )
    assert (retry.external_ref, retry.deduplicated) == (effect.external_ref, True)
    assert len(world.effects()) == 1


def test_kill_after_apply_works_in_a_fresh_interpreter_too(world: World) -> None:
    world.arm(FaultRule("payments", nth=1, mode="kill_after_apply"))

    child = _run("spawn", world.path, "k")

    assert child.exitcode == KILLED
    assert [e.outcome for e in world.effects()] == ["killed_after_apply"]


def test_every_record_made_before_the_kill_survives_it(world: World) -> None:
    world.arm(FaultRule("payments", nth=4, mode="kill_before_apply"))

    child = _run("fork", world.path, "k", calls=10)

    assert child.exitcode == KILLED
    world.close()
    reopened = World(world.path).open()  # a fresh connection reads the file
    assert [r.outcome for r in reopened.requests()] == ["applied"] * 3 + ["killed_before_apply"]
    assert reopened.summary()["payments"].killed == 1
    assert len(reopened.effects()) == 3


def test_a_client_inherited_through_fork_opens_its_own_connection(
    world: World, caller: Caller
) -> None:
    client = world.client()
    client.call("email", "send", {"from": "parent"}, caller=caller)  # parent's connection open

    def child_sends() -> None:
        client.call("email", "send", {"from": "child"}, caller=caller)

    child = multiprocessing.get_context("fork").Process(target=child_sends)
    child.start()
    child.join(timeout=30)
    assert child.exitcode == 0
    client.call("email", "send", {"from": "parent"}, caller=caller)

    assert [(r.request["from"], r.pid) for r in world.requests()] == [
        ("parent", os.getpid()),
        ("child", child.pid),
        ("parent", os.getpid()),
    ]


@pytest.mark.parametrize("mode", ["kill_before_apply", "kill_after_apply"])
def test_a_kill_rule_leaves_the_world_usable_by_the_next_worker(world: World, mode: str) -> None:
    world.arm(FaultRule("payments", nth=1, mode=mode))  # type: ignore[arg-type]
    assert _run("fork", world.path, "k").exitcode == KILLED

    # The killed worker held no lock: its transaction had committed before the kill.
    assert _run("fork", world.path, "other").exitcode == 0
    assert world.effects()[-1].idempotency_key == "other-0"


def _charge_and_exit(path: str) -> None:
    """A caller that exits 7 once it has its answer (and 9 without one)."""
    try:
        _charge(path, "s")
    except BaseException:
        os._exit(9)
    os._exit(7)


def test_stop_after_apply_holds_the_caller_until_continued_then_it_gets_its_answer(
    world: World,
) -> None:
    rule_id = world.arm(FaultRule("payments", nth=1, mode="stop_after_apply"))
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        _charge_and_exit(world.path)
    _, status = os.waitpid(pid, os.WUNTRACED)
    assert os.WIFSTOPPED(status), status
    # Held once the effect is committed: applied, recorded, the rule fired.
    [effect] = world.effects()
    assert (effect.outcome, effect.applied, effect.pid) == ("applied", True, pid)
    [fired] = world.fired()
    assert (fired.rule_id, fired.mode, fired.request_seq) == (
        rule_id,
        "stop_after_apply",
        effect.seq,
    )
    assert world.disarm(rule_id) is False  # it fired: it stays, with its record
    os.kill(pid, signal.SIGCONT)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 7, status


def test_a_rule_that_has_not_fired_can_be_disarmed(world: World) -> None:
    rule_id = world.arm(FaultRule("payments", nth=1, mode="stop_after_apply"))
    assert world.disarm(rule_id) is True
    assert world.rules() == []
    world.client().call("payments", "charge", CHARGE, caller=Caller("t1", "r1"))  # not held
    assert world.fired() == []
