"""VolumeBinding's PreFilter, Filter, Reserve and Unreserve on fixed storage objects: the
behaviours kube's volume_binding_test and binder_test cover (FindPodVolumes with and
without provisioning, GetPodVolumeClaims, AssumePodVolumes, RevertAssumedPodVolumes), as
our own tables. PreBind is in ``test_volume_prebind``."""

from __future__ import annotations

from typing import Any

import pytest

from tests.scheduler.volume_helpers import StorageHandle, node, pod, pre_filtered
from tests.support import volumes as vol
from vgpu.cluster.port import Obj
from vgpu_scheduler.framework.cluster_event import ClusterEvent
from vgpu_scheduler.framework.cycle_state import CycleState
from vgpu_scheduler.framework.status import Code, Status
from vgpu_scheduler.plugins.helper.volume_objects import SELECTED_NODE
from vgpu_scheduler.plugins.kube.volume_binding import VolumeBinding, find

WAIT = vol.storage_class("wait")
IMMEDIATE = vol.storage_class("immediate", mode="Immediate")
LOCAL = vol.storage_class("local", provisioner="kubernetes.io/no-provisioner")
ZONAL = vol.storage_class("zonal", topologies=[{"topology.kubernetes.io/zone": ["b"]}])
CLASSES = (WAIT, IMMEDIATE, LOCAL, ZONAL)
N1 = node("n1", {"topology.kubernetes.io/zone": "a"})
HOST_N1 = {"kubernetes.io/hostname": ["n1"]}
HOST_N2 = {"kubernetes.io/hostname": ["n2"]}


def bound(name: str, volume: str, cls: str = "wait", **kw: Any) -> Obj:
    return vol.pvc(name, cls, volume=volume, bound=True, **kw)


def lost() -> Obj:
    return bound("a", "pv-a", phase="Lost")


def deleting() -> Obj:
    obj = bound("a", "pv-a")
    obj["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return obj


def ephemeral(owner_uid: str | None) -> Obj:
    obj = vol.pvc("p-scratch", "wait")
    if owner_uid is not None:
        obj["metadata"]["ownerReferences"] = [
            {"kind": "Pod", "name": "p", "uid": owner_uid, "controller": True}]
    return obj


def malformed() -> Obj:
    return vol.pvc("a", "wait", request="a lot")


def run(objects: tuple[Obj, ...], *claims: str, ephemeral_volumes: tuple[str, ...] = (),
        nodes: tuple[Any, ...] = (N1,)) -> tuple[Status, list[Status], Any]:
    handle = StorageHandle(*CLASSES, *objects)
    plugin = VolumeBinding(handle)
    info = pod(vol.claim_pod("p", *claims, ephemeral=ephemeral_volumes))
    state, status = pre_filtered(plugin, info, *nodes)
    if status.code is not Code.SUCCESS:
        return status, [], state
    return status, [plugin.filter(state, info, n) for n in nodes], state


@pytest.mark.parametrize(("objects", "claims", "code", "message"), [
    pytest.param((), (), Code.SKIP, "", id="no-claims"),
    pytest.param((bound("a", "pv-a"), vol.pv("pv-a", "wait")), ("a",), Code.SUCCESS, "",
                 id="all-bound"),
    pytest.param((), ("a",), Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                 'persistentvolumeclaim "a" not found', id="claim-missing"),
    pytest.param((bound("a", "pv-a"),), ("a", "b"), Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                 'persistentvolumeclaim "b" not found', id="one-claim-missing"),
    pytest.param((vol.pvc("a", "immediate"),), ("a",), Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                 find.UNBOUND_IMMEDIATE, id="immediate-unbound"),
    pytest.param((vol.pvc("a", None),), ("a",), Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                 find.UNBOUND_IMMEDIATE, id="no-class-is-immediate"),
    pytest.param((vol.pvc("a", "nowhere"),), ("a",), Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                 find.UNBOUND_IMMEDIATE, id="missing-class-is-immediate"),
    pytest.param((vol.pvc("a", "wait", volume="pv-a"),), ("a",),
                 Code.UNSCHEDULABLE_AND_UNRESOLVABLE, find.UNBOUND_IMMEDIATE,
                 id="pre-bound-claim-waits-for-the-controller"),
    pytest.param((vol.pvc("a", "immediate"), vol.pvc("b", "wait")), ("b", "a"),
                 Code.UNSCHEDULABLE_AND_UNRESOLVABLE, find.UNBOUND_IMMEDIATE,
                 id="immediate-beside-delayed"),
    pytest.param((lost(),), ("a",), Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                 'persistentvolumeclaim "a" bound to non-existent persistentvolume "pv-a"',
                 id="claim-lost"),
    pytest.param((deleting(),), ("a",), Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                 'persistentvolumeclaim "a" is being deleted', id="claim-deleting"),
    pytest.param((vol.storage_class("nomode", mode=None), vol.pvc("a", "nomode")), ("a",),
                 Code.ERROR, 'VolumeBindingMode not set for StorageClass "nomode"',
                 id="class-without-mode"),
    pytest.param((malformed(),), ("a",), Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                 'persistentvolumeclaim "a" is malformed', id="malformed-claim"),
])
def test_pre_filter(objects: tuple[Obj, ...], claims: tuple[str, ...], code: Code,
                    message: str) -> None:
    status, _, _ = run(objects, *claims)
    assert status.code is code
    assert message in status.message


@pytest.mark.parametrize(("claim", "message"), [
    (None, 'waiting for ephemeral volume controller to create the persistentvolumeclaim '
           '"p-scratch"'),
    (ephemeral("someone-else"), "PVC default/p-scratch was not created for pod default/p "
                                "(pod is not owner)"),
    (ephemeral(None), "(pod is not owner)"),
    (ephemeral("uid-p"), ""),
])
def test_ephemeral_volume_claims(claim: Obj | None, message: str) -> None:
    status, filtered, _ = run(() if claim is None else (claim,),
                              ephemeral_volumes=("scratch",))
    if message:
        assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert message in status.message
    else:
        assert status.ok and filtered[0].ok


def test_filter_reasons() -> None:
    cases: list[tuple[str, tuple[Obj, ...], tuple[str, ...], tuple[str, ...]]] = [
        ("no volume, no provisioner", (vol.pvc("a", "local"),), ("a",),
         (find.BIND_CONFLICT,)),
        ("bound elsewhere and nothing to bind", (
            bound("a", "pv-a"), vol.pv("pv-a", "wait", on=HOST_N2), vol.pvc("b", "local")),
         ("a", "b"), (find.NODE_CONFLICT, find.BIND_CONFLICT)),
        ("bound to a missing PV", (bound("a", "pv-a"),), ("a",), (find.PV_NOT_EXIST,)),
        ("bound here", (bound("a", "pv-a"), vol.pv("pv-a", "wait", on=HOST_N1)), ("a",), ()),
        ("provisioned anywhere", (vol.pvc("a", "wait"),), ("a",), ()),
        ("class allows other zones only", (vol.pvc("a", "zonal"),), ("a",),
         (find.BIND_CONFLICT,)),
        ("provisioning started for another node", (
            vol.pvc("a", "wait", annotations={SELECTED_NODE: "n2"}),), ("a",),
         (find.BIND_CONFLICT,)),
        ("provisioning started here", (
            vol.pvc("a", "wait", annotations={SELECTED_NODE: "n1"}),), ("a",), ()),
        ("static PV here", (vol.pvc("a", "local"), vol.pv("pv", "local", on=HOST_N1)),
         ("a",), ()),
        ("static PV elsewhere", (vol.pvc("a", "local"), vol.pv("pv", "local", on=HOST_N2)),
         ("a",), (find.BIND_CONFLICT,)),
        ("one PV for two claims", (vol.pvc("a", "local"), vol.pvc("b", "local"),
                                   vol.pv("pv", "local")), ("a", "b"), (find.BIND_CONFLICT,)),
    ]
    for what, objects, claims, reasons in cases:
        status, filtered, _ = run(objects, *claims)
        assert status.ok, what
        got = filtered[0]
        assert got.reasons == reasons, what
        assert got.code is (Code.SUCCESS if not reasons
                            else Code.UNSCHEDULABLE_AND_UNRESOLVABLE), what


def plan_of(state: CycleState, node_name: str = "n1") -> find.Plan:
    st = state.read("VolumeBinding")
    plan: find.Plan = st.plans[node_name]
    return plan


def test_filter_plans_static_bindings_smallest_claim_first_and_provisions_the_rest() -> None:
    # kube sorts the claims by request before matching: the small claim takes the small
    # volume even though the big claim comes first in the pod.
    objects = (vol.pvc("big", "local", request="5Gi"), vol.pvc("small", "local"),
               vol.pvc("new", "wait"), vol.pv("pv-5g", "local", capacity="5Gi"),
               vol.pv("pv-10g", "local", capacity="10Gi"),
               vol.pv("pv-50g", "local", capacity="50Gi"))
    status, filtered, state = run(objects, "big", "small", "new")
    assert status.ok and filtered[0].ok
    plan = plan_of(state)
    assert [(c.name, v.name) for c, v in plan.static] == [("small", "pv-5g"),
                                                         ("big", "pv-10g")]
    assert [c.name for c in plan.provisions] == ["new"]


def test_an_unmatched_claim_of_a_provisioning_class_is_provisioned() -> None:
    _status, filtered, state = run((vol.pvc("a", "wait"), vol.pv("far", "wait", on=HOST_N2)),
                                  "a")
    assert filtered[0].ok and [c.name for c in plan_of(state).provisions] == ["a"]


def test_a_malformed_bound_volume_is_named_in_the_reason() -> None:
    bad = vol.pv("pv-a", "wait")
    bad["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": "zone=a"}}
    _status, filtered, _ = run((bound("a", "pv-a"), bad), "a")
    assert filtered[0].code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert 'persistentvolume "pv-a" is malformed' in filtered[0].message


def test_reserve_assumes_so_the_next_pod_cannot_take_the_same_volume() -> None:
    handle = StorageHandle(*CLASSES, vol.pvc("a", "local"), vol.pvc("b", "local"),
                           vol.pv("only", "local", on=HOST_N1))
    plugin = VolumeBinding(handle)
    first, second = pod(vol.claim_pod("p1", "a")), pod(vol.claim_pod("p2", "b"))
    state, _ = pre_filtered(plugin, first, N1)
    assert plugin.filter(state, first, N1).ok
    assert plugin.reserve(state, first, "n1").ok
    other, _ = pre_filtered(plugin, second, N1)
    assert plugin.filter(other, second, N1).reasons == (find.BIND_CONFLICT,)
    plugin.unreserve(state, first, "n1")
    other, _ = pre_filtered(plugin, second, N1)
    assert plugin.filter(other, second, N1).ok


def test_reserve_assumes_the_selected_node_on_a_claim_to_provision() -> None:
    n2 = node("n2")
    handle = StorageHandle(*CLASSES, vol.pvc("shared", "wait", modes=["ReadWriteMany"]))
    plugin = VolumeBinding(handle)
    first, second = pod(vol.claim_pod("p1", "shared")), pod(vol.claim_pod("p2", "shared"))
    state, _ = pre_filtered(plugin, first, N1, n2)
    assert plugin.filter(state, first, N1).ok
    assert plugin.reserve(state, first, "n1").ok
    other, _ = pre_filtered(plugin, second, N1, n2)
    assert plugin.filter(other, second, n2).reasons == (find.BIND_CONFLICT,)
    assert plugin.filter(other, second, N1).ok
    plugin.unreserve(state, first, "n1")
    other, _ = pre_filtered(plugin, second, N1, n2)
    assert plugin.filter(other, second, n2).ok


def test_a_pod_whose_claims_are_all_bound_has_nothing_to_pre_bind() -> None:
    handle = StorageHandle(*CLASSES, bound("a", "pv-a"), vol.pv("pv-a", "wait"))
    plugin = VolumeBinding(handle)
    info = pod(vol.claim_pod("p", "a"))
    state, _ = pre_filtered(plugin, info, N1)
    assert plugin.filter(state, info, N1).ok
    assert plugin.reserve(state, info, "n1").ok
    # No cluster behind this handle: any write would fail.
    assert plugin.pre_bind(state, info, "n1").ok
    skipped = pod(vol.claim_pod("q"))
    empty = CycleState(0.0)
    assert plugin.reserve(empty, skipped, "n1").ok and plugin.pre_bind(empty, skipped,
                                                                       "n1").ok


@pytest.mark.parametrize(("event", "helps"), [
    (ClusterEvent("node", "add", "n9"), True),
    (ClusterEvent("node", "update", "n9", frozenset({"labels"})), True),
    (ClusterEvent("node", "update", "n9", frozenset({"allocatable"})), False),
    (ClusterEvent("persistentvolumes", "add", "", obj=vol.pv("pv")), True),
    (ClusterEvent("persistentvolumes", "update", "", obj=vol.pv("pv")), True),
    (ClusterEvent("persistentvolumes", "delete", "", obj=vol.pv("pv")), False),
    (ClusterEvent("storageclasses", "add", "", obj=WAIT), True),
    (ClusterEvent("storageclasses", "update", "", obj=WAIT), True),
    (ClusterEvent("persistentvolumeclaims", "update", "", obj=vol.pvc("a")), True),
    (ClusterEvent("persistentvolumeclaims", "add", "", obj=vol.pvc("p-scratch")), True),
    (ClusterEvent("persistentvolumeclaims", "update", "", obj=vol.pvc("b")), False),
    (ClusterEvent("persistentvolumeclaims", "update", "",
                  obj=vol.pvc("a", namespace="other")), False),
    (ClusterEvent("csinodes", "add", "", obj={"metadata": {"name": "n1"}}), False),
    (ClusterEvent("pod", "delete", "n1"), False),
])
def test_binding_hints(event: ClusterEvent, helps: bool) -> None:
    info = pod(vol.claim_pod("p", "a", ephemeral=["scratch"]))
    assert VolumeBinding(StorageHandle()).could_help(info, event) is helps
