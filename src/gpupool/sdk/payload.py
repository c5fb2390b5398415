"""The two files of a function job: the call (written here, read by the runner in the job)
and its outcome (written by the runner, read here).

The call travels with cloudpickle: the function by value when it is defined in `__main__`
or cannot be found by name (a lambda, a closure, a decorated function), by reference (module
and name) otherwise; its arguments with it. A function's code goes by value as `marshal`
writes it (as a .pyc holds it), not as cloudpickle writes it (which renames its file
`<dynamic-code>`): a traceback in the job names the file and line the function was written
at, and shows the line where that file can be read. Both sides must run the same Python (major.minor,
checked) and be able to import the same modules: the call carries this process's `sys.path`,
which the runner puts in front of its own. See docs/sdk.md.

Files: the call is written once, `0600`, in a `0700` directory of the submitter's own
(sdk/functions.py); the outcome is written to a temporary name and renamed, so a job killed
while writing leaves no half outcome. Each file is a stdlib pickle of a small dict of
plain values (the envelope), whose payloads are cloudpickle bytes: an envelope can always be
read, even when what it carries cannot be rebuilt here.

Unpickling runs code: these files are trusted because only their owner (the submitter, as
whom the job runs) and root can write into their directory.
"""

from __future__ import annotations

import functools
import io
import marshal
import os
import pickle
import sys
import traceback
import types
from collections import ChainMap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

FORMAT = 1
CALL_FILE = "call.pkl"
OUTCOME_FILE = "outcome.pkl"


def task_call_file(index: int) -> str:
    """The call file of task `index` of a mapped call (Client.map: one array job)."""
    return f"call-{index}.pkl"


def task_outcome_file(index: int) -> str:
    return f"outcome-{index}.pkl"


class PayloadError(RuntimeError):
    """A call or outcome file that cannot be used (another format, another Python, a
    function that cannot be loaded): the message says which and why."""


@dataclass(frozen=True)
class Call:
    fn: Callable[..., object]
    args: tuple[object, ...]
    kwargs: Mapping[str, object]


@dataclass(frozen=True)
class Returned:
    """The function returned `value`."""

    value: object


@dataclass(frozen=True)
class Raised:
    """The function raised: its type (qualified name), message and traceback as text, and
    the exception itself when it could be pickled (`exception`, cloudpickle bytes)."""

    type_name: str
    message: str
    traceback: str
    exception: bytes | None


Outcome = Returned | Raised


def dumps(value: object) -> bytes:
    """cloudpickle's pickle of `value`, code objects kept whole (module docstring; cloudpickle
    is imported here: only function jobs need it). It loads with the standard pickle."""
    with io.BytesIO() as buffer:
        _pickler()(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
        return buffer.getvalue()


def _code_with_its_file(code: types.CodeType) -> tuple[Callable[[bytes], object], tuple[bytes]]:
    """Reduce a code object to `marshal.loads(marshal.dumps(code))`: its file name, line
    numbers and nested code as compiled. marshal's format is fixed within a Python minor
    version, the one both sides must run (read_call checks it)."""
    return marshal.loads, (marshal.dumps(code),)


@functools.cache
def _pickler() -> type[pickle.Pickler]:
    """cloudpickle's Pickler with code objects reduced by `_code_with_its_file`."""
    import cloudpickle

    class CodeKeepingPickler(cloudpickle.Pickler):  # type: ignore[misc]
        dispatch_table = ChainMap(
            {types.CodeType: _code_with_its_file}, cloudpickle.Pickler.dispatch_table
        )

    return CodeKeepingPickler


def _python() -> list[int]:
    return list(sys.version_info[:2])


def _write(path: Path, envelope: Mapping[str, object]) -> None:
    """Write `envelope` to `path` as its owner only can read it, by rename (all or nothing)."""
    data = pickle.dumps(dict(envelope), protocol=pickle.HIGHEST_PROTOCOL)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _read(path: Path, what: str) -> dict[str, object]:
    with open(path, "rb") as f:
        envelope = pickle.load(f)
    if not isinstance(envelope, dict) or envelope.get("format") != FORMAT:
        raise PayloadError(f"{path} is not a gpupool {what} file of format {FORMAT}")
    return envelope


def write_call(
    path: Path,
    fn: Callable[..., object],
    args: Sequence[object],
    kwargs: Mapping[str, object],
    sys_path: Sequence[str] | None = None,
) -> None:
    """Pickle the call `fn(*args, **kwargs)` to `path`. Raises what cloudpickle raises for
    what it cannot pickle (an open file, a lock, a socket) before anything is submitted."""
    payload = dumps((fn, tuple(args), dict(kwargs)))
    envelope = {
        "format": FORMAT,
        "python": _python(),
        "sys_path": list(sys.path if sys_path is None else sys_path),
        "call": payload,
    }
    _write(path, envelope)


def read_call(path: Path) -> Call:
    """The call in `path`, with its `sys_path` put in front of this process's first (so
    modules the submitter imported by reference are found). PayloadError when it cannot be
    loaded, saying why."""
    envelope = _read(path, "call")
    python = envelope.get("python")
    if python != _python():
        raise PayloadError(
            f"the function was pickled by Python {_dotted(python)} and this job runs "
            f"Python {_dotted(_python())} ({sys.executable}): both sides must run the same "
            "Python version"
        )
    extra = envelope.get("sys_path")
    if isinstance(extra, list):
        sys.path[:0] = [p for p in extra if isinstance(p, str) and p not in sys.path]
    data = envelope.get("call")
    if not isinstance(data, bytes):
        raise PayloadError(f"{path} holds no call")
    try:
        fn, args, kwargs = pickle.loads(data)
    except Exception as exc:
        raise PayloadError(
            f"cannot load the function in this job: {type(exc).__name__}: {exc} (it must be "
            "importable here as where it was submitted: same packages, same working "
            "directory)"
        ) from exc
    return Call(fn, tuple(args), dict(kwargs))


def _dotted(python: object) -> str:
    return ".".join(map(str, python)) if isinstance(python, list) else repr(python)


def run_call(call: Call) -> Outcome:
    """Run the call: Returned, or Raised with the exception's traceback (the runner's own
    frame left out)."""
    try:
        return Returned(call.fn(*call.args, **call.kwargs))
    except BaseException as exc:  # noqa: BLE001 - SystemExit and KeyboardInterrupt travel too
        return raised(exc, skip_frames=1)


def raised(exc: BaseException, skip_frames: int = 0) -> Raised:
    """`exc` as a Raised outcome (its own pickle, when it pickles)."""
    tb = exc.__traceback__
    for _ in range(skip_frames):
        tb = tb.tb_next if tb is not None else None
    text = "".join(traceback.format_exception(type(exc), exc, tb))
    pickled: bytes | None
    try:
        pickled = dumps(exc)
        pickle.loads(pickled)  # one that does not load back would fail on the other side too
    except Exception:
        pickled = None
    kind = type(exc)
    name = kind.__qualname__
    if kind.__module__ != "builtins":
        name = f"{kind.__module__}.{name}"
    return Raised(name, str(exc), text, pickled)


def write_outcome(path: Path, outcome: Outcome) -> None:
    """Write the outcome; a return value that cannot be pickled is written as the
    exception that says so, raised in the job."""
    if isinstance(outcome, Returned):
        try:
            value = dumps(outcome.value)
        except Exception as exc:
            problem = pickle.PicklingError(
                f"the function returned a {type(outcome.value).__name__}, which cannot be "
                f"pickled to send back: {type(exc).__name__}: {exc}"
            )
            outcome = raised(problem)
        else:
            _write(path, {"format": FORMAT, "returned": value})
            return
    _write(
        path,
        {
            "format": FORMAT,
            "type": outcome.type_name,
            "message": outcome.message,
            "traceback": outcome.traceback,
            "exception": outcome.exception,
        },
    )


def read_outcome(path: Path) -> Outcome | None:
    """The outcome in `path`; None when there is none (the job wrote no outcome)."""
    try:
        envelope = _read(path, "outcome")
    except FileNotFoundError:
        return None
    if "returned" in envelope:
        data = envelope["returned"]
        if not isinstance(data, bytes):
            raise PayloadError(f"{path}: the returned value is not pickled bytes")
        try:
            return Returned(pickle.loads(data))
        except Exception as exc:
            raise PayloadError(
                f"the function returned a value that cannot be rebuilt here: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
    exception = envelope.get("exception")
    return Raised(
        type_name=str(envelope.get("type", "Exception")),
        message=str(envelope.get("message", "")),
        traceback=str(envelope.get("traceback", "")),
        exception=exception if isinstance(exception, bytes) else None,
    )
