"""Trace-replay simulator: a job trace through the daemon's own `policy.decide`, on a fake
clock (docs/simulator.md)."""
