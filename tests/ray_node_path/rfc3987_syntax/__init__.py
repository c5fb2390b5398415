"""Not rfc3987-syntax: first on the PYTHONPATH of the tests' Ray nodes only (see
`LEAN_IMPORTS` in tests/ray_cluster.py), so that `import rfc3987_syntax` fails there.

Every Ray process (each worker, the dashboard agent) imports jsonschema, which imports
rfc3987-syntax when it is installed (it is here: jupyter-server's dependencies, a test
extra), and rfc3987-syntax builds an Earley parser for IRIs at import: 2 s of CPU on a quiet
development machine, 3.5 s beside the suite. jsonschema skips its IRI format check when the
import fails; Ray checks no IRI.
"""

raise ImportError("rfc3987_syntax is left out of the test Ray cluster's processes")
