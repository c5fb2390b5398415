"""Errors about a job's spec, reported all at once and pointing at the line that caused each.

Standard library only: the CLI formats these without paying for pydantic or yaml.
"""

from __future__ import annotations

from gpupool.core.values import FrozenValue


class FieldError(FrozenValue):
    """One problem with one field ("env.FOO" for an entry of env; "" for the whole source).
    A FrozenValue, not a frozen dataclass: `gpupool submit` imports it on every call
    (core/values.py says why)."""

    __slots__ = ("field", "message", "line")
    field: str
    message: str
    line: int | None  # 1-based line in the source file, when the value came from one

    def __init__(self, field: str, message: str, line: int | None = None) -> None:
        object.__setattr__(self, "field", field)
        object.__setattr__(self, "message", message)
        object.__setattr__(self, "line", line)


class SpecError(ValueError):
    """Every problem found in one spec; `source` is the file it came from, or None."""

    def __init__(self, errors: list[FieldError], source: str | None = None) -> None:
        # Passing both to ValueError keeps the exception picklable (pickle re-calls cls(*args)).
        super().__init__(errors, source)
        self.errors = list(errors)
        self.source = source

    def __str__(self) -> str:
        return "\n".join(self._format(e) for e in self.errors)

    def _format(self, e: FieldError) -> str:
        # The "file:line:" prefix (the form editors jump to) only goes on errors that point
        # at a line: a value given by a CLI flag, or a key missing from the file, has none,
        # and naming the file there would send the user to the wrong place.
        if e.line is not None:
            where = f"{self.source}:{e.line}: " if self.source else f"line {e.line}: "
        else:
            where = ""
        # An error about the whole source (unreadable file) already names it in its message.
        what = f"{e.field}: " if e.field else ""
        return f"{where}{what}{e.message}"


# Names people bring from Slurm, Docker or other schedulers that difflib would not match.
_ALIASES = {
    "environment": "env",
    "cwd": "workdir",
    "chdir": "workdir",
    "working_dir": "workdir",
    "job_name": "name",
    "cpus_per_task": "cpus",
    "gres": "gpus",
    "time_limit": "time",
    "timeout": "time",
    "start_at": "begin",
    "start_time": "begin",
    "not_before": "begin",
    "memory": "mem",  # host memory, as Slurm's --mem; GPU memory is gpu_memory
    "gpu_mem": "gpu_memory",
    "vram": "gpu_memory",
    "gpu_fraction": "gpus",
    "preemptable": "preemptible",
}


def unknown_key_message(key: object, known: tuple[str, ...]) -> str:
    """'unknown key, did you mean "gpus"?' for "gpu", or the list of known keys."""
    import difflib  # only on the error path

    text = str(key)
    guess = _ALIASES.get(text.lower().replace("-", "_"))
    if guess is None or guess not in known:
        close = difflib.get_close_matches(text.lower().replace("-", "_"), known, n=1, cutoff=0.6)
        guess = close[0] if close else None
    if guess is not None:
        return f'unknown key, did you mean "{guess}"?'
    return "unknown key (known keys: " + ", ".join(known) + ")"
