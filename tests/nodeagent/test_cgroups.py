"""The cgroup of a process to its pod and container: cgroup v1 and v2, the cgroupfs and
systemd drivers, containerd, CRI-O and Docker path shapes."""

from __future__ import annotations

import pytest

from vgpu_nodeagent.isolation.cgroups import CgroupRef, container_ids, parse

UID = "0a1b2c3d-4e5f-6789-abcd-ef0123456789"
SYSTEMD_UID = UID.replace("-", "_")
CID = "3f4e5d6c7b8a99887766554433221100ffeeddccbbaa00112233445566778899"

V1_CGROUPFS = f"""12:pids:/kubepods/burstable/pod{UID}/{CID}
11:memory:/kubepods/burstable/pod{UID}/{CID}
1:name=systemd:/kubepods/burstable/pod{UID}/{CID}
0::/"""


@pytest.mark.parametrize(("text", "expected"), [
    (V1_CGROUPFS, CgroupRef(UID, CID)),
    # v1, cgroupfs, a Guaranteed pod (no QoS level)
    (f"4:cpu,cpuacct:/kubepods/pod{UID}/{CID}", CgroupRef(UID, CID)),
    # v1, systemd driver, containerd
    (f"9:memory:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod"
     f"{SYSTEMD_UID}.slice/cri-containerd-{CID}.scope", CgroupRef(UID, CID)),
    # v2, systemd driver, CRI-O
    (f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{SYSTEMD_UID}"
     f".slice/crio-{CID}.scope", CgroupRef(UID, CID)),
    # v2, cgroupfs driver, containerd
    (f"0::/kubepods/burstable/pod{UID}/{CID}", CgroupRef(UID, CID)),
    # v2, systemd, Docker (cri-dockerd)
    (f"0::/kubepods.slice/kubepods-pod{SYSTEMD_UID}.slice/docker-{CID}.scope",
     CgroupRef(UID, CID)),
    # v2 with the kubelet inside a nested cgroup (kind, a systemd unit)
    (f"0::/system.slice/kubelet.service/kubepods/besteffort/pod{UID}/{CID}",
     CgroupRef(UID, CID)),
    # CRI-O's conmon is not the container
    (f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{SYSTEMD_UID}"
     f".slice/crio-conmon-{CID}.scope", None),
    # the pod's own cgroup (the pause sandbox's parent), no container
    (f"0::/kubepods/burstable/pod{UID}", None),
    # processes outside Kubernetes
    ("0::/user.slice/user-1000.slice/session-3.scope", None),
    ("12:memory:/system.slice/docker-abc.scope", None),
    ("", None),
    ("garbage without colons", None),
])
def test_parse(text: str, expected: CgroupRef | None) -> None:
    assert parse(text) == expected


def test_container_ids_from_status() -> None:
    pod = {"status": {
        "containerStatuses": [{"name": "main", "containerID": f"containerd://{CID}"},
                              {"name": "side", "containerID": "cri-o://abc123"},
                              {"name": "waiting"}],
        "initContainerStatuses": [{"name": "init", "containerID": "docker://def456"}]}}
    assert container_ids(pod) == {CID: "main", "abc123": "side", "def456": "init"}
    assert container_ids({}) == {}
