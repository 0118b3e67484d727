"""The harness's pytest plugin (entry point ``pytest11``).

Kept thin, like Hypothesis's: it only wires pytest to the engine. Options and
the ready-made resilience suite arrive with the engine; until then it registers
nothing, so installing the package never changes a user's test run.
"""

from __future__ import annotations
