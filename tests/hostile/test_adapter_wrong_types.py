"""What an adapter returns is checked at the boundary against the
contract's own annotations (issue 27, defect 9): ``declarations()``
returning a dict was an ``AttributeError`` traceback, ``NaN`` in an
observation a ``HistoryFormatError`` traceback, each exit 1 (a failed
property, as if the runtime were wrong). Now each is exit 2 naming the
hook and, for a number, where in the result it sits; a well-behaved
adapter is not refused.

On ``a4dae93`` the run cases fail (exit 1 with a traceback) and the unit
cases fail to import (``check_returns`` is new).
"""

from __future__ import annotations

import io
import sys
import typing
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENGINE = ROOT / "tests" / "engine"  # hostile_adapters
for _path in (str(ENGINE), str(ROOT)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from harness._errors import AdapterError  # noqa: E402
from harness.adapters import (  # noqa: E402
    Declarations,
    DurableState,
    Observation,
    RunView,
    WorkflowSpec,
)
from harness.adapters._contract import Adapter, Environment  # noqa: E402
from harness.adapters._guard import (  # noqa: E402
    GuardedEnvironment,
    check_finite,
    check_returns,
)
from harness.cli import main  # noqa: E402
from harness.model import RunState  # noqa: E402

pytestmark = pytest.mark.timeout(120)


def _run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, where: str, what: str
) -> tuple[int, str]:
    out = io.StringIO()
    code = main(
        ["run", "--adapter", "hostile_adapters:Misbehaving", "--adapter-opt", f"where={where}",
         "--adapter-opt", f"what={what}", "--max-examples", "2", "--budget", "30",
         "--report-dir", str(tmp_path / "r")],
        out=out,
    )  # fmt: skip
    captured = capsys.readouterr()
    return code, out.getvalue() + captured.out + captured.err


CASES = [
    (
        "declarations",
        "dict",
        "_Misbehaving.declarations() returned {'delivery': {}}, not a "
        "harness.adapters.Declarations",
    ),
    (
        "observe",
        "nan-inside",
        "_Misbehaving.observe() returned nan at result.runs[0].output['total']",
    ),
    ("now", "nan", "_Misbehaving.now() returned nan"),
    ("now", "str", "_Misbehaving.now() returned 'yes', not a float"),
    ("describe", "nan", "Misbehaving.describe() returned nan, not a dict"),
    (
        "open",
        "dict",
        "Misbehaving.open() returned {'delivery': {}}, not a harness.adapters.Environment",
    ),
    ("crash_points", "str", "_Misbehaving.crash_points() returned str, not a list of names"),
    (
        "start_worker",
        "none",
        "_Misbehaving.start_worker() returned None, not a harness.adapters.WorkerHandle",
    ),
]


@pytest.mark.parametrize(("where", "what", "says"), CASES, ids=[f"{w}-{h}" for w, h, _ in CASES])
def test_a_wrong_result_is_an_adapter_error_naming_the_hook(
    where: str, what: str, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, text = _run(capsys, tmp_path, where, what)
    assert code == 2, text
    assert "harness: adapter error: " in text and says in text, text
    assert "Traceback" not in text, text


def test_the_same_adapter_behaving_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, text = _run(capsys, tmp_path, "nowhere", "exit0")
    assert code == 0, text


# -- the mechanism: one check from the annotations, for every hook ---------------

_RUN = RunView(run_id="r1", tenant="acme", state=RunState.PENDING, raw_status="pending")
#: a right and a wrong value for each return annotation the guard checks
_SAMPLES: dict[Any, tuple[Any, Any]] = {
    Declarations: (Declarations(), {"delivery": {}}),
    Observation: (Observation(runs=(_RUN,)), [_RUN]),
    DurableState: (DurableState(), None),
    float: (1.5, "1.5"),
    list[str]: (["a"], "a"),
    list[WorkflowSpec]: ([WorkflowSpec(name="w", inputs=({},))], ["w"]),
    dict[str, Any]: ({"k": 1}, [("k", 1)]),
    dict[str, Any] | None: (None, "message"),
}


def _checked(protocol: type) -> list[tuple[str, Any]]:
    """The methods of ``protocol`` whose results the guard checks by type
    (not ``-> None``, ``-> bool``, nor a protocol of their own)."""
    found = []
    for name, member in vars(protocol).items():
        if name.startswith("_") or not callable(member):
            continue
        annotation = typing.get_type_hints(member).get("return")
        if annotation in (None, type(None), bool) or getattr(annotation, "_is_protocol", False):
            continue
        found.append((name, annotation))
    return found


@pytest.mark.parametrize("protocol", [Environment, Adapter], ids=lambda p: p.__name__)
def test_every_checked_hook_refuses_a_wrong_type_and_takes_a_right_one(protocol: type) -> None:
    hooks = _checked(protocol)
    assert hooks, "the contract's annotations are read"
    for name, annotation in hooks:
        assert annotation in _SAMPLES, f"add a right and a wrong {annotation} for {name}()"
        right, wrong = _SAMPLES[annotation]
        assert check_returns(protocol, f"X.{name}()", name, right) is right
        with pytest.raises(AdapterError, match=rf"X\.{name}\(\) returned .*, not "):
            check_returns(protocol, f"X.{name}()", name, wrong)


@pytest.mark.parametrize(
    ("value", "where"),
    [
        (float("inf"), "result"),
        ({"a": [1, {"b": float("nan")}]}, "result['a'][1]['b']"),
        (
            Observation(runs=(_RUN.model_copy(update={"output": {"x": float("-inf")}}),)),
            "result.runs[0].output['x']",
        ),
    ],
)
def test_a_number_that_is_not_finite_is_named_where_it_sits(value: Any, where: str) -> None:
    with pytest.raises(AdapterError, match=r"returned .* at (\S+): every number") as caught:
        check_finite("X.observe()", value)
    assert f" at {where}: " in str(caught.value)


def test_a_result_that_contains_itself_is_refused_not_a_recursion_error() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(AdapterError, match="nested more than"):
        check_finite("X.describe()", loop)


def test_pass_through_calls_keep_their_exceptions_but_not_their_exits() -> None:
    """``submit`` and ``deliver`` raise the runtime's refusals to the runner,
    which records them; an exit from them is still the adapter's error."""

    class Env:
        def deliver(self, message: dict[str, Any]) -> bool:
            if message.get("exit"):
                raise SystemExit(0)
            raise ValueError("refused")

    env = GuardedEnvironment(Env())  # as a guarded adapter's open() hands it out
    with pytest.raises(ValueError, match="refused"):
        env.deliver({})
    with pytest.raises(AdapterError, match=r"Env\.deliver\(\) raised SystemExit\(0\)"):
        env.deliver({"exit": True})
