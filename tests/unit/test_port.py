"""Accessors every component reads pods and nodes through (vgpu.cluster.port)."""

from __future__ import annotations

from typing import Any

import pytest

from vgpu.cluster.port import annotations_of, is_terminated, key_of


@pytest.mark.parametrize(("obj", "expected"), [
    ({"metadata": {"annotations": {"a": "1"}}}, {"a": "1"}),
    ({"metadata": {}}, {}),
    ({"metadata": {"annotations": None}}, {}),
    ({"metadata": "garbage"}, {}),
    ({}, {}),
])
def test_annotations_of(obj: dict[str, Any], expected: dict[str, str]) -> None:
    assert dict(annotations_of(obj)) == expected


@pytest.mark.parametrize(("phase", "expected"), [
    ("Succeeded", True), ("Failed", True), ("Running", False), ("Pending", False), (None, False),
])
def test_is_terminated(phase: str | None, expected: bool) -> None:
    assert is_terminated({"status": {"phase": phase}}) is expected
    assert is_terminated({}) is False


@pytest.mark.parametrize(("obj", "key"), [
    ({"metadata": {"namespace": "ml", "name": "train"}}, "ml/train"),
    ({"metadata": {"name": "node-0"}}, "node-0"),
])
def test_key_of(obj: dict[str, Any], key: str) -> None:
    assert key_of(obj) == key
