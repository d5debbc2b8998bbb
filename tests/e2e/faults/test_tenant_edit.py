"""What a tenant can write is never the source of truth on restart (issue 36, case 5).

Where ``/validate`` fails open (the 1.20 overlay's ``failurePolicy: Ignore``), a pod's owner
can edit its ``vgpu.io/assignment``. The running scheduler keeps the Binding's slice; a
restarted one must not rebuild from the edited annotation (1000 MiB instead of 10000) and
place another pod where the container still holds 10000 MiB. Here the edit goes through
as the stack's annotation writer, which ``/validate`` lets through, as it would let
everything through when it is not called.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from tests.controlplane.cluster import ControlPlane
from tests.e2e.full_stack_support import gpu_container, gpu_pod
from tests.e2e.harness import FullStack, Gpu, NodeSpec
from tests.e2e.harness_pods import namespace_for_test
from vgpu.annotations import ASSIGNMENT

NODE = NodeSpec("edited", (Gpu("Tesla T4", 16000),))


@pytest.fixture(scope="module")
def stack(control_plane: ControlPlane) -> Iterator[FullStack]:
    with FullStack(control_plane, [NODE]) as running:
        yield running


def test_an_edited_assignment_does_not_survive_a_restart(
        stack: FullStack, request: pytest.FixtureRequest) -> None:
    ns = stack.namespace(namespace_for_test(request.node.name))
    stack.create_pod(ns, gpu_pod("a", gpu_container(gpu=1, gpumem=10000)))
    served = stack.wait_allocated(ns, "a")
    edited = json.loads(served["metadata"]["annotations"][ASSIGNMENT])
    (slices,) = edited["containers"].values()
    slices[0]["memory_mib"] = 1000
    stack.cluster.patch_annotations("pods", "a", {ASSIGNMENT: json.dumps(edited)}, ns)

    stack.restart_scheduler()
    stack.create_pod(ns, gpu_pod("b", gpu_container(gpu=1, gpumem=10000)))
    time.sleep(5)
    assert not stack.pod(ns, "b")["spec"].get("nodeName"), stack.logs()
    events = [e for e in stack.events(ns, "a") if e.get("reason") == "AssignmentEdited"]
    assert events and events[0]["type"] == "Warning", stack.events(ns, "a")
    stack.clear(ns)
