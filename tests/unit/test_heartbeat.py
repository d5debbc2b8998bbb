"""The one definition of a fresh heartbeat (vgpu.heartbeat)."""

from __future__ import annotations

import pytest

from vgpu import heartbeat

NOW = 1_800_000_000.0


@pytest.mark.parametrize(("beat", "expiry", "fresh"), [
    (NOW, 180.0, True),
    (NOW - 180.0, 180.0, True),    # exactly at the limit: still fresh
    (NOW - 180.5, 180.0, False),
    (NOW + 5.0, 180.0, True),      # a clock a little ahead is not stale
    (None, 180.0, False),          # no heartbeat at all
])
def test_fresh(beat: float | None, expiry: float, fresh: bool) -> None:
    assert heartbeat.fresh(beat, NOW, expiry) is fresh


def test_a_column_compared_with_oldest_fresh_agrees_with_fresh() -> None:
    import numpy as np

    beats = [NOW - 181, NOW - 180, NOW - 179.999, NOW, -np.inf]
    column = np.asarray(beats) >= heartbeat.oldest_fresh(NOW, 180.0)
    assert column.tolist() == [heartbeat.fresh(None if b == -np.inf else b, NOW, 180.0)
                               for b in beats]
