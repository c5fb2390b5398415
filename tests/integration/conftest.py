from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.pool_harness import Pool


@pytest.fixture
def pool(tmp_path: Path) -> Iterator[Pool]:
    p = Pool(tmp_path / "pool").start()
    try:
        yield p
    finally:
        p.cleanup()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/integration/" in str(item.fspath):
            item.add_marker(pytest.mark.integration)
