"""The client quotes URL parts itself (client/transport.py, without urllib.parse): as
urllib.parse does, for any text."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

TEXTS = st.text(max_size=12) | st.sampled_from(["a b", "a+b", "ü/é", "~x", "a&b=c", "%"])


@given(TEXTS)
def test_quoted_is_urllibs_quote(text: str) -> None:
    from urllib.parse import quote, quote_plus

    from gpupool.client.transport import quoted

    assert quoted(text) == quote(text, safe="")
    assert quoted(text, plus=True) == quote_plus(text, safe="")


@given(st.dictionaries(TEXTS, TEXTS | st.integers()))
def test_query_string_is_urllibs_urlencode(items: dict[str, str | int]) -> None:
    from urllib.parse import urlencode

    from gpupool.client.transport import query_string

    assert query_string(items) == urlencode(items)
