"""core: the job state machine, units, link kinds, nodes, GPU model matching, clocks."""

from __future__ import annotations

from itertools import pairwise, product

import pytest

from gpupool.core.clock import FakeClock
from gpupool.core.gpu_catalog import model_matches
from gpupool.core.hardware import Gpu, Inventory, Link, LinkKind, Node
from gpupool.core.job import (
    TERMINAL_STATES,
    TRANSITIONS,
    InvalidTransition,
    Job,
    JobSpec,
    JobState,
    check_transition,
    priority_name,
)
from gpupool.core.units import format_duration, format_size, parse_duration, parse_size

S = JobState
KiB, MiB, GiB, TiB = 1 << 10, 1 << 20, 1 << 30, 1 << 40

# --- state machine -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "edge", list(TRANSITIONS), ids=[f"{a.value}->{b.value}" for a, b in TRANSITIONS]
)
def test_every_listed_edge_is_allowed_and_has_a_meaning(edge: tuple[JobState, JobState]) -> None:
    meaning = check_transition(*edge)
    assert meaning == TRANSITIONS[edge]
    assert meaning.strip()


FORBIDDEN = [
    (S.PENDING, S.SUCCEEDED),  # never ran
    (S.PENDING, S.TIMEOUT),
    (S.PENDING, S.PREEMPTED),  # nothing to preempt
    (S.PENDING, S.PENDING),
    (S.RUNNING, S.RUNNING),
    (S.PREEMPTED, S.RUNNING),  # goes through PENDING
    (S.PREEMPTED, S.SUCCEEDED),
    (S.SUCCEEDED, S.RUNNING),
    (S.SUCCEEDED, S.PENDING),
    (S.FAILED, S.PENDING),  # a retry is a new job
    (S.CANCELLED, S.RUNNING),
    (S.TIMEOUT, S.PENDING),
    (S.CANCELLED, S.FAILED),
]


@pytest.mark.parametrize("edge", FORBIDDEN, ids=[f"{a.value}->{b.value}" for a, b in FORBIDDEN])
def test_forbidden_edges_raise_with_both_state_names(edge: tuple[JobState, JobState]) -> None:
    frm, to = edge
    assert edge not in TRANSITIONS
    with pytest.raises(InvalidTransition) as err:
        check_transition(frm, to)
    assert frm.value in str(err.value) and to.value in str(err.value)
    assert isinstance(err.value, ValueError)  # callers may catch ValueError


def test_every_unlisted_pair_raises() -> None:
    for frm, to in product(JobState, JobState):
        if (frm, to) in TRANSITIONS:
            continue
        with pytest.raises(InvalidTransition):
            check_transition(frm, to)


def test_terminal_states() -> None:
    assert TERMINAL_STATES == {S.SUCCEEDED, S.FAILED, S.CANCELLED, S.TIMEOUT}
    for state in JobState:
        assert state.terminal == (state in TERMINAL_STATES)
        assert state.active == (not state.terminal)
    assert not S.PREEMPTED.terminal  # requeued right after


def test_terminal_states_have_no_outgoing_edges() -> None:
    for frm, to in TRANSITIONS:
        assert not frm.terminal, f"terminal state {frm.value} has an edge to {to.value}"


def test_every_state_is_reachable_and_every_active_state_can_end() -> None:
    succ: dict[JobState, set[JobState]] = {s: set() for s in JobState}
    for frm, to in TRANSITIONS:
        succ[frm].add(to)

    def reachable(start: JobState) -> set[JobState]:
        seen, todo = {start}, [start]
        while todo:
            for nxt in succ[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    assert reachable(S.PENDING) == set(JobState)
    for state in JobState:
        if state.active:
            assert reachable(state) & TERMINAL_STATES, f"{state.value} can never end"
            # A live job can always be cancelled.
            assert S.CANCELLED in succ[state], state


def test_priority_names_and_job_name() -> None:
    assert [priority_name(v) for v in (100, 200, 300, 400, 250)] == [
        "low",
        "normal",
        "high",
        "interactive",
        "250",
    ]
    job = Job(1, JobSpec(command=("/usr/bin/python", "train.py")), "ann", S.PENDING, 0.0)
    assert job.name == "python"
    named = Job(2, JobSpec(command=("x",), name="sweep"), "ann", S.PENDING, 0.0)
    assert named.name == "sweep"


# --- units ---------------------------------------------------------------------------------

SIZES = [
    ("80GB", 80 * 10**9),  # GB decimal, GiB binary (issue 30, item 17)
    ("20GiB", 20 * GiB),
    ("512M", 512 * MiB),
    ("512mib", 512 * MiB),
    ("4k", 4 * KiB),
    ("1.5T", int(1.5 * TiB)),
    ("2TB", 2 * 10**12),
    (" 16 gb ", 16 * 10**9),
    ("100B", 100),
    ("1024", 1024),
    ("0", 0),
    (2048, 2048),
    (1500.0, 1500),
]


@pytest.mark.parametrize("text,expected", SIZES, ids=[repr(t) for t, _ in SIZES])
def test_parse_size(text: str | float, expected: int) -> None:
    assert parse_size(text) == expected


BAD_SIZES = ["", "GB", "abc", "-1GB", "10XB", "1.2.3G", "80 G B", -1, True]


@pytest.mark.parametrize("text", BAD_SIZES, ids=[repr(t) for t in BAD_SIZES])
def test_parse_size_rejects(text: str | float) -> None:
    with pytest.raises(ValueError):
        parse_size(text)


def test_parse_size_error_names_the_unit() -> None:
    with pytest.raises(ValueError, match="unknown size unit 'XB'"):
        parse_size("10XB")


FORMATTED_SIZES = [
    (0, "0B"),
    (512, "512B"),
    (KiB, "1KiB"),
    (1536, "1.5KiB"),
    (512 * MiB, "512MiB"),
    (80 * GiB, "80GiB"),
    (TiB, "1TiB"),
    (3 * TiB // 2, "1.5TiB"),
]


@pytest.mark.parametrize("n,expected", FORMATTED_SIZES, ids=[s for _, s in FORMATTED_SIZES])
def test_format_size_and_back(n: int, expected: str) -> None:
    assert format_size(n) == expected
    assert parse_size(expected) == n


DURATIONS = [
    # Slurm forms (sbatch --time); a bare number is minutes
    ("30", 30 * 60),
    ("1:30", 90),  # MM:SS
    ("01:00:00", 3600),  # HH:MM:SS
    ("1-12", 86400 + 12 * 3600),  # D-HH
    ("1-0:30", 86400 + 30 * 60),  # D-HH:MM
    ("2-03:04:05", 2 * 86400 + 3 * 3600 + 4 * 60 + 5),  # D-HH:MM:SS
    # human forms
    ("2h", 7200),
    ("1h30m", 5400),
    ("1m30s", 90),
    ("90s", 90),
    ("1d", 86400),
    ("1.5h", 5400),
    ("2H 5M", 7500),
    ("500ms", 0.5),
    ("1s500ms", 1.5),
    # numbers are minutes, as in Slurm
    (45, 45 * 60),
    (0.5, 30),
]


@pytest.mark.parametrize("text,expected", DURATIONS, ids=[repr(t) for t, _ in DURATIONS])
def test_parse_duration(text: str | float, expected: float) -> None:
    assert parse_duration(text) == pytest.approx(expected)


BAD_DURATIONS = [
    "",
    "abc",
    "h",
    "1x",
    "0",
    "0:00",
    "0s",
    "-5",
    "1-",
    "x-10",
    "1-ab",
    "1-2:3:4:5",
    "1:2:3:4",
    "1h-30m",
    0,
    -3,
    True,
]


@pytest.mark.parametrize("text", BAD_DURATIONS, ids=[repr(t) for t in BAD_DURATIONS])
def test_parse_duration_rejects(text: str | float) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_parse_duration_error_shows_examples() -> None:
    with pytest.raises(ValueError, match="examples"):
        parse_duration("soon")


FORMATTED_DURATIONS = [
    (None, "-"),
    (0, "0s"),
    (-5, "0s"),
    (42, "42s"),
    (59.6, "1m00s"),
    (200, "3m20s"),
    (7500, "2h05m"),
    (3600, "1h00m"),
    (93600, "1d2h"),
]


@pytest.mark.parametrize(
    "seconds,expected", FORMATTED_DURATIONS, ids=[s for _, s in FORMATTED_DURATIONS]
)
def test_format_duration(seconds: float | None, expected: str) -> None:
    assert format_duration(seconds) == expected


# --- hardware ------------------------------------------------------------------------------

LINK_ALIASES = [
    ("NV", LinkKind.NVLINK),
    ("nv", LinkKind.NVLINK),
    ("NV4", LinkKind.NVLINK),
    ("NV12", LinkKind.NVLINK),
    ("nvlink", LinkKind.NVLINK),
    ("NVSwitch", LinkKind.NVLINK),
    ("PIX", LinkKind.PIX),
    ("switch", LinkKind.PIX),
    ("pcie_switch", LinkKind.PIX),
    ("PXB", LinkKind.PXB),
    ("pcie_switches", LinkKind.PXB),
    ("PHB", LinkKind.PHB),
    ("hostbridge", LinkKind.PHB),
    ("host_bridge", LinkKind.PHB),
    ("NODE", LinkKind.NODE),
    ("numa", LinkKind.NODE),
    ("SYS", LinkKind.SYS),
    ("system", LinkKind.SYS),
    ("socket", LinkKind.SYS),
    ("  sys  ", LinkKind.SYS),
]


@pytest.mark.parametrize("text,kind", LINK_ALIASES, ids=[t.strip() for t, _ in LINK_ALIASES])
def test_link_kind_parse(text: str, kind: LinkKind) -> None:
    assert LinkKind.parse(text) is kind


@pytest.mark.parametrize("text", ["", "pcie", "NVX", "NV-4", "ethernet"])
def test_link_kind_parse_rejects_and_lists_the_kinds(text: str) -> None:
    with pytest.raises(ValueError, match="unknown link type") as err:
        LinkKind.parse(text)
    assert "nvlink" in str(err.value) and "sys" in str(err.value)


def test_link_kinds_are_ordered_best_first() -> None:
    order = [LinkKind.NVLINK, LinkKind.PIX, LinkKind.PXB, LinkKind.PHB, LinkKind.NODE, LinkKind.SYS]
    assert sorted(LinkKind) == order
    assert all(a < b for a, b in pairwise(order))


def _node() -> Node:
    gpus = tuple(Gpu(i, "A100-80GB", 80 * GiB) for i in range(4))
    links = (
        Link(0, 1, LinkKind.NVLINK, nvlinks=12),
        Link(0, 2, LinkKind.NVLINK, nvlinks=4),
        Link(1, 2, LinkKind.PIX),
        Link(2, 3, LinkKind.PHB),
    )
    return Node("gpu0", gpus, links, cpus=32)


def test_node_link_is_symmetric_and_undeclared_pairs_are_sys() -> None:
    n = _node()
    assert n.link(0, 1) is n.link(1, 0) is LinkKind.NVLINK
    assert n.link(1, 2) is n.link(2, 1) is LinkKind.PIX
    assert n.link(3, 2) is LinkKind.PHB
    assert n.link(0, 3) is n.link(3, 0) is LinkKind.SYS  # not declared


def test_node_nvlink_peers() -> None:
    n = _node()
    assert n.nvlink_peers(0) == (1, 2)
    assert n.nvlink_peers(1) == (0,)  # 1-2 is PIX, not NVLink
    assert n.nvlink_peers(2) == (0,)
    assert n.nvlink_peers(3) == ()


def test_node_gpu_lookup_and_equality() -> None:
    n = _node()
    assert n.gpu(3).index == 3
    with pytest.raises(KeyError, match="gpu0 has no GPU 7"):
        n.gpu(7)
    assert n == _node()  # the link index does not take part in equality


def test_inventory() -> None:
    inv = Inventory((_node(), Node("cpu0", ())), source="declared")
    assert inv.total_gpus == 4
    assert inv.node("cpu0").gpus == ()
    with pytest.raises(KeyError, match="nope"):
        inv.node("nope")


# --- GPU model matching ----------------------------------------------------------------------

MODEL_MATCHES = [
    # requested, model (as NVML or the inventory says), matches?
    ("A100", "NVIDIA A100-SXM4-80GB", True),
    ("A100", "A100-80GB", True),
    ("A100-80GB", "NVIDIA A100-SXM4-80GB", True),
    ("A100-80GB", "NVIDIA A100-SXM4-40GB", False),
    ("A100-80GB", "A100-SXM4-40GB", False),
    ("a100-80gb", "A100-80GB", True),
    ("A100 80gb", "A100-80GB", True),
    ("A100-SXM4", "NVIDIA A100-SXM4-80GB", True),
    ("A100-PCIE", "NVIDIA A100-SXM4-80GB", False),
    ("A100", "NVIDIA A10", False),
    ("A10", "NVIDIA A100-SXM4-80GB", False),
    ("H100", "A100-80GB", False),
    ("H100", "NVIDIA H100 80GB HBM3", True),
    ("H100-80GB", "NVIDIA H100 80GB HBM3", True),
    ("V100", "Tesla V100-SXM2-32GB", True),
    ("RTX4090", "NVIDIA GeForce RTX 4090", True),  # users type the family as one word
    ("rtx 4090", "NVIDIA GeForce RTX 4090", True),
    ("RTX-4090", "NVIDIA GeForce RTX 4090", True),
    ("RTX 4090", "RTX4090", True),  # and the inventory may declare it as one word
    ("RTX4090", "NVIDIA GeForce RTX 3090", False),
    ("RTX 4090", "NVIDIA GeForce RTX 3090", False),
    ("RTX4090", "NVIDIA GeForce RTX 4080", False),
    ("", "A100-80GB", False),
    ("A100", "", False),
]


@pytest.mark.parametrize(
    "requested,model,expected", MODEL_MATCHES, ids=[f"{r!r} vs {m!r}" for r, m, _ in MODEL_MATCHES]
)
def test_model_matches(requested: str, model: str, expected: bool) -> None:
    assert model_matches(requested, model) is expected


# --- clock ---------------------------------------------------------------------------------


def test_fake_clock_moves_only_forward_and_only_when_told() -> None:
    clock = FakeClock(100.0)
    assert clock.now() == clock.now() == 100.0
    clock.advance(5)
    assert clock.now() == 105.0
    clock.set(200.0)
    assert clock.now() == 200.0
    with pytest.raises(ValueError):
        clock.advance(-1)
    with pytest.raises(ValueError):
        clock.set(199.0)


def test_a_time_past_any_float_is_refused_by_field_not_a_crash() -> None:
    # Found by the build_wire hypothesis test: `time: 10**400` raised OverflowError.
    from gpupool.spec import SpecError, build_spec

    assert parse_duration(10**400) == float("inf")
    for huge in (10**400, "1" + "0" * 400):
        with pytest.raises(SpecError, match="time: must be a finite duration"):
            build_spec({"command": ["true"], "time": huge})
