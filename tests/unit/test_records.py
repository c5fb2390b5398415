"""core/values.py's records behave as the frozen slotted dataclasses they replace, and the
CLI's view imports no longer load `dataclasses`."""

from __future__ import annotations

import dataclasses
import pickle
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpupool.core.values import record, replaced, unlisted


@record
class View:
    """A view: a required field, an unlisted one, defaults after."""

    id: int
    name: str
    wire: dict[str, int] = unlisted()
    note: str | None = None
    nodes: int = 1

    @property
    def label(self) -> str:
        return f"{self.id}:{self.name}"


@dataclasses.dataclass(frozen=True, slots=True)
class Twin:
    id: int
    name: str
    wire: dict[str, int] = dataclasses.field(repr=False, compare=False)
    note: str | None = None
    nodes: int = 1


FIELDS = st.tuples(st.integers(), st.text(max_size=5), st.dictionaries(st.text(max_size=2), st.integers()),
                   st.none() | st.text(max_size=3), st.integers(0, 4))  # fmt: skip


@given(FIELDS, FIELDS)
def test_a_record_compares_and_shows_as_the_dataclass_did(a: tuple, b: tuple) -> None:  # type: ignore[type-arg]
    va, vb, ta, tb = View(*a), View(*b), Twin(*a), Twin(*b)
    assert (va == vb) == (ta == tb)
    assert repr(va).removeprefix("View") == repr(ta).removeprefix("Twin")
    assert hash(va) == hash(View(*a)) and va == View(*a)
    assert (va.id, va.name, va.wire, va.note, va.nodes) == a
    assert pickle.loads(pickle.dumps(va)) == va


def test_a_record_takes_names_and_defaults_and_keeps_its_methods() -> None:
    v = View(id=3, name="x", wire={})
    assert (v.note, v.nodes, v.label) == (None, 1, "3:x")
    assert View(3, "x", {"other": 1}) == v  # `wire` is not compared
    assert "wire" not in repr(v)
    assert not hasattr(v, "__dict__")  # slotted
    with pytest.raises(TypeError):
        View(3)  # type: ignore[call-arg]


def test_replaced_changes_the_fields_named_only() -> None:
    v = View(1, "a", {"k": 1}, note="n")
    w = replaced(v, name="b")
    assert (w.id, w.name, w.wire, w.note, v.name) == (1, "b", {"k": 1}, "n", "a")
    with pytest.raises(TypeError, match="has no field colour"):
        replaced(v, colour=1)


def test_a_record_cannot_change() -> None:
    v = View(1, "a", {})
    with pytest.raises(AttributeError, match="cannot assign"):
        v.name = "b"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del v.id  # type: ignore[misc]
    assert v.name == "a"


def test_a_required_field_after_a_default_is_refused() -> None:
    with pytest.raises(TypeError, match="without a default after one with"):

        @record
        class Bad:
            a: int = 1
            b: int


def test_reading_jobs_imports_no_dataclasses() -> None:
    code = (
        "import sys, gpupool.client.views, gpupool.client.http; print('dataclasses' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
