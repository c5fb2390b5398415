"""How a torch.distributed rank process ends: without the interpreter's finalization.

During finalization a thread of torch's (gloo's work threads hold tensors with Python
references) may try to take the GIL; the interpreter then ends that thread by a forced unwind
through C++ code, which is std::terminate: SIGABRT, after the rank printed every result and
destroyed its process group. Seen under CPU load in about 1 run in 30 of the DDP sweep's
spawned ranks (the core: the main thread in Py_FinalizeEx, the dying thread in
__pthread_unwind -> std::terminate). A forked multiprocessing child ends with os._exit too.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable
from typing import NoReturn


def exit_without_finalizing(main: Callable[[], int | None]) -> NoReturn:
    """Run `main`, flush stdout and stderr, and end the process with its code (None: 0); an
    exception is printed as Python would and ends it with 1 (SystemExit keeps its code)."""
    try:
        code = main() or 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, int | None):
            print(e.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 (told on stderr; the caller reads the exit code)
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
