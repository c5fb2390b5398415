"""`gpupool shell` while its job waits, on a terminal: the status line is rewritten in place,
and a Ctrl-C neither clobbers it (the terminal echoes `^C` where the cursor is) nor prints
its answer over it (issue 30, item 22). The terminal is a small model of one: carriage
return, line feed, erase to the end of the line, and text that overwrites what is there."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from gpupool.cli import shell
from gpupool.core.job_enums import JobState


class Terminal:
    """What a VT100 shows after the text written to it (stderr on a tty)."""

    def __init__(self) -> None:
        self.lines: list[str] = [""]
        self.col = 0

    def isatty(self) -> bool:
        return True

    def flush(self) -> None:
        pass

    def write(self, text: str) -> int:
        i = 0
        while i < len(text):
            ch = text[i]
            if text.startswith("\x1b[K", i):
                self.lines[-1] = self.lines[-1][: self.col]
                i += 3
                continue
            if ch == "\r":
                self.col = 0
            elif ch == "\n":  # a tty's output turns \n into \r\n (onlcr)
                self.lines.append("")
                self.col = 0
            else:
                line = self.lines[-1].ljust(self.col)
                self.lines[-1] = line[: self.col] + ch + line[self.col + 1 :]
                self.col += 1
            i += 1
        return len(text)


def _job(state: JobState, reason: str = "Resources", why: str = "needs 2 GPUs, 0 free") -> object:
    return types.SimpleNamespace(id=7, state=state, reason=reason, why=why, node="vm", gpus=[])


class PendingThenCtrlC:
    """A pool where job 7 waits (`waits` answers, the last with a shorter reason), then the
    user presses Ctrl-C: the terminal echoes ^C, and the interrupt arrives."""

    def __init__(self, terminal: Terminal, waits: int) -> None:
        self.terminal = terminal
        self.waits = waits
        self.cancelled: list[int] = []

    def job(self, job_id: int) -> object:
        if self.waits == 0:
            self.terminal.write("^C")
            raise KeyboardInterrupt
        self.waits -= 1
        return _job(JobState.PENDING, why="needs 2 GPUs, 0 free" if self.waits else "-")

    def job_page(self, **_: object) -> object:
        return types.SimpleNamespace(jobs=[_job(JobState.PENDING)], total=1)

    def cancel(self, job_id: int) -> None:
        self.cancelled.append(job_id)


def _pending_then_ctrl_c(
    waits: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[int, PendingThenCtrlC, Terminal]:
    """`gpupool shell`'s session on a terminal: its exit code, the pool, the screen. (stderr
    is replaced here, in the test's own call: pytest sets it again between a fixture and
    the test.)"""
    terminal = Terminal()
    client = PendingThenCtrlC(terminal, waits)
    monkeypatch.setattr(shell, "POLL_S", 0.0)
    monkeypatch.setattr("sys.stderr", terminal)
    code = shell._session(client, 7, tmp_path / "env", tmp_path / "fifo", ["true"])  # type: ignore[arg-type]
    monkeypatch.undo()
    return code, client, terminal


def test_ctrl_c_while_pending_keeps_the_status_line_and_answers_below_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, client, terminal = _pending_then_ctrl_c(1, tmp_path, monkeypatch)
    assert code == 130 and client.cancelled == [7]
    status = "gpupool: queued: 1 of 1 waiting (Resources: -)"
    assert terminal.lines[0].startswith(status), terminal.lines
    assert terminal.lines[0] == status + "^C", terminal.lines  # the echo after it, not on it
    assert terminal.lines[1:] == ["gpupool: job 7 cancelled", ""]


def test_a_shorter_status_line_replaces_a_longer_one_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, _, terminal = _pending_then_ctrl_c(2, tmp_path, monkeypatch)
    # The second line ("-") is shorter than the first: nothing of the first is left over.
    assert terminal.lines == [
        "gpupool: queued: 1 of 1 waiting (Resources: -)^C",
        "gpupool: job 7 cancelled",
        "",
    ]


class PendingThenCancelled(PendingThenCtrlC):
    """Job 7 waits once, then someone else cancels it."""

    def job(self, job_id: int) -> object:
        if self.waits == 0:
            ended = _job(JobState.CANCELLED)
            ended.exit_code, ended.start_time = None, None  # type: ignore[attr-defined]
            return ended
        return super().job(job_id)


def test_a_job_ended_while_pending_is_said_below_the_status_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    terminal = Terminal()
    monkeypatch.setattr(shell, "POLL_S", 0.0)
    monkeypatch.setattr("sys.stderr", terminal)
    code = shell._session(
        PendingThenCancelled(terminal, 1),  # type: ignore[arg-type]
        7, tmp_path / "env", tmp_path / "fifo", ["true"],
    )  # fmt: skip
    monkeypatch.undo()
    assert code == 1
    assert terminal.lines == [
        "gpupool: queued: 1 of 1 waiting (Resources: -)",
        "gpupool: job 7 CANCELLED before it started",
        "",
    ]
