"""A LangGraph support agent whose refund tool calls a payments HTTP API, tested as it is.

See README.md: ``naive.py`` and ``careful.py`` differ in one line (the
``Idempotency-Key`` header); the adapter points the app at the world's HTTP
face by environment variables and changes nothing in it.
"""
