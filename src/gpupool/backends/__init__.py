"""Backends: the executor contract implemented for Slurm, Ray and Kubernetes (core/backends.py).

One folder per engine with the same file set: `settings.py` (its `[backends.NAME]` table,
checked), `render.py` (pure: a LaunchRequest into what the engine takes: an sbatch script, a
Ray entrypoint, a Kubernetes manifest), `backend.py` (the Backend: launch, poll many runs in
one call, signal, logs), `__init__.py` (`open_backend`). `base.py` has what all three share,
`registry.py` finds a kind's `open_backend`.
"""
