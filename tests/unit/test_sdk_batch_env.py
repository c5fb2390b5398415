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
