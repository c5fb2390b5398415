"""Hardware benchmarks (`gpupool bench`, issue 17; docs/hwbench.md): measured on the team's own
machines, alone or as pool jobs, saved as JSON and in the store, compared with the catalog.

Each benchmark is one module here (registry.py names them) offering:
- `add_arguments(parser: argparse.ArgumentParser) -> None`: its own options (sizes, dtypes,
  `--device cpu|cuda`, `--tiny` for CI's CPU runs);
- `run(args: argparse.Namespace, progress: Progress) -> BenchResult`: runs it, ticking
  `progress`, and returns the result as data (result.py). torch is imported inside `run`
  (the `dist` extra), so the CLI and the pool never import it to list or compare results.
  A module that runs without torch says `NEEDS_TORCH = False` (storage): `bench NAME --gpus
  N` refuses the others before queueing them where torch cannot be imported.
"""
