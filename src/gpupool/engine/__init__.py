"""The loop that ties the layers together: events -> snapshot -> policy.decide -> store -> executor."""

from gpupool.engine.loop import Engine
from gpupool.engine.refusal import RequestRefused
from gpupool.engine.service import PoolService

__all__ = ["Engine", "PoolService", "RequestRefused"]
