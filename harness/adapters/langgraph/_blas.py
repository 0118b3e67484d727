"""Preloaded first by the fork server of an app with a long-term store.

``langgraph.store.sqlite`` imports ``sqlite_vec``, which imports numpy, whose
OpenBLAS starts a thread pool at import: a fork server with a thread left in
it is unsafe to fork from (it refuses such a preload). The workers do no
linear algebra, so the pool is capped at one thread -- none started -- in the
fork server, before anything imports numpy. It changes the fork server's
environment (and its workers') only, never the harness's.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"
