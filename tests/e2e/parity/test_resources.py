"""Every resource a pod asks for, under both schedulers: an extended resource only some
nodes have, and ephemeral storage (see :mod:`tests.e2e.parity.support`). The reasons are
compared in kube-scheduler's words."""

from __future__ import annotations

import pytest

from tests.controlplane.cluster import ControlPlane
from tests.e2e.parity.support import Outcome, Run, both
from vgpu.kube import adapter

pytestmark = pytest.mark.usefixtures("schedulers")

FPGA = "example.com/fpga"


def test_extended_resources_and_ephemeral_storage(control_plane: ControlPlane,
                                                  kube: adapter.KubeCluster) -> None:
    """One node has an FPGA and room on disk, the other neither: the FPGA pod and the
    disk pod go to the first, a second FPGA pod and a pod asking for more disk than any
    node has wait, each named by the resource it lacks."""
    def scenario(run: Run) -> Outcome:
        roomy = run.node(2, allocatable={FPGA: "1", "ephemeral-storage": "10Gi"})
        run.node(2, allocatable={"ephemeral-storage": "1Gi"})
        run.pod("fpga-0", limits={FPGA: "1"})
        run.pod("disk", limits={"ephemeral-storage": "5Gi"})
        placed = run.settle(2)
        run.pod("fpga-1", limits={FPGA: "1"})
        run.pod("huge-disk", limits={"ephemeral-storage": "20Gi"})
        assert "2 Insufficient example.com/fpga" in run.why("fpga-1")
        assert "2 Insufficient ephemeral-storage" in run.why("huge-disk")
        return {"on the roomy node": sorted(p for p, n in placed.items() if n == roomy),
                "pending": run.pending()}

    assert both(control_plane, kube, scenario) == {
        "on the roomy node": ["disk", "fpga-0"], "pending": {"fpga-1", "huge-disk"}}
