"""Circuit and PDU capacity, how many servers of a given draw fit per PDU and per rack, plugs.

    single-phase   P = V x I
    three-phase    P = sqrt(3) x V x I           (V line-to-line: 3 x V/sqrt(3) x I)
    continuous     P x 0.8                      (NEC 210.19/210.20: a continuous load may use
                                                 80% of the breaker's rating)
    real power     kW = kVA x power factor

Seed 000 (Lambda, "Building a GPU cluster", APC AP8966 data sheet): sqrt(3) x 208 V x 60 A x 0.8
= 17.29 kVA, the PDU's 17,300 VA load capacity; its "regulatory derated input current" of 48 A is
60 A x 0.8. Single phase: 230 V x 32 A = 7.36 kVA, 5.89 kVA derated.

Servers per PDU are whole servers on one PDU: floor(PDU kW / server kW). Per rack without
redundancy: PDUs x that. With A+B redundant feeds each server's full load must fit on one PDU
(the other feed can fail), so a pair of PDUs carries only what one of them can: pairs x per PDU.

Plugs (seed 000's table, at 200-240 V after derating): IEC C13/C14 15 A, about 2.5 kW per cord;
C19/C20 20 A, about 3.2 kW. A server needs ceil(kW / cord kW) cords, twice that with N+N
redundant power supplies (half of them must carry the whole load).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

NEC_CONTINUOUS_DERATE = 0.8
DEFAULT_PDUS_PER_RACK = 2  # one A and one B feed
SWEEP_SERVER_KW = (0.5, 1.0, 2.0, 3.0, 5.0, 6.5, 10.2, 14.3)  # workstation .. DGX A100/H100/B200


@dataclass(frozen=True)
class Plug:
    name: str
    amps: float
    kw_per_cord: float  # seed 000: "Max power ~2.5kW" / "~3.2kW"


PLUGS = (Plug("C13/C14", 15.0, 2.5), Plug("C19/C20", 20.0, 3.2))


@dataclass(frozen=True)
class PlugOption:
    name: str
    kw_per_cord: float
    cords_per_server: int  # fewest cords that carry the load
    cords_per_server_redundant: int  # N+N: half the cords carry the whole load
    kw_per_cord_given_psus: float | None  # worst case with the server's own PSUs (N+N)
    fits_given_psus: bool | None  # None: PSU count not given


@dataclass(frozen=True)
class RackFit:
    server_kw: float
    servers_per_pdu: int
    servers_per_rack: int
    servers_per_rack_redundant: int


@dataclass(frozen=True)
class PowerPlan:
    volts: float
    amps: float
    phases: int
    derate: float
    power_factor: float
    kva: float  # before derating
    kva_derated: float
    kw_derated: float
    amps_derated: float
    pdus_per_rack: int
    rack_kw: float  # every PDU loaded
    rack_kw_redundant: float  # A+B: one PDU of each pair carries it all
    server_kw: float | None
    psus: int | None
    fit: RackFit | None  # for server_kw
    plugs: tuple[PlugOption, ...]
    sweep: tuple[RackFit, ...]


def circuit_kva(volts: float, amps: float, phases: int) -> float:
    """Apparent power before derating: V x I single-phase, sqrt(3) x V x I three-phase (kVA)."""
    if phases == 1:
        return volts * amps / 1000.0
    if phases == 3:
        return math.sqrt(3.0) * volts * amps / 1000.0
    raise ValueError(f"phases must be 1 or 3, got {phases}")


def rack_fit(pdu_kw: float, pdus_per_rack: int, server_kw: float) -> RackFit:
    """Whole servers per PDU and per rack, with and without A+B redundancy."""
    # The tiny slack keeps an exact fit (2 x 5 kW on a 10 kW PDU) from rounding down.
    per_pdu = math.floor(pdu_kw / server_kw + 1e-9)
    return RackFit(
        server_kw=server_kw,
        servers_per_pdu=per_pdu,
        servers_per_rack=per_pdu * pdus_per_rack,
        servers_per_rack_redundant=per_pdu * (pdus_per_rack // 2),
    )


def plug_options(server_kw: float | None, psus: int | None) -> tuple[PlugOption, ...]:
    """For each plug type: cords a server of `server_kw` needs, and whether its own PSUs fit."""
    out = []
    for plug in PLUGS:
        cords = math.ceil(server_kw / plug.kw_per_cord - 1e-9) if server_kw else 0
        per_cord = None
        if server_kw and psus:
            carrying = max(1, psus // 2)  # N+N: one side carries everything
            per_cord = server_kw / carrying
        out.append(
            PlugOption(
                name=plug.name,
                kw_per_cord=plug.kw_per_cord,
                cords_per_server=cords,
                cords_per_server_redundant=2 * cords,
                kw_per_cord_given_psus=per_cord,
                fits_given_psus=None if per_cord is None else per_cord <= plug.kw_per_cord + 1e-9,
            )
        )
    return tuple(out)


def power_plan(
    volts: float,
    amps: float,
    phases: int = 1,
    derate: float = NEC_CONTINUOUS_DERATE,
    power_factor: float = 1.0,
    pdus_per_rack: int = DEFAULT_PDUS_PER_RACK,
    server_kw: float | None = None,
    psus: int | None = None,
    sweep_kw: Sequence[float] = SWEEP_SERVER_KW,
) -> PowerPlan:
    """A circuit's capacity, servers per PDU and rack, and plug choices (module docstring)."""
    kva = circuit_kva(volts, amps, phases)
    kva_derated = kva * derate
    kw = kva_derated * power_factor
    points = sorted({*sweep_kw, *([server_kw] if server_kw else [])})
    return PowerPlan(
        volts=volts,
        amps=amps,
        phases=phases,
        derate=derate,
        power_factor=power_factor,
        kva=kva,
        kva_derated=kva_derated,
        kw_derated=kw,
        amps_derated=amps * derate,
        pdus_per_rack=pdus_per_rack,
        rack_kw=kw * pdus_per_rack,
        rack_kw_redundant=kw * (pdus_per_rack // 2),
        server_kw=server_kw,
        psus=psus,
        fit=rack_fit(kw, pdus_per_rack, server_kw) if server_kw else None,
        plugs=plug_options(server_kw, psus),
        sweep=tuple(rack_fit(kw, pdus_per_rack, s) for s in points),
    )
