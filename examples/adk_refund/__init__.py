"""A refund agent on Google ADK, tested as it is (see ``workload.py`` and ``docs/findings.md``).

``naive.py`` (no idempotency key) and ``careful.py`` (a key from the session)
differ in the key only; ``raising.py`` shows ADK 1 (a tool that raised is not
retried by a resume), ``call_keyed.py`` ADK 2 (a kill between the answer and
``end_of_agent`` makes the resume ask the model again). The apps import
nothing from the harness; ``workload.py`` is the harness's side.
"""
