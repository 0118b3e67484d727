"""The single-job GitHub Actions workflow of docs/ci.md ("Your own adapter,
one job"), run here step by step as written.

The workflow is read from the document itself, so a change there is what
is tested. Each ``run:`` step goes to bash, in a fresh project whose
adapter (``myproject.adapter:MyAdapter``) is the guide's minimal adapter,
with GitHub's ``${{ ... }}`` expressions replaced by what a runner would
give (an unset secret is the empty string). The install step is resolved
against this checkout (``HARNESS_PACKAGE`` set to its path, as the document
says a vendored copy is) without installing anything: ``pip install
--dry-run --no-deps``. The plan is bounded through the
environment (``HARNESS_MAX_EXAMPLES``), which the commands leave alone.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml
from engine_support import subprocess_env

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "ci.md"
TOY = ROOT / "examples" / "minimal_adapter" / "adapter.py"
#: Install steps are resolved, not run: nothing is installed into the tests' Python.
DRY_RUN = "pip install --dry-run --no-deps "


def _workflow() -> dict[str, Any]:
    text = DOC.read_text()
    section = text.split("## Your own adapter, one job", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert block is not None, "docs/ci.md lost its single-job workflow"
    data: dict[str, Any] = yaml.safe_load(block.group(1))
    return data


def _expand(text: str, secrets: dict[str, str]) -> str:
    def value(m: re.Match[str]) -> str:
        kind, _, name = m.group(1).strip().partition(".")
        assert kind == "secrets", f"the job uses an expression this test cannot give: {m.group()}"
        return secrets.get(name, "")

    return re.sub(r"\$\{\{(.*?)\}\}", value, text)


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    (project / "myproject").mkdir(parents=True)
    (project / "myproject" / "__init__.py").write_text("")
    shutil.copy(TOY, project / "myproject" / "adapter.py")
    with (project / "myproject" / "adapter.py").open("a") as f:
        f.write("\nMyAdapter = ToyAdapter\n")
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "myproject"\nversion = "0"\n'
        '[tool.setuptools]\npackages = ["myproject"]\n'
    )
    return project


def _run(script: str, project: Path, env: dict[str, str]) -> str:
    proc = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", script],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"the step failed:\n{script}\n{out}"
    assert "Traceback" not in out, out
    return out


def test_the_single_job_workflow_runs_as_written_with_and_without_its_secret(
    tmp_path: Path,
) -> None:
    job = _workflow()["jobs"]["harness"]
    project = _project(tmp_path)
    base = subprocess_env({"HARNESS_MAX_EXAMPLES": "15", "HARNESS_SEED": "3"})
    base.pop("PYTHONPATH", None)

    def env_with(secrets: dict[str, str]) -> dict[str, str]:
        env = dict(base)
        env.update({k: _expand(str(v), secrets) for k, v in job.get("env", {}).items()})
        env["HARNESS_PACKAGE"] = str(ROOT)  # a vendored copy, as the document allows
        return env

    # A fork's pull request: the secret is unset, so it is the empty string.
    env = env_with({})
    outs: dict[str, str] = {}
    for step in job["steps"]:
        if "run" not in step:
            assert step["uses"].split("@")[0] in {
                "actions/checkout",
                "actions/setup-python",
                "actions/upload-artifact",
            }, step
            continue
        script = _expand(step["run"], {}).replace("pip install ", DRY_RUN)
        outs[step["name"]] = _run(script, project, env)
    assert len(outs) == 3, list(outs)
    search = next(step for step in job["steps"] if step.get("name", "").startswith("search"))
    assert "verdict: PASS" in outs[search["name"]]
    assert "example database" not in outs[search["name"]]
    report = project / "harness-report"
    assert (report / "report.json").is_file() and (report / ".harness-report").is_file()

    # With the secret set, the same step keeps what it finds there.
    db = tmp_path / "example-db"
    secrets = {"HARNESS_EXAMPLE_DB": str(db)}
    out = _run(_expand(search["run"], secrets), project, env_with(secrets))
    assert f"example database {db}" in out, out
