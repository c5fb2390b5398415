"""A Slurm command runner that gives one recorded answer to every command, or none (as a
slurmctld that does not answer): for what a Slurm here cannot say (a GPU's measured use)
or for the cases a real cluster does not give on demand (a refused read)."""

from __future__ import annotations

from collections.abc import Sequence

from gpupool.backends.slurm.runner import CommandResult, CommandRunner, SlurmUnreachable


class AnsweringRunner(CommandRunner):
    """Every command answered with `answer` (None: no answer in time); `calls` keeps each
    argv run, as the real runner's does."""

    def __init__(self, answer: CommandResult | None, program: str = "sinfo") -> None:
        super().__init__(timeout_s=5.0)
        self.answer = answer
        self.program = program

    def run(
        self, argv: Sequence[str], env: object = None, timeout_s: float | None = None
    ) -> CommandResult:
        self.calls.append(tuple(argv))
        if self.answer is None:
            raise SlurmUnreachable(f"{self.program} gave no answer in 5 s")
        return self.answer
