"""Volumes under both schedulers: a WaitForFirstConsumer claim provisioned where its class
allows, and a claim bound to a zonal volume that takes its pod to that zone. No
controller-manager or provisioner runs here; :class:`tests.support.volumes.FakeProvisioner`
plays both for either scheduler."""

from __future__ import annotations

import pytest

from tests.controlplane.cluster import ControlPlane
from tests.e2e.parity.support import ZONE, Outcome, Run, both
from tests.support import volumes as vol
from vgpu.cluster.port import Obj
from vgpu.kube import adapter
from vgpu_scheduler.plugins.helper.volume_objects import SELECTED_NODE

pytestmark = pytest.mark.usefixtures("schedulers")


def with_claim(claim: str) -> dict[str, list[dict[str, object]]]:
    return {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}


def claim(run: Run, name: str) -> Obj:
    found: Obj = run.kube.get("persistentvolumeclaims", name, run.namespace)
    return found


def test_wait_for_first_consumer_claim_lands_in_an_allowed_zone(
        control_plane: ControlPlane, kube: adapter.KubeCluster) -> None:
    def scenario(run: Run) -> Outcome:
        zone_of = {run.node(2, labels={ZONE: zone}): zone for zone in ("z0", "z0", "z1", "z1")}
        cls = run.name("wffc")
        run.create("storageclasses", vol.storage_class(cls, topologies=[{ZONE: ["z1"]}]))
        run.create("persistentvolumeclaims", vol.pvc("data", cls, namespace=run.namespace))
        provisioner = vol.FakeProvisioner(run.kube, run.namespace, period=0.1,
                                          topology=lambda node: {ZONE: [zone_of[node]]})
        with provisioner:
            run.pod("p", **with_claim("data"))
            placed = run.settle(1, timeout=90)
        run.made += [("persistentvolumes", pv) for pv in provisioner.provisioned.values()]
        selected = claim(run, "data")["metadata"]["annotations"][SELECTED_NODE]
        assert selected == placed["p"], (selected, placed)
        return {"zone": zone_of[placed["p"]], "provisioned": sorted(provisioner.provisioned)}

    assert both(control_plane, kube, scenario) == {"zone": "z1", "provisioned": ["data"]}


def test_claim_bound_to_a_zonal_volume_takes_the_pod_to_its_zone(
        control_plane: ControlPlane, kube: adapter.KubeCluster) -> None:
    """And a pod held to another zone by its selector cannot have that claim."""
    def scenario(run: Run) -> Outcome:
        zone_of = {run.node(2, labels={ZONE: zone}): zone for zone in ("z0", "z1", "z2")}
        cls = run.name("disk")
        run.create("storageclasses", vol.storage_class(cls))
        pv = run.name("zonal")
        made = run.create("persistentvolumeclaims", vol.pvc(
            "data", cls, namespace=run.namespace, volume=pv, bound=True))
        run.create("persistentvolumes", vol.pv(pv, cls, on={ZONE: ["z1"]}, labels={ZONE: "z1"},
                                               phase=None, claim=made,
                                               csi=(vol.PROVISIONER, pv)))
        run.pod("p", **with_claim("data"))
        run.pod("elsewhere", nodeSelector={ZONE: "z2"}, **with_claim("data"))
        placed = run.settle(1)
        assert "node(s) had volume node affinity conflict" in run.why("elsewhere")
        return {pod: zone_of[node] for pod, node in placed.items()}

    assert both(control_plane, kube, scenario) == {"p": "z1"}
