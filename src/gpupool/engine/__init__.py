"""The scheduler's runtime: events -> snapshot -> policy.decide -> store -> executor.

Its one seam outward is `Engine`: post events, read the view, wake (docs/ARCHITECTURE.md).
"""

from gpupool.engine.loop import Engine

__all__ = ["Engine"]
