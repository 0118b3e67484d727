"""A refund as a Prefect flow, tested as it is (see ``workload.py`` and docs/findings.md)."""
