"""`Client.submit_many` sends the environment its jobs share once (sdk/client.py,
`shared_base_env`): taken out of every spec only when it is the same in all."""

from __future__ import annotations

from gpupool.client.wire_json import JsonObject, JsonValue
from gpupool.sdk.client import shared_base_env


def spec(name: str, base_env: JsonValue) -> JsonObject:
    return {"command": ["true"], "name": name, "base_env": base_env}


def test_the_same_environment_travels_once() -> None:
    env = {"PATH": "/usr/bin", "HOME": "/root"}
    specs = [spec("a", dict(env)), spec("b", dict(env))]
    assert shared_base_env(specs) == env
    assert all("base_env" not in s for s in specs)


def test_different_environments_stay_with_their_specs() -> None:
    specs = [spec("a", {"PATH": "/usr/bin"}), spec("b", {"PATH": "/bin"})]
    assert shared_base_env(specs) is None
    assert [s["base_env"] for s in specs] == [{"PATH": "/usr/bin"}, {"PATH": "/bin"}]


def test_what_is_not_an_environment_is_left_for_the_daemon_to_refuse() -> None:
    specs = [spec("a", {"PATH": 3}), spec("b", {"PATH": 3})]
    assert shared_base_env(specs) is None and specs[0]["base_env"] == {"PATH": 3}
    assert shared_base_env([spec("a", None)]) is None


def test_what_every_job_shares_travels_once_and_comes_back_the_same() -> None:
    """sdk/batch_shared.py and the daemon's `with_common` (api/batch.py): taking the shared
    fields and variables out, then putting them back, gives every spec as it was."""
    import copy

    from gpupool.api.batch import with_common
    from gpupool.sdk.batch_shared import take_common

    env = {f"V{k}": "x" * 10 for k in range(30)}
    specs: list[JsonObject] = [
        {"command": ["run", str(k)], "gpus": 1, "time": "1h", "env": {**env, "K": str(k)}}
        for k in range(3)
    ]
    specs[2]["time"] = "2h"  # not shared: stays with each spec
    specs[1]["env"] = {**env, "V0": "mine"}  # V0 differs: not shared
    before = copy.deepcopy(specs)
    common = take_common(specs)
    assert common is not None
    assert common["gpus"] == 1 and "time" not in common and "command" not in common
    assert common["env"] == {k: v for k, v in env.items() if k != "V0"}
    assert all("gpus" not in s and "V1" not in s["env"] for s in specs)  # type: ignore[operator]
    assert [with_common(dict(s), common) for s in specs] == before


def test_nothing_shared_leaves_the_specs_as_they_are() -> None:
    from gpupool.sdk.batch_shared import take_common

    specs: list[JsonObject] = [{"command": ["a"]}, {"command": ["b"], "env": {"X": "1"}}]
    assert take_common([dict(specs[0])]) is None  # one spec: nothing to save
    assert take_common(specs) is None and specs[1] == {"command": ["b"], "env": {"X": "1"}}
