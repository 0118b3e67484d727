"""Jepsen-style chaos verification for durable AI-agent runtimes."""
