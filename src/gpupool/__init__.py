"""gpupool: a shared, scheduled pool of GPUs for an ML team."""

__version__ = "0.1.0"
