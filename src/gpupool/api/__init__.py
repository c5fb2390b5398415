"""HTTP API (FastAPI) over a Unix socket and optionally TCP, and the daemon that serves it."""
