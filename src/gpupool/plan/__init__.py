"""The infrastructure playbook as arithmetic: cost, power, network, scaling, memory, training
time, and the hardware catalog they read (docs/plan.md).

Every module here is a set of pure functions over plain numbers, returning frozen dataclasses;
the CLI (cli/plan*.py) resolves names through the catalog, parses units and draws tables and
plots. Units are decimal SI throughout (1 GB = 1e9 bytes, 1 GB/s = 1e9 bytes/s), as vendors
quote bandwidth and as the seed playbooks compute memory, unlike core.units' binary sizes.
"""
