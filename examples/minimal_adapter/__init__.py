"""The minimal adapter of ``docs/adapters.md``: a toy runtime, behind the contract."""
