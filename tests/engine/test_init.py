"""``harness init``: the scaffold for a user's runtime, as a new user meets it.

The queue shape is filled in as a user would, above its "nothing to change
below" line only: with a naive job queue (examples/lease_queue's
``jobs.py``, its charge without an idempotency key), whose second charge
the search finds; and with issue 29's trial, a two-effect outbox
(``outbox_runtime.py``: charge, then email the receipt) whose safe variant
is an adapter option. The generated workflow's ``run:`` steps are run as
written in a project with no pyproject, as tests/engine/test_ci_recipe.py
runs docs/ci.md's."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from engine_support import subprocess_env

from harness import _scaffold

ROOT = Path(__file__).resolve().parents[2]
ENGINE = Path(__file__).resolve().parent
SPEC = "harness_adapter:QueueAdapter"
#: the line the user fills in above, and never edits below
MARK = "# --- The adapter: nothing to change below"
FILES = ("harness_adapter.py", "tests/test_resilience.py", ".github/workflows/resilience.yml")

#: the user's four calls into their queue, as they would write them
FILLED = {
    "open_queue": "return myqueue.JobQueue(path)",
    "submit_job": "queue.put(job_id, tenant, kind, payload)",
    "list_jobs": "return queue.jobs()",
    "run_worker": "myqueue.work(queue, world, now, worker_id)",
}


def _harness(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=cwd,
        env=subprocess_env({"PYTHONPATH": str(cwd), "HARNESS_MAX_EXAMPLES": "20"}),
        capture_output=True,
        text=True,
        timeout=600,
    )


def _fill(
    root: Path, calls: dict[str, str], module: str, tables: dict[str, str] | None = None
) -> None:
    """Fill the scaffolded adapter in as a user does: import ``module``,
    replace each line of ``tables`` (old -> new) and write the four
    ``calls``' bodies, all above MARK; below it, nothing changes."""
    path = root / "harness_adapter.py"
    generated = path.read_text()
    future = "from __future__ import annotations\n"
    text = generated.replace(future, future + f"import {module}\n", 1)
    for old, new in (tables or {}).items():
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    for name, body in calls.items():

        def filled(m: re.Match[str], body: str = body) -> str:
            return f"{m.group(1)}    {body}\n"

        text, n = re.subn(
            rf'(def {name}\(.*?""".*?"""\n)    raise NotImplementedError\([^\n]*\)\n',
            filled,
            text,
            count=1,
            flags=re.S,
        )
        assert n == 1, name
    assert text.split(MARK, 1)[1] == generated.split(MARK, 1)[1]
    path.write_text(text)


def test_init_writes_three_files_and_never_over_one(tmp_path: Path) -> None:
    proc = _harness("init", "--shape", "queue", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # what to run next ends with the search CI runs: the ci profile
    assert (
        f"harness: next: fill in what harness_adapter.py marks, then `PYTHONPATH=. harness "
        f"check-adapter {SPEC}` and `PYTHONPATH=. harness run --adapter {SPEC} --profile ci`"
    ) in proc.stdout
    written = {p: (tmp_path / p).read_text() for p in FILES}
    # Again: refused, naming the files, and nothing changed.
    proc = _harness("init", "--shape", "queue", cwd=tmp_path)
    assert proc.returncode == 2 and "harness_adapter.py" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert {p: (tmp_path / p).read_text() for p in FILES} == written
    # A link where a file would go is never followed.
    other = tmp_path / "other"
    other.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("mine")
    (other / "harness_adapter.py").symlink_to(victim)
    proc = _harness("init", "--shape", "queue", str(other), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert victim.read_text() == "mine" and not (other / "tests").exists()


def test_the_unfilled_queue_adapter_says_what_to_fill_in(tmp_path: Path) -> None:
    assert _harness("init", "--shape", "queue", cwd=tmp_path).returncode == 0
    proc = _harness("check-adapter", "harness_adapter:QueueAdapter", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "fill in harness_adapter.open_queue" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


def _but_the_install(workflow: dict[str, Any]) -> dict[str, Any]:
    job = workflow["jobs"]["harness"]
    job["env"].pop("HARNESS_PACKAGE")
    job["steps"] = [s for s in job["steps"] if not s.get("name", "").startswith("install")]
    return workflow


def test_the_scaffolded_workflow_is_the_documented_one_but_for_its_install(
    tmp_path: Path,
) -> None:
    # tests/engine/test_ci_recipe.py runs the documented job step by step;
    # the scaffold's install step differs: it knows where the harness came
    # from, and a project with no pyproject installs only what it has.
    assert _harness("init", "--shape", "queue", cwd=tmp_path).returncode == 0
    doc = (ROOT / "docs" / "ci.md").read_text().split("## Your own adapter, one job", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", doc, re.S)
    assert block is not None
    documented = yaml.safe_load(block.group(1).replace("myproject.adapter:MyAdapter", SPEC))
    written = yaml.safe_load((tmp_path / ".github/workflows/resilience.yml").read_text())
    assert _but_the_install(written) == _but_the_install(documented)


def test_the_suite_says_the_command_the_readme_says(tmp_path: Path) -> None:
    assert _harness("init", "--shape", "queue", cwd=tmp_path).returncode == 0
    suite = (tmp_path / "tests" / "test_resilience.py").read_text()
    readme = (ROOT / "README.md").read_text()
    said = re.findall(r"`(pytest --harness-profile \w+)`", readme)
    assert said == ["pytest --harness-profile ci"], said
    assert f"\n    {said[0]}\n" in suite, suite


def test_a_framework_shape_needs_its_app_and_drives_the_builtin_adapter(tmp_path: Path) -> None:
    proc = _harness("init", "--shape", "langgraph", cwd=tmp_path)
    assert proc.returncode == 2 and "--app" in proc.stderr, proc.stderr
    assert not (tmp_path / "harness_adapter.py").exists()
    app = "examples.langgraph_refund.correct:APP"
    assert _harness("init", "--shape", "langgraph", "--app", app, cwd=tmp_path).returncode == 0
    probe = subprocess.run(
        [sys.executable, "-c", "import harness_adapter as m; a = m.Adapter(); print(a.name)"],
        cwd=tmp_path,
        env=subprocess_env({"PYTHONPATH": f"{tmp_path}:{ROOT}"}),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip() == "langgraph"


def test_the_scaffold_filled_with_a_naive_queue_finds_the_second_charge(tmp_path: Path) -> None:
    assert _harness("init", "--shape", "queue", cwd=tmp_path).returncode == 0
    # The user's queue: the example's, whose charge forgot its idempotency key.
    queue = (ROOT / "examples" / "lease_queue" / "jobs.py").read_text()
    naive = queue.replace('idempotency_key=job["id"], ', "")
    assert naive != queue
    (tmp_path / "myqueue.py").write_text(naive)
    _fill(tmp_path, FILLED, "myqueue")
    assert _harness("check-adapter", "harness_adapter:QueueAdapter", cwd=tmp_path).returncode == 0
    proc = _harness(
        "run", "--adapter", "harness_adapter:QueueAdapter", "--profile", "ci", "--seed", "0",
        "--report-dir", str(tmp_path / "report"), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert re.search(r"fail\s+exactly_once_effects", proc.stdout), proc.stdout
    assert "payments.charge" in proc.stdout


# -- issue 29's trial: a job of two effects, its safe variant an option ---------------

#: the outbox's calls, the safe variant read from the adapter's options
OUTBOX_CALLS = {
    "open_queue": "return outbox.Outbox(path)",
    "submit_job": "queue.put(job_id, tenant, kind, payload)",
    "list_jobs": "return queue.jobs()",
    "run_worker": 'outbox.work(queue, world, now, worker_id, keyed=options["safe"] == "1")',
}


def _outbox_project(root: Path, safe: str) -> Path:
    """A project with the scaffold filled in with the outbox: one job of two
    effects, the option ``safe`` (default ``safe``) switching its key on."""
    root.mkdir(parents=True, exist_ok=True)
    assert _harness("init", "--shape", "queue", cwd=root).returncode == 0
    shutil.copy(ENGINE / "outbox_runtime.py", root / "outbox.py")
    tables = {
        '    "charge": (("payments.charge",), {"customer_id": "c-1", "amount_cents": 500}),\n': (
            '    "checkout": (("payments.charge", "email.send"), {"customer_id": "c-1", '
            '"amount_cents": 500}),\n'
        ),
        'DELIVERY = {"payments.charge": "exactly_once"}': (
            'DELIVERY = {"payments.charge": "exactly_once", "email.send": "at_least_once"}'
        ),
        "OPTIONS: dict[str, str] = {}": f'OPTIONS: dict[str, str] = {{"safe": "{safe}"}}',
    }
    _fill(root, OUTBOX_CALLS, "outbox", tables)
    return root


def _search(root: Path, report: str, *opts: str) -> subprocess.CompletedProcess[str]:
    words = [w for o in opts for w in ("--adapter-opt", o)]
    return _harness(
        "run", "--adapter", SPEC, *words, "--profile", "dev", "--seed", "0",
        "--max-examples", "8", "--budget", "90", "--report-dir", report, cwd=root,
    )  # fmt: skip


def test_a_two_effect_job_and_its_safe_variant_need_no_edit_below_the_line(
    tmp_path: Path,
) -> None:
    # safe by default: a replay that dropped the recorded safe=0 would pass
    root = _outbox_project(tmp_path / "project", safe="1")

    # An option the adapter does not name is refused, naming the fix.
    proc = _harness("check-adapter", SPEC, "--adapter-opt", "saef=1", cwd=root)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "harness_adapter.OPTIONS names no option 'saef' (it has 'safe')" in proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr

    proc = _harness("check-adapter", SPEC, "--adapter-opt", "safe=0", cwd=root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    both = "payments.charge, email.send"
    assert f"effects: declared {both}; performed {both} (as declared)" in proc.stdout
    assert f"harness run --adapter {SPEC} --adapter-opt safe=0 --profile ci)" in proc.stdout

    # The naive variant: the job claimed again after the charge charges again.
    naive = _search(root, "naive", "safe=0")
    assert naive.returncode == 1, naive.stdout + naive.stderr
    assert re.search(r"fail\s+exactly_once_effects", naive.stdout), naive.stdout
    assert "kill_after_apply on call 1 of payments.charge" in naive.stdout, naive.stdout
    recorded = json.loads((root / "naive" / "report.json").read_text())["adapter"]
    assert recorded["options"] == recorded["description"] == {"safe": "0"}, recorded

    # The safe variant, chosen by the option: the repeated charge is absorbed.
    safe = _search(root, "safe", "safe=1")
    assert safe.returncode == 0, safe.stdout + safe.stderr
    report = json.loads((root / "safe" / "report.json").read_text())
    assert report["adapter"]["options"] == report["adapter"]["description"] == {"safe": "1"}
    verdicts = {p["name"]: p for p in report["properties"]}
    assert verdicts["exactly_once_effects"]["verdict"] == "pass"
    assert verdicts["exactly_once_effects"]["counts"]["absorbed_duplicates"] >= 1

    # The replay the run printed runs the variant it ran, as does the folder
    # replayed on trust (its recorded options); the other variant does not fail.
    (printed,) = re.findall(r"^replay: PYTHONPATH=\. harness (replay .*)$", naive.stdout, re.M)
    assert printed.endswith("--adapter-opt safe=0"), printed
    for words in (printed.split(), ["replay", "naive", "--trust-adapter"]):
        again = _harness(*words, cwd=root)
        assert again.returncode == 1, again.stdout + again.stderr
        assert "reproduced: exactly_once_effects" in again.stdout, again.stdout
    other = _harness("replay", "naive", "--adapter", SPEC, "--adapter-opt", "safe=1", cwd=root)
    assert other.returncode == 0, other.stdout + other.stderr
    assert "not reproduced" in other.stdout


# -- the generated workflow, run as written ---------------------------------------------

#: install steps are resolved, not run, as in tests/engine/test_ci_recipe.py
DRY_RUN = "pip install --dry-run --no-deps "


def _step(script: str, root: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # -x: what the step ran, one "+ command" line each, on stderr
    return subprocess.run(
        ["bash", "-xeo", "pipefail", "-c", script.replace("pip install ", DRY_RUN)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_workflow_runs_as_written_in_a_project_with_no_pyproject(tmp_path: Path) -> None:
    root = _outbox_project(tmp_path / "project", safe="1")
    workflow = yaml.safe_load((root / ".github/workflows/resilience.yml").read_text())
    job = workflow["jobs"]["harness"]
    env = subprocess_env({"HARNESS_MAX_EXAMPLES": "8", "HARNESS_SEED": "3"})
    env.pop("PYTHONPATH", None)
    env.update({k: v for k, v in job["env"].items() if "${{" not in v})
    env["HARNESS_EXAMPLE_DB"] = ""  # a fork's pull request: no secret
    # where this harness came from, if init could tell; else it asks
    assert env["HARNESS_PACKAGE"] == (_scaffold.harness_source() or "")
    env["HARNESS_PACKAGE"] = ""  # as written when it could not
    steps = {s["name"]: s["run"] for s in job["steps"] if "run" in s}
    (install,) = [run for name, run in steps.items() if name.startswith("install")]
    proc = _step(install, root, env)
    assert proc.returncode != 0
    assert "HARNESS_PACKAGE: set HARNESS_PACKAGE above: see docs/ci.md" in proc.stderr

    env["HARNESS_PACKAGE"] = str(ROOT)  # a vendored copy, as docs/ci.md allows
    for name, script in steps.items():
        proc = _step(script, root, env)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, f"step {name!r} failed:\n{out}"
        assert "Traceback" not in out, out
        if name.startswith("install"):
            ran = [ln for ln in proc.stderr.splitlines() if ln.startswith("+ pip")]
            assert ran == [f"+ {DRY_RUN}{ROOT}"], ran  # no pyproject: nothing more
        if name.startswith("search"):
            assert "verdict: PASS" in out, out
    assert (root / "harness-report" / "report.json").is_file()

    # Requirements, or a project of its own, are installed when there are.
    (root / "requirements.txt").write_text("# none yet\n")
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "myproject"\nversion = "0"\n'
        '[tool.setuptools]\npy-modules = ["outbox", "harness_adapter"]\n'
    )
    proc = _step(install, root, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ran = [ln for ln in proc.stderr.splitlines() if ln.startswith("+ pip")]
    assert ran[1:] == [f"+ {DRY_RUN}-r requirements.txt", f"+ {DRY_RUN}-e ."], ran


# -- where CI installs the harness from ------------------------------------------------


def test_a_harness_installed_from_git_is_installed_from_the_same_commit() -> None:
    record = {
        "url": "https://github.com/acme/stateful-agent-harness",
        "vcs_info": {"vcs": "git", "commit_id": "a" * 40, "requested_revision": "main"},
    }
    assert _scaffold._from_direct_url(json.dumps(record)) == (
        f"stateful-agent-harness @ git+https://github.com/acme/stateful-agent-harness@{'a' * 40}"
    )
    # a folder or a wheel on this machine is nowhere CI can reach
    ssh = {**record, "url": "ssh://git@github.com/acme/stateful-agent-harness"}
    assert _scaffold._from_direct_url(json.dumps(ssh)) == (
        f"stateful-agent-harness @ git+ssh://git@github.com/acme/stateful-agent-harness@{'a' * 40}"
    )
    assert _scaffold._from_direct_url('{"url": "file:///src/h", "dir_info": {}}') is None
    assert _scaffold._from_direct_url("not json") is None


@pytest.mark.parametrize(
    ("remote", "https"),
    [
        ("git@github.com:acme/harness.git", "https://github.com/acme/harness.git"),
        ("ssh://git@github.com/acme/harness.git", "https://github.com/acme/harness.git"),
        ("https://github.com/acme/harness", "https://github.com/acme/harness"),
        # a token in the remote stays on this machine
        ("https://me:ghp_secret@github.com/acme/harness", "https://github.com/acme/harness"),
        ("/srv/git/harness.git", None),
    ],
)
def test_a_harness_run_from_a_clone_is_installed_from_its_origin_over_https(
    tmp_path: Path, remote: str, https: str | None
) -> None:
    def git(*words: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", *words],
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout.strip()

    assert _scaffold._from_checkout(tmp_path) is None  # not a checkout
    git("init", "-q")
    git("commit", "-q", "--allow-empty", "-m", "x")
    assert _scaffold._from_checkout(tmp_path) is None  # no origin
    git("remote", "add", "origin", remote)
    commit = git("rev-parse", "HEAD")
    expected = None if https is None else f"stateful-agent-harness @ git+{https}@{commit}"
    assert _scaffold._from_checkout(tmp_path) == expected
    # and the workflow installs from it, quoted as YAML
    workflow = yaml.safe_load(_scaffold.workflow_for(SPEC, expected))
    assert workflow["jobs"]["harness"]["env"]["HARNESS_PACKAGE"] == (expected or "")
