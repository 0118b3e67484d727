"""Example applications and adapters (importable from the repository root)."""
