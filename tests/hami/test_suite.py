"""The HAMi compatibility suite (docs/hami-migration.md#compatibility-suite): each row of
HAMi's own test tables agrees with vgpu, or is a documented difference that still holds."""

from __future__ import annotations

import pytest

from tests.hami.rows import Row, counts
from tests.hami.suite import ROWS


@pytest.mark.parametrize("row", ROWS, ids=[r.source for r in ROWS])
def test_row(row: Row) -> None:
    row.check()


def test_every_difference_has_its_reason_and_the_counts_are_reported() -> None:
    assert all(r.differs is None or len(r.differs) > 40 for r in ROWS)
    assert len({r.source for r in ROWS}) == len(ROWS)
    got = counts(ROWS)
    print(f"HAMi compatibility suite: {got}")
    assert got["rows"] == got["agree"] + got["differ"] and got["agree"] > got["differ"]
