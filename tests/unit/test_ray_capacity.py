"""Why a Ray job waits (backends/ray/capacity.py): the entrypoint's resources against the
live nodes' totals, read from the state API's node list (issue 38)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gpupool.backends.ray.capacity import (
    NodeTotals,
    asks_of,
    entrypoint_asks,
    live_nodes,
    never_fits,
)

HEAD = NodeTotals("head", {"GPU": 4.0, "CPU": 4.0, "memory": 8 * 2**30})
WORKER = NodeTotals("w1", {"GPU": 2.0, "CPU": 16.0, "memory": 64 * 2**30})


def test_more_gpus_than_the_largest_node_names_both_figures() -> None:
    said = never_fits(entrypoint_asks(8, None, None, None), [HEAD, WORKER])
    assert said == (
        "asks for 8 GPUs; the largest of its 2 live nodes has 4: "
        "it cannot start on this Ray cluster"
    )


def test_what_some_node_holds_is_not_called_impossible() -> None:
    assert never_fits(entrypoint_asks(4, 4, None, None), [HEAD, WORKER]) is None
    assert never_fits(entrypoint_asks(2, 16, None, None), [HEAD, WORKER]) is None
    assert never_fits(entrypoint_asks(None, None, None, None), [HEAD]) is None


def test_resources_no_node_holds_together_are_named_together() -> None:
    said = never_fits(entrypoint_asks(4, 16, None, None), [HEAD, WORKER])
    assert said == (
        "no live Ray node has 16 CPUs and 4 GPUs together: it cannot start on this Ray cluster"
    )


def test_memory_and_custom_resources() -> None:
    said = never_fits(entrypoint_asks(None, None, 128 * 2**30, None), [HEAD, WORKER])
    assert said is not None and said.startswith("asks for 128 GiB of memory; the largest")
    said = never_fits(entrypoint_asks(None, None, None, {"TPU": 1}), [HEAD, WORKER])
    assert said is not None and said.startswith("asks for 1 TPU; none of its 2 live nodes")


def test_an_unknown_node_list_claims_nothing() -> None:
    assert never_fits(entrypoint_asks(99, None, None, None), []) is None


def test_only_alive_nodes_of_the_state_api_answer_count() -> None:
    answer = {
        "data": {
            "result": {
                "result": [
                    {"state": "ALIVE", "node_name": "a", "resources_total": {"GPU": 2.0}},
                    {"state": "DEAD", "node_name": "b", "resources_total": {"GPU": 8.0}},
                    {"state": "ALIVE", "node_ip": "10.0.0.3", "resources_total": {"CPU": 1}},
                ]
            }
        }
    }
    assert live_nodes(answer) == [
        NodeTotals("a", {"GPU": 2.0}),
        NodeTotals("10.0.0.3", {"CPU": 1.0}),
    ]
    assert live_nodes({"data": None}) == [] and live_nodes([]) == []


resources = st.dictionaries(st.sampled_from(["GPU", "CPU", "memory", "X"]), st.integers(0, 9))


@given(asks=resources, nodes=st.lists(resources, max_size=4))
def test_impossible_exactly_when_no_node_holds_every_ask(
    asks: dict[str, int], nodes: list[dict[str, int]]
) -> None:
    totals = [NodeTotals(f"n{i}", {k: float(v) for k, v in n.items()}) for i, n in enumerate(nodes)]
    wanted = {k: float(v) for k, v in asks.items() if v}
    fits = any(all(n.get(k, 0) >= v for k, v in wanted.items()) for n in nodes)
    said = never_fits(wanted, totals)
    assert (said is None) == (fits or not nodes or not wanted)


def test_the_asks_a_submission_recorded_are_read_back() -> None:
    key = "gpupool_entrypoint_asks"
    assert asks_of({key: '{"GPU": 8.0, "CPU": 0}'}, key) == {"GPU": 8.0}
    assert asks_of({key: "not json"}, key) == {} and asks_of({key: "[1]"}, key) == {}
    assert asks_of({}, key) == {} and asks_of(None, key) == {}
