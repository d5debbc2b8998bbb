"""The tests' JSONPatch applier reads a pod as the API server holds it."""

from __future__ import annotations

from typing import Any

from tests.webhook.jsonpatch import apply


def test_two_members_holding_one_object_are_two() -> None:
    """As hypothesis may draw them (``st.just({})``): on the wire they are two members, so
    an add under one must not show up under the other, nor in the original."""
    shared: dict[str, Any] = {}
    obj = {"spec": {"containers": [{"resources": shared}],
                    "initContainers": [{"resources": shared}]}}
    patched = apply(obj, [{"op": "add", "path": "/spec/containers/0/resources/limits",
                           "value": {"vgpu.io/vgpus": "1"}}])
    assert patched["spec"]["containers"][0]["resources"] == {
        "limits": {"vgpu.io/vgpus": "1"}}
    assert patched["spec"]["initContainers"][0]["resources"] == {}
    assert shared == {}
