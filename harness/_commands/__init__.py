"""What ``harness run``, ``replay``, ``report``, ``merge`` and
``check-adapter`` do, apart from parsing: one module a command (``_run``,
``_replay``, ``_reports`` for report and merge, ``_check``), and how they
speak (``_output``: lines, the summary, exit codes)."""

from __future__ import annotations

from ._check import check_adapter
from ._output import _summary as _summary
from ._output import exit_code
from ._replay import replay
from ._reports import merge, report
from ._run import _Progress as _Progress
from ._run import run

__all__ = ["check_adapter", "exit_code", "merge", "replay", "report", "run"]
