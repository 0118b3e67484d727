"""Adapters: the only way the harness touches a runtime."""
