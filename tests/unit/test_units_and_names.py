"""One convention for sizes and GPU names across the pool and `plan` (issue 30, item 17;
docs/jobs.md "Sizes and GPU names"): GB is 10^9 bytes and GiB 2^30, each read as written (a
bare K/M/G/T is binary, as Slurm's --mem); a GPU model has one spelling, printed by the
inventory, the pool's messages and `plan` alike, and every spelling of it is accepted."""

from __future__ import annotations

import pytest

from gpupool.core.gpu_catalog import CATALOG, display_name, lookup
from gpupool.core.units import parse_size
from gpupool.inventory.declared import parse_gpus_shorthand
from gpupool.plan.catalog import load_catalog, name_key
from gpupool.spec import build_spec

GIB = 1 << 30


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("100GB", 100 * 10**9),
        ("100GiB", 100 * GIB),
        ("100gb", 100 * 10**9),
        ("100 gib", 100 * GIB),
        ("512MB", 512 * 10**6),
        ("512MiB", 512 << 20),
        ("4KB", 4000),
        ("4KiB", 4096),
        ("1.5TB", 15 * 10**11),
        ("1.5TiB", int(1.5 * (1 << 40))),
        ("32G", 32 * GIB),  # Slurm's --mem=32G: binary
        ("512M", 512 << 20),
    ],
)
def test_gb_is_decimal_and_gib_binary_as_written(text: str, size: int) -> None:
    assert parse_size(text) == size


def test_gpu_memory_at_submit_reads_gb_as_plan_does() -> None:
    # `--gpu-memory 100GB` is the 100 GB `plan memory` prints, not 100 GiB (107.4 GB).
    assert build_spec({"command": ["true"], "gpu_memory": "100GB"}).resources.gpu_memory_bytes == (
        100 * 10**9
    )
    assert build_spec({"command": ["true"], "gpu_memory": "100GiB"}).resources.gpu_memory_bytes == (
        100 * GIB
    )


def test_a_size_in_a_model_name_is_the_vendors_label() -> None:
    # A name, not a size the user measures: an A100-80GB has 80 GiB, as NVML reports it.
    node = parse_gpus_shorthand("1xMYGPU-48GB", "n")
    assert node.gpus[0].memory_bytes == 48 * GIB
    node = parse_gpus_shorthand("1xA100-80GB", "n")
    assert node.gpus[0].memory_bytes == 80 * GIB


def test_every_gpu_both_catalogs_know_is_spelled_alike() -> None:
    plan = load_catalog(None)
    differing = {}
    for gpu in plan.gpus:
        entry = lookup(gpu.name)
        if entry is not None and name_key(entry.name) == name_key(gpu.name):
            if entry.name != gpu.name:
                differing[gpu.name] = entry.name
    assert differing == {}


@pytest.mark.parametrize(
    ("typed", "printed"),
    [
        ("RTX4090", "RTX 4090"),
        ("rtx 4090", "RTX 4090"),
        ("GeForce RTX 4090", "RTX 4090"),
        ("H100-PCIE", "H100-PCIe"),
        ("h100 pcie", "H100-PCIe"),
        ("GTX1080TI", "GTX 1080 Ti"),
        ("rtxa6000", "RTX A6000"),
    ],
)
def test_any_spelling_is_accepted_and_one_is_printed(typed: str, printed: str) -> None:
    node = parse_gpus_shorthand(f"2x{typed}", "n")
    assert {g.model for g in node.gpus} == {printed}
    assert display_name(typed) == printed
    assert load_catalog(None).gpu(typed).name == printed


def test_the_catalogs_names_are_their_own_lookups() -> None:
    for model in CATALOG:
        assert lookup(model.name) is model
