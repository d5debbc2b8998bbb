"""The cluster port's object key (vgpu.cluster.port)."""

from __future__ import annotations

from typing import Any

import pytest

from vgpu.cluster.port import key_of


@pytest.mark.parametrize(("obj", "key"), [
    ({"metadata": {"namespace": "ml", "name": "train"}}, "ml/train"),
    ({"metadata": {"name": "node-0"}}, "node-0"),
])
def test_key_of(obj: dict[str, Any], key: str) -> None:
    assert key_of(obj) == key
