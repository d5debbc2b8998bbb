"""The cache never lets a pod that vgpu did not place count as holding a slice (issue 24).

What a pod's owner cannot edit decides: ``spec.schedulerName`` (immutable once the pod
exists) and the pod's own requests; what vgpu's Binding gave a pod is what it holds, and an
edit of its ``vgpu.io/assignment`` afterwards changes nothing. The issue reproduced both:
removing the annotation from a running pod freed its slice in the scheduler's view (usage
30000 MiB -> 0), and a pod asking for no GPU with a forged assignment blocked a node.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from tests.scheduler.test_cache import NOW, assignment
from vgpu import builders, codecs
from vgpu.annotations import ASSIGNMENT
from vgpu.config import Config
from vgpu.devices import Usage
from vgpu_scheduler.host.cache import Cache

A = assignment("n1", "GPU-n1-0", memory=30000, cores=0)


def cache() -> Cache:
    c = Cache(config=Config(extra_scheduler_names=("second-vgpu",)))
    c.set_node(builders.node("n1", builders.devices("n1", 2), cpu="8"), NOW)
    return c


def running(name: str = "p", *, gpus: int | None = 1, scheduler: str = "vgpu-scheduler",
            text: str | None = codecs.encode_assignment(A)) -> dict[str, Any]:
    obj = builders.pod(name, [builders.container(gpus=gpus, cpu="1")],
                       scheduler_name=scheduler)
    obj["spec"]["nodeName"] = "n1"
    obj["metadata"]["uid"] = f"uid-{name}"
    if text is not None:
        obj["metadata"]["annotations"][ASSIGNMENT] = text
    obj["status"] = {"phase": "Running"}
    return obj


def usage(c: Cache) -> tuple[Usage, ...]:
    info = c.node_info("n1")
    assert info is not None
    return info.usages


HELD = (Usage(30000, 0, 1), Usage())
FREE = (Usage(), Usage())


def test_removing_the_annotation_of_a_running_pod_frees_nothing() -> None:
    c = cache()
    pod = running()
    c.set_pod(pod)
    assert usage(c) == HELD
    stripped = copy.deepcopy(pod)
    del stripped["metadata"]["annotations"][ASSIGNMENT]
    c.set_pod(stripped)
    assert usage(c) == HELD
    edited = copy.deepcopy(pod)
    edited["metadata"]["annotations"][ASSIGNMENT] = codecs.encode_assignment(
        assignment("n1", "GPU-n1-1", memory=10, cores=0))
    c.set_pod(edited)
    assert usage(c) == HELD
    # Only its end frees the slice.
    c.remove_pod("uid-p")
    assert usage(c) == FREE


def test_a_new_pod_of_the_same_name_is_read_anew() -> None:
    c = cache()
    c.set_pod(running())
    again = running(text=codecs.encode_assignment(assignment("n1", "GPU-n1-1", 500, 0)))
    again["metadata"]["uid"] = "uid-p-2"
    c.set_pod(again)
    # Records are keyed by uid: the first pod holds its slice until the watch says it is
    # gone; the successor's claim is its own assignment, not kept from the first.
    assert usage(c) == (Usage(30000, 0, 1), Usage(500, 0, 1))
    c.remove_pod("uid-p")
    assert usage(c) == (Usage(), Usage(500, 0, 1))


@pytest.mark.parametrize(("pod", "holds"), [
    pytest.param(running(), True, id="placed-by-vgpu"),
    pytest.param(running(scheduler="second-vgpu"), True, id="placed-by-a-trusted-scheduler"),
    pytest.param(running(scheduler="x"), False, id="another-schedulers-pod-with-a-forgery"),
    pytest.param(running(scheduler="default-scheduler"), False, id="default-scheduler"),
    pytest.param(running(gpus=None), False, id="a-pod-asking-no-gpu-with-a-forgery"),
    pytest.param(running(gpus=2), False, id="an-assignment-of-the-wrong-count"),
])
def test_who_holds_a_slice(pod: dict[str, Any], holds: bool) -> None:
    c = cache()
    c.set_pod(pod)
    assert usage(c) == (HELD if holds else FREE)
    info = c.node_info("n1")
    assert info is not None and info.pod_count == 1  # its CPU and memory count all the same


def test_a_forged_assignment_added_later_is_no_claim() -> None:
    c = cache()
    plain = running(text=None)
    c.set_pod(plain)
    assert usage(c) == FREE
    c.set_pod(running())
    assert usage(c) == FREE


def test_another_schedulers_pod_in_allocation_holds_no_gate() -> None:
    """A forged ``bind-phase: allocating`` on a pod vgpu did not place (its owner's
    writing, with admission out of the way) holds no pod at Permit: the node's gate sees
    only pods of vgpu's schedulers."""
    from tests.scheduler.e2e_support import gpu_node, node_of, setup

    config = Config(scheduler=dataclasses.replace(Config().scheduler, permit_gate="node"))
    sched, cluster, _ = setup([gpu_node("n1", 2)], config)
    forged = builders.pod("forged", [builders.container(gpus=1)], scheduler_name="x",
                          annotations={ASSIGNMENT: codecs.encode_assignment(
                              assignment("n1", "GPU-n1-0", 100, 0)),
                              "vgpu.io/bind-phase": "allocating",
                              "vgpu.io/bind-time": "2099-01-01T00:00:00.000000Z"})
    forged["spec"]["nodeName"] = "n1"
    cluster.create("pods", forged)
    cluster.create("pods", builders.pod("mine", [builders.container(gpus=1)]))
    sched.run_until_idle()
    assert node_of(cluster, "mine") == "n1"
    assert sched.waiting_pods() == {}
