"""The exit codes of ``harness``, a contract scripts rely on, and the text
that lists them in ``--help``."""

from __future__ import annotations

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INCONCLUSIVE = 0, 1, 2, 3
#: the reader of stdout went away (128 + SIGPIPE, as a shell reports it)
EXIT_BROKEN_PIPE = 141


EXIT_CODES = """\
exit codes:
  0    every property the adapter's capabilities allow was exercised and held
  1    a property failed (replay: the failure was reproduced)
  2    usage, configuration or adapter error (the message says how to fix it)
  3    inconclusive: something that should have been judged was not (the
       report says what)
  130  interrupted by SIGINT, 143 by SIGTERM (a partial report is kept)
  141  the reader of its output went away (harness list faults | head)"""
