"""Leaf-spine and fat-tree sizing: how many switches and cables N endpoints need at radix k.

Two levels (leaf-spine, a folded Clos): every leaf has `down` ports to endpoints and `up` ports
to spines, down + up = k and down / up = the oversubscription ratio (1 = non-blocking).

    leaves = ceil(N / down)        spines = ceil(leaves x up / k)
    cables = N (endpoint cables) + leaves x up (leaf-spine links)

Each spine must reach every leaf, so at most k leaves: k x down endpoints, k^2/2 non-blocking.
Three levels (the k-ary fat tree of Al-Fares, Loukissas and Vahdat, "A Scalable, Commodity Data
Center Network Architecture", SIGCOMM 2008): pods of k/2 leaves and their aggregation switches
(k/2 ports down, k/2 up, so non-blocking above the leaves), tied together by core switches; at
most k pods, so k^2/2 leaves: k^3/4 endpoints non-blocking (radix 64: 2,048 in two levels,
65,536 in three).

A director switch (seed 000, Mellanox CS7520) is the two-level non-blocking network in one
chassis: leaf line cards (k/2 ports out, k/2 into the backplane) and spine cards, with backplane
traces instead of leaf-spine cables: 216 ports from 36-port chips = 12 line cards and
216 / 36 = 6 spines.

Rail-optimized (NVIDIA DGX SuperPOD reference architecture): NIC i of every 8-GPU server goes to
a leaf of rail i, so same-rank GPUs of all servers are one switch hop apart. Each rail needs
ceil(nodes / down) leaves of its own; the layers above are sized as for any leaves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpupool.plan.quantity import PlanError

MAX_LEVELS = 3


@dataclass(frozen=True)
class LeafPorts:
    """How a leaf's k ports split between endpoints (down) and the layer above (up)."""

    down: int
    up: int
    oversubscription: float  # down / up as built (never above the ratio asked for)


@dataclass(frozen=True)
class FabricPlan:
    endpoints: int
    radix: int
    levels: int
    requested_oversubscription: float
    oversubscription: float  # as built: leaf down / up ports (1.0 = non-blocking)
    non_blocking: bool
    leaf_down_ports: int
    leaf_up_ports: int
    leaves: int
    spines: int  # two levels only
    pods: int  # three levels only
    aggregation: int  # three levels only: the pods' own spines
    core: int  # three levels only
    switches: int
    endpoint_cables: int
    switch_cables: int  # leaf-spine (and aggregation-core) links
    cables: int
    max_endpoints: int  # what this many levels reaches at this radix and oversubscription
    rails: int  # 0 unless rail-optimized
    leaves_per_rail: int  # 0 unless rail-optimized


@dataclass(frozen=True)
class DirectorPlan:
    ports: int
    radix: int
    line_cards: int  # leaf cards: k/2 front-panel ports each
    spine_cards: int
    max_ports: int  # k^2/2: the largest non-blocking director of k-port chips
    internal_links: int  # backplane traces, not cables


def _check_radix(radix: int) -> None:
    if radix < 4 or radix % 2:
        raise PlanError(f"--radix must be an even number of switch ports >= 4, got {radix}")


def leaf_ports(radix: int, oversubscription: float = 1.0) -> LeafPorts:
    """Split k ports so that down / up <= the ratio: up = ceil(k / (1 + ratio)).

    Rounding the uplinks up keeps the fabric at or below the oversubscription asked for
    (k = 36 at 4:1 gives 28 down + 8 up = 3.5:1, not 29 + 7 = 4.1:1)."""
    _check_radix(radix)
    if not oversubscription >= 1:
        raise PlanError(
            f"--oversubscription must be >= 1 (1 = non-blocking, 2 = 2:1), got {oversubscription:g}"
        )
    up = min(radix - 1, math.ceil(radix / (1 + oversubscription) - 1e-9))
    down = radix - up
    return LeafPorts(down, up, down / up)


def max_leaves(radix: int, levels: int) -> int:
    """Leaves a network of this many levels can tie together: 1, k (a spine port per leaf),
    k x k/2 (k pods of k/2 leaves)."""
    _check_radix(radix)
    return {1: 1, 2: radix, 3: radix * radix // 2}[levels]


def max_endpoints(radix: int, levels: int, oversubscription: float = 1.0) -> int:
    """k for one switch; k x down for two levels (k^2/2 non-blocking); k^2/2 x down for three
    (k^3/4 non-blocking)."""
    if levels not in (1, 2, 3):
        raise PlanError(f"--levels must be 1, 2 or 3, got {levels}")
    if levels == 1:
        _check_radix(radix)
        return radix
    return max_leaves(radix, levels) * leaf_ports(radix, oversubscription).down


def _size(
    endpoints: int,
    leaves: int,
    radix: int,
    ports: LeafPorts,
    oversubscription: float,
    levels: int,
    capacity: int,
    rails: int = 0,
    leaves_per_rail: int = 0,
) -> FabricPlan:
    """Switches and cables above a given number of leaves."""
    spines = pods = aggregation = core = switch_cables = 0
    if levels == 1:  # one switch: every port faces an endpoint, nothing to oversubscribe
        ports = LeafPorts(radix, 0, 1.0)
    uplinks = leaves * ports.up
    if levels == 2:
        spines = math.ceil(uplinks / radix)
        switch_cables = uplinks
    elif levels == 3:
        half = radix // 2
        pods = math.ceil(leaves / half)
        full_pods, last_pod_leaves = divmod(leaves, half)
        # Aggregation switches take k/2 leaf links down and send as many up: non-blocking above
        # the leaves, so the only oversubscription is the one asked for at the leaf.
        aggregation = full_pods * ports.up + math.ceil(last_pod_leaves * ports.up / half)
        core = math.ceil(uplinks / radix)
        switch_cables = 2 * uplinks
    return FabricPlan(
        endpoints=endpoints,
        radix=radix,
        levels=levels,
        requested_oversubscription=oversubscription,
        oversubscription=ports.oversubscription,
        non_blocking=ports.oversubscription <= 1,
        leaf_down_ports=ports.down,
        leaf_up_ports=ports.up,
        leaves=leaves,
        spines=spines,
        pods=pods,
        aggregation=aggregation,
        core=core,
        switches=leaves + spines + aggregation + core,
        endpoint_cables=endpoints,
        switch_cables=switch_cables,
        cables=endpoints + switch_cables,
        max_endpoints=capacity,
        rails=rails,
        leaves_per_rail=leaves_per_rail,
    )


def _too_big(what: str, count: int, radix: int, oversubscription: float) -> PlanError:
    limit = max_endpoints(radix, MAX_LEVELS, oversubscription)
    return PlanError(
        f"{what}: {count:,} exceed what three levels of radix-{radix} switches reach "
        f"({limit:,} endpoints at {oversubscription:g}:1); use a larger --radix"
    )


def plan_fabric(
    endpoints: int, radix: int, oversubscription: float = 1.0, levels: int | None = None
) -> FabricPlan:
    """The smallest network (1, 2 or 3 levels, or exactly `levels`) for `endpoints` ports."""
    if endpoints < 1:
        raise PlanError(f"--endpoints must be at least 1, got {endpoints}")
    ports = leaf_ports(radix, oversubscription)
    choices = (levels,) if levels is not None else (1, 2, 3)
    for n in choices:
        capacity = max_endpoints(radix, n, oversubscription)
        if endpoints <= capacity:
            leaves = 1 if n == 1 else math.ceil(endpoints / ports.down)
            return _size(endpoints, leaves, radix, ports, oversubscription, n, capacity)
    if levels is not None:
        capacity = max_endpoints(radix, levels, oversubscription)
        raise PlanError(
            f"--levels {levels}: radix-{radix} switches at {oversubscription:g}:1 reach "
            f"{capacity:,} endpoints, fewer than {endpoints:,}"
        )
    raise _too_big("--endpoints", endpoints, radix, oversubscription)


def plan_rail_fabric(
    nodes: int,
    rails: int,
    radix: int,
    oversubscription: float = 1.0,
    levels: int | None = None,
) -> FabricPlan:
    """Rail-optimized: each of a server's `rails` NICs goes to a leaf of its own rail, so
    every rail needs ceil(nodes / down) leaves; spines (or pods and cores) join the rails."""
    if nodes < 1:
        raise PlanError(f"--nodes must be at least 1, got {nodes}")
    if rails < 1:
        raise PlanError(f"--nics must be at least 1, got {rails}")
    ports = leaf_ports(radix, oversubscription)
    per_rail = math.ceil(nodes / ports.down)
    leaves = rails * per_rail
    # Rails meet only above the leaves, so even one leaf per rail needs a spine layer.
    choices = (levels,) if levels is not None else (2, 3)
    if levels == 1:
        raise PlanError("--levels 1: a rail-optimized network needs spines to join the rails")
    for n in choices:
        if leaves <= max_leaves(radix, n):
            capacity = max_leaves(radix, n) // rails * ports.down * rails
            return _size(
                nodes * rails, leaves, radix, ports, oversubscription, n, capacity, rails, per_rail
            )
    if levels is not None:
        raise PlanError(
            f"--levels {levels}: {leaves:,} rail leaves exceed the {max_leaves(radix, levels):,} "
            f"that {levels} levels of radix-{radix} switches can join"
        )
    raise _too_big("--nodes x --nics", nodes * rails, radix, oversubscription)


def plan_director(ports: int, radix: int) -> DirectorPlan:
    """A non-blocking director chassis of k-port chips: ceil(P / (k/2)) line cards, each with
    k/2 ports out and k/2 into the backplane, and P / k spine cards (CS7520: 216 / 36 = 6)."""
    _check_radix(radix)
    limit = radix * radix // 2
    if not 1 <= ports <= limit:
        raise PlanError(
            f"--endpoints: a director of {radix}-port chips has 1 to {limit:,} ports, got {ports:,}"
        )
    line_cards = math.ceil(ports / (radix // 2))
    internal = line_cards * (radix // 2)
    return DirectorPlan(ports, radix, line_cards, math.ceil(internal / radix), limit, internal)


def endpoint_sweep(radix: int, oversubscription: float = 1.0, points: int = 120) -> list[int]:
    """Endpoint counts from 2 to the three-level limit, evenly spaced on a log scale, with the
    one- and two-level limits themselves (for plotting switches and cables against N)."""
    top = max_endpoints(radix, 3, oversubscription)
    ratio = (top / 2) ** (1 / (points - 1))
    counts = {round(2 * ratio**i) for i in range(points)}
    counts |= {radix, max_endpoints(radix, 2, oversubscription), top}
    return sorted(c for c in counts if 1 <= c <= top)
