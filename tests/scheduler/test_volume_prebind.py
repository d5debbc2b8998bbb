"""VolumeBinding's PreBind: the writes, the check of what the PV controller and the
provisioner did (kube's bindAPIUpdate and checkBindings cases, in our words), and the
wait with its timeout."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.scheduler.volume_helpers import StorageHandle, node, pod, pre_filtered
from tests.support import volumes as vol
from vgpu.cluster.memory import MemoryCluster
from vgpu.cluster.port import Obj
from vgpu.errors import ClusterError
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.status import Code
from vgpu_scheduler.plugins.helper.volume_objects import (
    BIND_COMPLETED,
    SELECTED_NODE,
    parse_claim,
    parse_volume,
)
from vgpu_scheduler.plugins.kube.volume_binding import VolumeBinding, prebind
from vgpu_scheduler.plugins.kube.volume_binding.matching import bind_volume_to_claim

LABELS = {"kubernetes.io/hostname": "n1"}


class World:
    """A claim ``a`` for static binding to ``pv-a`` and a claim ``b`` to provision, as
    Reserve left them, on an in-memory cluster with the pod."""

    def __init__(self) -> None:
        self.cluster = MemoryCluster()
        self.pod: PodInfo = pod(self.cluster.create("pods", vol.claim_pod("p", "a", "b")))
        self.a = self.cluster.create("persistentvolumeclaims", vol.pvc("a", "local"))
        self.b = self.cluster.create("persistentvolumeclaims", vol.pvc("b", "wait"))
        self.pv = self.cluster.create("persistentvolumes", vol.pv("pv-a", "local"))
        raw, _ = bind_volume_to_claim(parse_volume(self.pv), parse_claim(self.a))
        marked = vol.pvc("b", "wait", annotations={SELECTED_NODE: "n1"})
        marked["metadata"].update(uid=self.b["metadata"]["uid"],
                                  resourceVersion=self.b["metadata"]["resourceVersion"])
        self.plan = prebind.Assumed(((parse_claim(self.a), parse_volume(raw)),),
                                    (parse_claim(marked),))

    def write(self) -> tuple[int, str | None]:
        return prebind.write(self.cluster, self.plan, "n1")

    def check(self, plan: prebind.Assumed | None = None) -> tuple[bool, str | None]:
        return prebind.check_bindings(self.cluster, self.pod, "n1", LABELS, plan or self.plan)

    def complete(self, name: str, volume: str) -> None:
        claim = self.cluster.get("persistentvolumeclaims", name, "default")
        claim["spec"]["volumeName"] = volume
        claim["metadata"]["annotations"][BIND_COMPLETED] = "yes"
        self.cluster.replace("persistentvolumeclaims", claim)

    def provision(self, on: dict[str, list[str]] | None = None) -> None:
        claim = self.cluster.get("persistentvolumeclaims", "b", "default")
        self.cluster.create("persistentvolumes", vol.pv("pv-b", "wait", on=on, claim=claim))
        self.complete("b", "pv-b")

    def edit(self, kind: Any, name: str, change: Callable[[Obj], None]) -> None:
        obj = self.cluster.get(kind, name, "default")
        change(obj)
        self.cluster.replace(kind, obj)


def test_write_binds_the_volume_and_names_the_node_on_the_claim() -> None:
    world = World()
    assert world.write() == (2, None)
    pv = world.cluster.get("persistentvolumes", "pv-a")
    assert pv["spec"]["claimRef"]["uid"] == world.a["metadata"]["uid"]
    claim = world.cluster.get("persistentvolumeclaims", "b", "default")
    assert claim["metadata"]["annotations"][SELECTED_NODE] == "n1"


@pytest.mark.parametrize(("stale", "done"), [("persistentvolumes", 0),
                                              ("persistentvolumeclaims", 1)])
def test_write_stops_at_an_object_that_changed_since_the_decision(stale: Any,
                                                                  done: int) -> None:
    world = World()
    name = "pv-a" if stale == "persistentvolumes" else "b"
    world.edit(stale, name, lambda o: o["metadata"].setdefault("labels", {}).update(x="y"))
    written, failure = world.write()
    assert written == done and failure is not None and "modified" in failure


def scenario(steps: Callable[[World], None]) -> tuple[bool, str | None]:
    world = World()
    assert world.write() == (2, None)
    steps(world)
    return world.check()


def both_done(world: World) -> None:
    world.complete("a", "pv-a")
    world.provision({"kubernetes.io/hostname": ["n1"]})


def delete(kind: Any, name: str, namespace: str | None = "default") -> Callable[[World], None]:
    return lambda w: w.cluster.delete(kind, name, namespace)


@pytest.mark.parametrize(("steps", "want"), [
    pytest.param(lambda w: None, (False, None), id="nothing-happened-yet"),
    pytest.param(both_done, (True, None), id="all-bound"),
    pytest.param(lambda w: w.complete("a", "pv-a"), (False, None), id="provisioning-pending"),
    pytest.param(lambda w: w.provision(), (False, None), id="static-binding-pending"),
    pytest.param(lambda w: (both_done(w), delete("pods", "p")(w)),
                 (False, "pod does not exist any more"), id="pod-deleted"),
    pytest.param(lambda w: w.edit("persistentvolumes", "pv-a",
                                  lambda o: o["spec"].pop("claimRef")),
                 (False, 'ClaimRef got reset for pv "pv-a"'), id="claim-ref-dropped"),
    pytest.param(lambda w: w.edit("persistentvolumes", "pv-a",
                                  lambda o: o["spec"]["claimRef"].update(uid="")),
                 (False, 'ClaimRef got reset for pv "pv-a"'), id="claim-ref-uid-dropped"),
    pytest.param(delete("persistentvolumes", "pv-a", None),
                 (False, "failed to check binding"), id="volume-deleted"),
    pytest.param(delete("persistentvolumeclaims", "a"),
                 (False, "failed to check binding"), id="claim-deleted"),
    pytest.param(lambda w: w.edit("persistentvolumes", "pv-a", lambda o: o["spec"].update(
        nodeAffinity=vol.node_affinity({"kubernetes.io/hostname": ["n2"]}))),
                 (False, "pv \"pv-a\" node affinity doesn't match node \"n1\""),
                 id="static-volume-moved"),
    pytest.param(lambda w: (w.complete("a", "pv-a"), w.edit(
        "persistentvolumeclaims", "b", lambda o: o["metadata"].update(annotations={}))),
                 (False, 'selectedNode annotation reset for PVC "b"'),
                 id="provisioner-removed-every-annotation"),
    pytest.param(lambda w: (w.complete("a", "pv-a"), w.edit(
        "persistentvolumeclaims", "b",
        lambda o: o["metadata"]["annotations"].update({SELECTED_NODE: "n2"}))),
                 (False, 'provisioning failed for PVC "b"'), id="provisioner-chose-again"),
    pytest.param(lambda w: (w.complete("a", "pv-a"), delete("persistentvolumeclaims", "b")(w)),
                 (False, "failed to check provisioning pvc"), id="claim-to-provision-deleted"),
    pytest.param(lambda w: (w.complete("a", "pv-a"), w.complete("b", "pv-later")),
                 (False, None), id="provisioned-volume-not-visible-yet"),
    pytest.param(lambda w: (w.complete("a", "pv-a"),
                            w.provision({"kubernetes.io/hostname": ["n2"]})),
                 (False, "pv \"pv-b\" node affinity doesn't match node \"n1\""),
                 id="provisioned-where-the-pod-cannot-go"),
])
def test_check_bindings(steps: Callable[[World], None], want: tuple[bool, str | None]) -> None:
    done, reason = scenario(steps)
    assert done is want[0]
    if want[1] is None:
        assert reason is None
    else:
        assert reason is not None and want[1] in reason


def test_nothing_to_check_is_bound() -> None:
    assert World().check(prebind.Assumed()) == (True, None)


class Ticks:
    """A clock that each sleep advances."""

    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def answers(*results: Any) -> Callable[[], tuple[bool, str | None]]:
    queue = list(results)

    def check() -> tuple[bool, str | None]:
        result = queue.pop(0) if len(queue) > 1 else queue[0]
        if isinstance(result, Exception):
            raise result
        assert isinstance(result, tuple)
        return result

    return check


def test_wait_polls_until_bound() -> None:
    ticks = Ticks()
    check = answers((False, None), ClusterError("connection reset"), (True, None))
    assert prebind.wait(check, timeout=10, poll=1, what="x", clock=ticks.clock,
                        sleep=ticks.sleep) is None
    assert ticks.slept == [1, 1]


def test_wait_stops_at_the_first_failure() -> None:
    ticks = Ticks()
    check = answers((False, None), (False, "provisioning failed for PVC \"b\""))
    assert prebind.wait(check, timeout=10, poll=1, what="x", clock=ticks.clock,
                        sleep=ticks.sleep) == 'provisioning failed for PVC "b"'


def test_wait_gives_up_after_the_timeout() -> None:
    ticks = Ticks()
    reason = prebind.wait(answers((False, None)), timeout=2.5, poll=1,
                          what="PersistentVolumeClaim(s) default/b", clock=ticks.clock,
                          sleep=ticks.sleep)
    assert reason == ("timed out after 2.5s waiting for PersistentVolumeClaim(s) default/b "
                      "to be bound")
    assert ticks.slept == [1, 1, 0.5]


def test_a_volume_changed_since_reserve_fails_pre_bind_and_drops_the_assumption() -> None:
    cluster = MemoryCluster()
    cls = cluster.create("storageclasses", vol.storage_class(
        "local", provisioner="kubernetes.io/no-provisioner"))
    claims = [cluster.create("persistentvolumeclaims", vol.pvc(n, "local")) for n in "ab"]
    seen = cluster.create("persistentvolumes", vol.pv("pv-a", "local"))
    first = pod(cluster.create("pods", vol.claim_pod("p", "a")))
    second = pod(vol.claim_pod("q", "b"))
    n1 = node("n1")
    # The watch showed this version; someone changes the PV before PreBind writes.
    plugin = VolumeBinding(StorageHandle(cls, *claims, seen, cluster=cluster, nodes=[n1]))
    state, _ = pre_filtered(plugin, first, n1)
    assert plugin.filter(state, first, n1).ok and plugin.reserve(state, first, "n1").ok
    other, _ = pre_filtered(plugin, second, n1)
    assert not plugin.filter(other, second, n1).ok  # assumed taken
    cluster.patch_annotations("persistentvolumes", "pv-a", {"owner": "someone"})
    status = plugin.pre_bind(state, first, "n1")
    assert status.code is Code.ERROR and "modified" in status.message
    assert "claimRef" not in cluster.get("persistentvolumes", "pv-a")["spec"]
    other, _ = pre_filtered(plugin, second, n1)
    assert plugin.filter(other, second, n1).ok  # the assumption is gone
