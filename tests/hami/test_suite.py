"""The HAMi compatibility suite (docs/hami-migration.md#compatibility-suite): each row of
HAMi's own test tables agrees with vgpu, or is a documented difference that still holds."""

from __future__ import annotations

import re
from pathlib import Path

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


def test_the_migration_page_states_the_suites_counts() -> None:
    """docs/hami-migration.md#compatibility-suite gives the counts the suite has, and names
    every HAMi test file a row comes from: it cannot fall behind the rows."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "hami-migration.md").read_text()
    section = page.split("## Compatibility suite", 1)[1].split("\n## ", 1)[0]
    stated = re.search(r"(\d+) rows, (\d+) agree, (\d+)\s+documented differences", section)
    assert stated is not None, "the section states no counts"
    got = counts(ROWS)
    assert tuple(map(int, stated.groups())) == (got["rows"], got["agree"], got["differ"])
    for source in {r.source.split(":", 1)[0] for r in ROWS}:
        assert f"`{source}`" in section, f"{source} is not named in the section"
