"""``harness init``: the scaffold for a user's runtime, as a new user meets it.

The queue shape is filled in with a naive job queue (examples/lease_queue's
``jobs.py``, copied into the project as the user's own module, its charge
without an idempotency key): only the four marked calls are written,
nothing else of the generated adapter is touched, and the search finds the
second charge."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml
from engine_support import subprocess_env

ROOT = Path(__file__).resolve().parents[2]
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


def test_init_writes_three_files_and_never_over_one(tmp_path: Path) -> None:
    proc = _harness("init", "--shape", "queue", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
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


def test_the_scaffolded_workflow_is_the_documented_one(tmp_path: Path) -> None:
    # tests/engine/test_ci_recipe.py runs the documented job step by step.
    assert _harness("init", "--shape", "queue", cwd=tmp_path).returncode == 0
    doc = (ROOT / "docs" / "ci.md").read_text().split("## Your own adapter, one job", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", doc, re.S)
    assert block is not None
    spec = "harness_adapter:QueueAdapter"
    documented = block.group(1).replace("myproject.adapter:MyAdapter", spec)
    written = (tmp_path / ".github/workflows/resilience.yml").read_text()
    assert yaml.safe_load(written) == yaml.safe_load(documented)


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
    path = tmp_path / "harness_adapter.py"
    future = "from __future__ import annotations\n"
    text = path.read_text().replace(future, future + "import myqueue\n", 1)
    for name, body in FILLED.items():
        text, n = re.subn(
            rf'(def {name}\(.*?""".*?"""\n)    raise NotImplementedError\([^\n]*\)\n',
            rf"\g<1>    {body}\n",
            text,
            count=1,
            flags=re.S,
        )
        assert n == 1, name
    path.write_text(text)
    assert _harness("check-adapter", "harness_adapter:QueueAdapter", cwd=tmp_path).returncode == 0
    proc = _harness(
        "run", "--adapter", "harness_adapter:QueueAdapter", "--profile", "ci", "--seed", "0",
        "--report-dir", str(tmp_path / "report"), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert re.search(r"fail\s+exactly_once_effects", proc.stdout), proc.stdout
    assert "payments.charge" in proc.stdout
