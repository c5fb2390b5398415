"""`separate_stderr` (--separate-stderr): a flag of the spec in both forms, refused with a
gang (each rank's log holds both streams), sent on the wire only when set."""

from __future__ import annotations

import pytest

from gpupool.spec import SpecError, build_spec, spec_from_wire, spec_to_wire


def test_it_is_false_unless_asked_and_travels_on_the_wire_when_set() -> None:
    plain = build_spec({"command": "x"})
    assert plain.separate_stderr is False
    assert "separate_stderr" not in spec_to_wire(plain)
    apart = build_spec({"command": "x", "separate_stderr": True})
    wire = spec_to_wire(apart)
    assert wire["separate_stderr"] is True
    assert spec_from_wire(wire).separate_stderr is True


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"separate_stderr": "yes"}, "separate_stderr: must be true or false, got 'yes'"),
        (
            {"separate_stderr": True, "distributed": "torchrun", "gpus": 2},
            "separate_stderr: cannot be combined with distributed: each rank's log holds both",
        ),
    ],
)
def test_bad_values_are_refused_by_name(fields: dict[str, object], message: str) -> None:
    with pytest.raises(SpecError) as e:
        build_spec({"command": "x", **fields})
    assert message in str(e.value)
