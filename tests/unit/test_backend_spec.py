"""`backend` and `nodes` in both forms of the spec: errors name the field."""

from __future__ import annotations

import pytest

from gpupool.spec import SpecError, build_spec, spec_from_wire, spec_to_wire


def test_backend_and_nodes_go_over_the_wire_only_when_set() -> None:
    plain = build_spec({"command": "x"})
    assert (plain.backend, plain.nodes) == (None, 1)
    assert "backend" not in spec_to_wire(plain) and "nodes" not in spec_to_wire(plain)
    gang = build_spec({"command": "x", "backend": "hpc", "nodes": 4, "gpus": 8})
    wire = spec_to_wire(gang)
    assert (wire["backend"], wire["nodes"]) == ("hpc", 4)
    assert spec_from_wire(wire) == gang


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"nodes": 0}, "nodes: "),
        ({"nodes": "two"}, "nodes: "),
        ({"backend": "Slurm!"}, "backend: must be `local` or a backend's name"),
        ({"backend": 3}, "backend: must be `local` or a backend's name"),
        ({"nodes": 2, "gpus": 0.5}, "nodes: cannot be combined with a share of one GPU"),
    ],
)
def test_errors_name_the_field(data: dict[str, object], error: str) -> None:
    with pytest.raises(SpecError) as caught:
        build_spec({"command": "x", **data})
    assert error in str(caught.value)
