"""A SQLite job queue with leases, and its adapter (``docs/adapters.md``, "Leases and timers")."""
