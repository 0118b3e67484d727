"""The front door: :func:`run` one search and get its :class:`Report`.

The CLI (``harness run``), the pytest plugin (``resilience_suite``) and your
own scripts all come through here::

    import harness

    report = harness.run("reference", profile="ci", seed=0, report_dir="reports/ci")
    print(report.verdict)   # "pass", "fail" or "unknown" (inconclusive)

A run probes what the adapter offers, checks its declarations against one
fault-free run, searches (targeted schedules, then sampled scenarios), shrinks
one counterexample per failing property, and writes every report format into
``report_dir``.
"""

from ._run import run, run_job
from ._session import ORACLES, PREPARED, Session

__all__ = ["ORACLES", "PREPARED", "Session", "run", "run_job"]
