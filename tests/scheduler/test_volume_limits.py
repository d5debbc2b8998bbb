"""NodeVolumeLimits: CSI attach limits per node (kube's csi_test cases for CSI drivers,
bound and pending claims, shared volumes and ephemeral volumes, in our words; in-tree
migration is not done, see the plugin's docstring)."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from tests.scheduler.volume_helpers import StorageHandle, node, pod, pre_filtered
from tests.support import volumes as vol
from vgpu.cluster.port import Obj
from vgpu_scheduler.framework.cluster_event import ClusterEvent
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.status import Code, Status
from vgpu_scheduler.plugins.kube import node_volume_limits as nvl

EBS = "ebs.csi.aws.com"
GCE = "pd.csi.storage.gke.io"


def csinode(name: str, **limits: int | None) -> Obj:
    drivers = [{"name": d.replace("_", "."), "nodeID": name,
                **({"allocatable": {"count": n}} if n is not None else {})}
               for d, n in limits.items()]
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
            "metadata": {"name": name}, "spec": {"drivers": drivers}}


def csi_claims(driver: str, count: int, prefix: str) -> list[Obj]:
    """``count`` claims ``<prefix>-<i>`` bound to CSI volumes of ``driver``."""
    out: list[Obj] = []
    for i in range(count):
        name = f"{prefix}-{i}"
        out += [vol.pvc(name, "sc", volume=f"pv-{name}", bound=True),
                vol.pv(f"pv-{name}", "sc", csi=(driver, f"h-{name}"), phase="Bound")]
    return out


STORAGE = [*csi_claims(EBS, 5, "ebs"), *csi_claims(GCE, 2, "gce"),
           vol.storage_class("sc", provisioner=EBS),
           vol.storage_class("intree", provisioner="kubernetes.io/aws-ebs"),
           vol.pvc("pending", "sc"), vol.pvc("no-class", None),
           vol.pvc("lost-pv", "sc", volume="pv-nowhere", bound=True),
           vol.pvc("legacy", "intree")]


def run(new: Obj, existing: list[Obj], limits: Obj | None = None, *extra: Obj,
        allocatable: dict[str, str] | None = None) -> Status:
    handle = StorageHandle(*STORAGE, *extra, *([limits] if limits else []))
    plugin = nvl.NodeVolumeLimits(handle)
    n = node("n1", pods=existing)
    if allocatable:
        n.static.node["status"]["allocatable"].update(allocatable)
    info = pod(new)
    state, status = pre_filtered(plugin, info, n)
    if status.code is Code.SKIP:
        return status
    return plugin.filter(state, info, n)


def claims(name: str, *names: str) -> Obj:
    return vol.claim_pod(name, *names)


RUNNING = claims("running", "ebs-3")
TWO = claims("two", "ebs-1", "ebs-2")
NEW = claims("new", "ebs-0")
EXCEEDED = (Code.UNSCHEDULABLE, (nvl.REASON,))
FITS = (Code.SUCCESS, ())


@pytest.mark.parametrize(("new", "existing", "limit", "want"), [
    pytest.param(NEW, [RUNNING, TWO], csinode("n1", ebs_csi_aws_com=4), FITS, id="fits"),
    pytest.param(NEW, [RUNNING, TWO], csinode("n1", ebs_csi_aws_com=2), EXCEEDED,
                 id="exceeds"),
    pytest.param(NEW, [RUNNING, TWO], csinode("n1", ebs_csi_aws_com=3), EXCEEDED,
                 id="exactly-full"),
    pytest.param(NEW, [RUNNING, TWO], csinode("n1", ebs_csi_aws_com=None), FITS,
                 id="driver-without-limit"),
    pytest.param(NEW, [RUNNING, TWO], None, FITS, id="no-csinode"),
    pytest.param(NEW, [claims("pend", "pending"), TWO], csinode("n1", ebs_csi_aws_com=2),
                 EXCEEDED, id="pending-claim-counts-for-its-class-provisioner"),
    pytest.param(NEW, [claims("p1", "pending"), claims("p2", "pending"), TWO],
                 csinode("n1", ebs_csi_aws_com=4), FITS, id="one-pending-claim-counts-once"),
    pytest.param(NEW, [claims("lost", "lost-pv"), TWO], csinode("n1", ebs_csi_aws_com=2),
                 EXCEEDED, id="claim-of-a-missing-pv-counts-by-class"),
    pytest.param(NEW, [RUNNING, claims("nc", "no-class")], csinode("n1", ebs_csi_aws_com=2),
                 FITS, id="unbound-claim-without-class-not-counted"),
    pytest.param(NEW, [claims("g", "gce-0", "gce-1"), TWO],
                 csinode("n1", ebs_csi_aws_com=2, pd_csi_storage_gke_io=2), EXCEEDED,
                 id="same-driver-counts"),
    pytest.param(claims("g", "gce-0", "gce-1"), [TWO, RUNNING],
                 csinode("n1", ebs_csi_aws_com=2, pd_csi_storage_gke_io=2), FITS,
                 id="other-driver-does-not"),
    pytest.param(claims("again", "ebs-1"), [TWO], csinode("n1", ebs_csi_aws_com=2), FITS,
                 id="volume-already-attached-counts-once"),
    pytest.param(claims("old", "legacy"), [TWO], csinode("n1", ebs_csi_aws_com=2), FITS,
                 id="in-tree-class-not-counted"),
    pytest.param(vol.claim_pod("plain"), [TWO], csinode("n1", ebs_csi_aws_com=0),
                 (Code.SKIP, ()), id="no-claims-skips"),
])
def test_csi_limits(new: Obj, existing: list[Obj], limit: Obj | None,
                    want: tuple[Code, tuple[str, ...]]) -> None:
    got = run(new, existing, limit)
    assert (got.code, got.reasons) == want


def test_the_nodes_allocatable_limit_applies_without_a_csinode_count() -> None:
    key = nvl.limit_key(EBS)
    assert run(NEW, [RUNNING, TWO], None, allocatable={key: "3"}).reasons == (nvl.REASON,)
    assert run(NEW, [RUNNING, TWO], None, allocatable={key: "4"}).ok
    # The CSINode's count wins over the node's.
    assert run(NEW, [RUNNING, TWO], csinode("n1", ebs_csi_aws_com=9),
               allocatable={key: "3"}).ok


def test_limit_key_of_a_long_driver_name_is_truncated_and_hashed() -> None:
    assert nvl.limit_key(EBS) == "attachable-volumes-csi-ebs.csi.aws.com"
    long = "a-very-long-csi-driver-name.storage.example.com"
    digest = hashlib.sha1(long.encode()).hexdigest()[:16]
    assert nvl.limit_key(long) == f"attachable-volumes-csi-{long[:23]}{digest}"


def ephemeral_pod(uid: str = "uid-abc") -> Obj:
    obj = vol.claim_pod("abc", ephemeral=["xyz"], namespace="test")
    obj["metadata"]["uid"] = uid
    return obj


def ephemeral_claim(owner: str | None) -> Obj:
    obj = vol.pvc("abc-xyz", "sc", namespace="test")
    if owner:
        obj["metadata"]["ownerReferences"] = [
            {"kind": "Pod", "name": "abc", "uid": owner, "controller": True}]
    return obj


@pytest.mark.parametrize(("claim", "limit", "code", "message"), [
    pytest.param(None, None, Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                 'looking up PVC test/abc-xyz: persistentvolumeclaims "abc-xyz" not found',
                 id="missing"),
    pytest.param(ephemeral_claim(None), None, Code.ERROR,
                 "PVC test/abc-xyz was not created for pod test/abc (pod is not owner)",
                 id="not-owned"),
    pytest.param(ephemeral_claim("uid-abc"), None, Code.SUCCESS, "", id="unbound"),
    pytest.param(ephemeral_claim("uid-abc"), csinode("n1", ebs_csi_aws_com=3),
                 Code.UNSCHEDULABLE, nvl.REASON, id="counted"),
])
def test_ephemeral_volumes(claim: Obj | None, limit: Obj | None, code: Code,
                           message: str) -> None:
    extra = [claim] if claim else []
    got = run(ephemeral_pod(), [RUNNING, TWO], limit, *extra)
    assert got.code is code and message in got.message


def test_an_existing_pods_ephemeral_volume_counts() -> None:
    owner = ephemeral_pod()
    claim = ephemeral_claim("uid-abc")
    got = run(NEW, [RUNNING, owner], csinode("n1", ebs_csi_aws_com=2), claim)
    assert got.reasons == (nvl.REASON,)


@pytest.mark.parametrize(("event", "helps"), [
    (ClusterEvent("csinodes", "add", "", obj=csinode("n2")), True),
    (ClusterEvent("csinodes", "update", "", obj=csinode("n2")), True),
    (ClusterEvent("persistentvolumeclaims", "add", "", obj=vol.pvc("ebs-0")), True),
    (ClusterEvent("persistentvolumeclaims", "add", "", obj=vol.pvc("x")), False),
    (ClusterEvent("pod", "delete", "n1", obj=dict(TWO, spec={**TWO["spec"],
                                                            "nodeName": "n1"})), True),
    (ClusterEvent("pod", "delete", "n1", obj=TWO), False),  # never scheduled
    (ClusterEvent("pod", "delete", "n1", obj=vol.claim_pod("plain")), False),
    (ClusterEvent("pod", "delete", "n1"), True),
    (ClusterEvent("node", "add", "n2"), False),
])
def test_limit_hints(event: ClusterEvent, helps: bool) -> None:
    plugin = nvl.NodeVolumeLimits(StorageHandle())
    assert plugin.could_help(pod(NEW), event) is helps


def node_with(pods: list[Obj]) -> NodeInfo:
    return node("n1", pods=pods)


def test_node_limits_ignore_malformed_allocatable() -> None:
    n: Any = node_with([])
    n.static.node["status"]["allocatable"]["attachable-volumes-csi-x"] = "many"
    assert nvl.node_limits(n, None) == {}
