"""What GPUs the pool has: declared (shorthand or YAML file), discovered (NVML) or demo.

resolve_inventory picks one; the rest is public for the CLI, the API and tests.
"""

from gpupool.core.gpu_catalog import model_matches
from gpupool.inventory.declared import (
    InventoryError,
    demo_inventory,
    load_inventory_file,
    parse_gpus_shorthand,
)
from gpupool.inventory.nvml import DiscoveryError, discover_nvml
from gpupool.inventory.resolve import resolve_inventory
from gpupool.inventory.wire import inventory_from_dict, inventory_to_dict

__all__ = [
    "DiscoveryError",
    "InventoryError",
    "demo_inventory",
    "discover_nvml",
    "inventory_from_dict",
    "inventory_to_dict",
    "load_inventory_file",
    "model_matches",
    "parse_gpus_shorthand",
    "resolve_inventory",
]
