"""The pool's use cases, as the HTTP API and in-process callers use them: submit (group
commit, batches, arrays, backend choice), steering, queries, accounting, the gpupool.toml
apply. They drive the engine through its seam (post events, read the view, wake) and the
store through Protocols (engine/contracts.py); they know nothing of HTTP."""

from gpupool.service.pool_service import PoolService
from gpupool.service.refusal import RequestRefused

__all__ = ["PoolService", "RequestRefused"]
