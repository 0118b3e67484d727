"""Adapters by short name (issue 30): the ``harness.adapters`` entry points.

``--adapter temporal`` loads what an installed distribution registered under
that name; this package registers the adapters it ships, a third party
registers its own, and ``harness list adapters`` shows them all, each read
as metadata without importing it.

A third party is a distribution made here: a ``*.dist-info`` folder (its
``METADATA`` and ``entry_points.txt``) beside the adapter module it names,
in a folder on ``PYTHONPATH``, which ``importlib.metadata`` finds as it
finds an installed package.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import subprocess
import sys
import tomllib
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from harness.adapters._loading import load_adapter
from harness.adapters._registry import GROUP, SHIPPED, registered
from harness.cli import main

ROOT = Path(__file__).resolve().parents[2]
MINIMAL = ROOT / "examples" / "minimal_adapter" / "adapter.py"

#: the example application each framework adapter is loaded on, and the
#: module whose absence means its extra is not installed
APPS = {
    "langgraph": ("examples.langgraph_refund.correct:APP", "langgraph"),
    "openai_agents": ("examples.openai_agents_refund.careful:APP", "agents"),
    "dbos": ("examples.dbos_refund.careful:APP", "dbos"),
    "temporal": ("examples.temporal_refund.careful:APP", "temporalio"),
    "prefect": ("examples.prefect_refund.careful:APP", "prefect"),
}


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    out = io.StringIO()
    code = main(list(args), out=out)
    captured = capsys.readouterr()
    return code, out.getvalue() + captured.out, captured.err


def _distribution(
    folder: Path, dist: str, module: str, entries: dict[str, str], summary: str = ""
) -> Path:
    """A distribution ``dist`` in ``folder``: its metadata and a copy of the
    guide's minimal adapter as ``module``; ``entries``: name -> target."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{module}.py").write_text(MINIMAL.read_text())
    info = folder / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\nSummary: {summary}\n"
    )
    lines = [f"[{GROUP}]", *(f"{name} = {target}" for name, target in entries.items())]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    return folder


def _harness(*args: str, cwd: Path, pythonpath: Path) -> subprocess.CompletedProcess[str]:
    """``harness ARGS`` as a script runs it, with ``pythonpath`` on PYTHONPATH
    and none of the caller's settings."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CI", "GITHUB_STEP_SUMMARY")
        and not (k.startswith("HARNESS_") and not k.endswith("_URL"))
    }
    env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


@pytest.fixture
def third_party(tmp_path: Path) -> Path:
    """A folder holding ``toy-harness-adapter``, which registers ``toy``."""
    return _distribution(
        tmp_path / "site",
        "toy-harness-adapter",
        "toy_harness_adapter",
        {"toy": "toy_harness_adapter:ToyAdapter"},
        summary="the guide's toy runtime, registered by name",
    )


# -- this package's registrations --------------------------------------------


def test_pyproject_registers_every_shipped_adapter_at_the_tables_target() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = project["entry-points"][GROUP]
    assert declared == {name: s.target for name, s in SHIPPED.items()}
    # and the installed metadata says the same (pip install -e . was re-run)
    installed = {
        ep.name: ep.value
        for ep in entry_points(group=GROUP)
        if ep.dist is not None and ep.dist.metadata["Name"] == "stateful-agent-harness"
    }
    assert installed == declared


def test_every_shipped_adapter_is_listed_first_from_this_distribution() -> None:
    found = registered()
    assert [r.name for r in found[: len(SHIPPED)]] == list(SHIPPED)
    for r in found[: len(SHIPPED)]:
        assert r.distribution == "stateful-agent-harness", r
        assert r.shipped is SHIPPED[r.name]


def test_reference_by_name_parses_its_own_options() -> None:
    adapter = load_adapter("reference", {"lease_seconds": "12", "bug": "no-idempotency-key"})
    assert type(adapter).__name__ == "ReferenceAdapter"
    assert adapter.lease_seconds == 12.0  # type: ignore[attr-defined]
    assert adapter.bugs == {"no-idempotency-key"}  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", sorted(APPS))
def test_a_framework_adapter_loads_by_its_short_name(name: str) -> None:
    app, framework = APPS[name]
    if importlib.util.find_spec(framework) is None:
        pytest.skip(f"the {SHIPPED[name].extra} extra is not installed here")
    by_name = load_adapter(name, {"app": app})
    module, _, attr = SHIPPED[name].target.partition(":")
    assert type(by_name) is getattr(importlib.import_module(module), attr)
    assert by_name.describe()["app"] == app


def test_a_framework_adapter_named_without_its_app_says_what_the_option_names(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = _cli(capsys, "check-adapter", "temporal")
    assert code == 2, err
    assert "adapter 'temporal' (stateful-agent-harness" in err
    assert "it takes --adapter-opt app=package.module:APP (a TemporalApp)" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("spec", "says"),
    [("temporl", "did you mean 'temporal'?"), ("DBOS", "did you mean 'dbos'?")],
)
def test_an_unknown_short_name_exits_2_with_the_installed_name_it_resembles(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, spec: str, says: str
) -> None:
    code, _, err = _cli(capsys, "run", "--adapter", spec, "--report-dir", str(tmp_path / "r"))
    assert code == 2, err
    assert f"adapter {spec!r} is neither an installed adapter (reference, langgraph," in err
    assert says in err
    assert not (tmp_path / "r").exists()


def test_a_shipped_adapter_whose_framework_is_missing_names_the_extra(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "sys.modules['temporalio'] = None  # as if the temporal extra were not installed\n"
        "from harness.cli import main\n"
        "sys.exit(main(['check-adapter', sys.argv[1], '--adapter-opt', 'app=x:APP']))\n"
    )
    for spec in ("temporal", "harness.adapters.temporal:TemporalAdapter"):
        proc = subprocess.run(
            [sys.executable, "-c", code, spec],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "needs the temporal extra" in proc.stderr
        assert "pip install 'stateful-agent-harness[temporal]'" in proc.stderr
        assert "Traceback" not in proc.stderr


def test_listing_adapters_imports_none_of_them(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from harness.cli import main\n"
        "rc = main(['list', 'adapters'])\n"
        "print(rc, sorted(m for m in sys.modules if m.split('.')[0] in "
        "('temporalio', 'langgraph', 'dbos', 'agents', 'hypothesis', 'reference_runtime') "
        "or m.startswith(('harness.adapters.', 'harness.session'))))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    last = proc.stdout.strip().splitlines()[-1]
    assert last == "0 ['harness.adapters._registry']", proc.stdout + proc.stderr


def test_list_adapters_gives_each_name_its_target_distribution_and_options(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = _cli(capsys, "list", "adapters")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("reference      harness.adapters.reference:from_options  [")
    assert "built in; options: backend=sqlite|postgres" in lines[0]
    temporal = next(ln for ln in lines if ln.startswith("temporal "))
    assert "harness.adapters.temporal:TemporalAdapter  [stateful-agent-harness " in temporal
    assert "pip install 'stateful-agent-harness[temporal]'" in temporal
    assert "app=package.module:APP (a TemporalApp)" in temporal
    assert lines[-1].startswith("any            package.module:attr  (your own")


# -- a third party's registration --------------------------------------------


def test_a_third_party_adapter_is_listed_checked_run_and_replayed_by_its_name(
    tmp_path: Path, third_party: Path
) -> None:
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    listed = _harness("list", "adapters", cwd=cwd, pythonpath=third_party)
    assert listed.returncode == 0, listed.stderr
    toy = next(ln for ln in listed.stdout.splitlines() if ln.startswith("toy "))
    assert toy.split()[:3] == ["toy", "toy_harness_adapter:ToyAdapter", "[toy-harness-adapter"]
    assert "(the guide's toy runtime, registered by name)" in toy

    checked = _harness("check-adapter", "toy", cwd=cwd, pythonpath=third_party)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # the next command names the folder a fresh harness needs to find it
    next_run = f"(next: PYTHONPATH={third_party} harness run --adapter toy --profile ci)"
    assert next_run in checked.stdout

    report = tmp_path / "r"
    ran = _harness(
        *("run", "--adapter", "toy", "--adapter-opt", "keyed=false"),
        *("--profile", "dev", "--max-examples", "1", "--seed", "0"),
        *("--report-dir", str(report)),
        cwd=cwd,
        pythonpath=third_party,
    )
    assert ran.returncode == 1, ran.stdout + ran.stderr  # the unkeyed charge, found
    assert json.loads((report / "report.json").read_text())["adapter"]["spec"] == "toy"
    replay = (
        f"replay: PYTHONPATH={third_party} harness replay {report} --adapter toy "
        "--adapter-opt keyed=false"
    )
    assert replay in ran.stdout

    # The folder names an installed adapter, but its options are not the
    # user's word: replayed only when named or trusted.
    refused = _harness("replay", str(report), cwd=cwd, pythonpath=third_party)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "records adapter 'toy', an installed adapter that is not built in" in refused.stderr
    trusted = _harness("replay", str(report), "--trust-adapter", cwd=cwd, pythonpath=third_party)
    assert trusted.returncode == 1, trusted.stdout + trusted.stderr
    assert "reproduced: exactly_once_effects" in trusted.stdout


def test_a_name_two_distributions_register_is_refused_naming_both(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _distribution(
        tmp_path / "site", "reference-impostor", "impostor", {"reference": "impostor:ToyAdapter"}
    )
    monkeypatch.syspath_prepend(str(folder))
    code, _, err = _cli(capsys, "check-adapter", "reference")
    assert code == 2, err
    assert "adapter name 'reference' is registered by more than one installed" in err
    assert "'reference' (reference-impostor 0.1: impostor:ToyAdapter)" in err
    assert "impostor" not in sys.modules  # refused before anything was imported
    code, out, _ = _cli(capsys, "list", "adapters")
    assert code == 0
    line = next(ln for ln in out.splitlines() if "impostor:ToyAdapter" in ln)
    assert "--adapter reference is refused" in line
