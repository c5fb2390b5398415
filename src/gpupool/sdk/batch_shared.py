"""What every job of a `submit_many` batch shares, sent once (issue 30, item 6).

A sweep's jobs differ in a few fields (a name, an argument, a variable) and share the rest:
1,000 jobs with the same 30-variable `env=` were 2 MiB, twice the daemon's body limit,
although `submit_many` promises 1,000 per call. So the batch carries `common`: each field
whose value is the same in every spec (taken out of each), and the variables of `env` that
every spec sets to the same value (taken out of each spec's `env`, which keeps its own).
The daemon puts them back before it reads a spec (api/batch.py, `with_common`): a field the
spec has wins, and its own variables go over the shared ones. The environment submitted
from has its own, older, field (`base_env`, sdk/client.py).

Chosen over splitting a batch into chunks: chunks would need the daemon to hold each until
the last came to keep a batch all-or-none, and the shared part is what makes a batch big.
A batch whose jobs still differ by more than the body limit is refused whole (413, with
its size), as before.
"""

from __future__ import annotations

from gpupool.client.wire_json import JsonObject, JsonValue

SENT_APART = frozenset({"base_env", "env"})  # base_env: its own field; env: by variable


def take_common(specs: list[JsonObject]) -> JsonObject | None:
    """What every spec shares, taken out of each (in place); None when they share nothing
    (or there is one spec: nothing to save)."""
    if len(specs) < 2:
        return None
    first, rest = specs[0], specs[1:]
    common: JsonObject = {
        key: value
        for key, value in first.items()
        if key not in SENT_APART and all(key in s and s[key] == value for s in rest)
    }
    env = _common_env(specs)
    if env:
        common["env"] = dict[str, JsonValue](env)
    if not common:
        return None
    for spec in specs:
        for key in common:
            if key != "env":
                del spec[key]
        own = spec.get("env")
        if env and isinstance(own, dict):
            spec["env"] = {k: v for k, v in own.items() if k not in env}
    return common


def _common_env(specs: list[JsonObject]) -> dict[str, str]:
    """The variables every spec's `env` sets to the same text."""
    envs = [s.get("env") for s in specs]
    if not all(isinstance(e, dict) for e in envs):
        return {}
    first = envs[0]
    assert isinstance(first, dict)
    return {
        k: v
        for k, v in first.items()
        if isinstance(v, str) and all(isinstance(e, dict) and e.get(k) == v for e in envs[1:])
    }
