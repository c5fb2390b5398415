"""`gpupool server` with the test backend (subprocess_backend.py) standing in for the slurm
kind: the registry is pointed at it in this process only, then the real daemon runs."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from gpupool.backends import registry  # noqa: E402
from gpupool.core.backends import BackendKind  # noqa: E402

registry._PACKAGES[BackendKind.SLURM] = "subprocess_backend"

if __name__ == "__main__":
    from gpupool.cli.main import main

    sys.exit(main(sys.argv[1:]))
