"""The `gpupool` command line: Slurm-like verbs, SkyPilot-like tables, --json everywhere."""
