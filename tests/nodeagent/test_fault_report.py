"""The pieces of a fault report, without a daemon: the kernel's Xid lines, the logs they
are read from, the daemon's server and client lists tied to pods, which clients a fault
reached, and the words each pod is told."""

from __future__ import annotations

from pathlib import Path

import pytest

from vgpu_nodeagent.devices.log_tail import Tail
from vgpu_nodeagent.devices.xid import XidLine, parse_line, pci_address
from vgpu_nodeagent.isolation import mps_roster
from vgpu_nodeagent.isolation.fault_report import Fault, by_pod, message
from vgpu_nodeagent.isolation.mps_roster import Client, Roster, Server
from vgpu_nodeagent.isolation.usage_rules import Owner


@pytest.mark.parametrize(("text", "line"), [
    ("NVRM: Xid (PCI:0000:3b:00): 31, pid=1234, name=python3, Ch 00000008, intr 10000000. "
     "MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x0_dead0000",
     XidLine("0000:3b:00", 31, 1234, "python3")),
    # as /dev/kmsg would be read by dmesg, with a timestamp in front
    ("[ 8812.5] NVRM: Xid (PCI:0000:AF:00): 13, pid=77, name=pt_main_thread, Graphics SM",
     XidLine("0000:af:00", 13, 77, "pt_main_thread")),
    ("NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off "
     "the bus.", XidLine("0000:3b:00", 79, None, "<unknown>")),
    ("NVRM: GPU at PCI:0000:3b:00: GPU-1234", None),
    ("usb 1-1: new high-speed USB device", None),
])
def test_xid_lines(text: str, line: XidLine | None) -> None:
    assert parse_line(text) == line


@pytest.mark.parametrize(("bus", "address"), [
    ("00000000:3B:00.0", "0000:3b:00"), ("0000:3b:00", "0000:3b:00"),
    ("0001:AF:00.1", "0001:af:00"),
])
def test_pci_addresses_compare_in_one_spelling(bus: str, address: str) -> None:
    assert pci_address(bus) == address


def test_a_tail_reads_what_comes_after_it_opened(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_text("old line\n")
    tail = Tail(str(path))
    assert tail.lines() == []
    with path.open("a") as handle:
        handle.write("6,1201,8812512,-;NVRM: Xid (PCI:0000:3b:00): 31, pid=1, name=x\nhal")
    # a /dev/kmsg record's header goes; a cut line waits for its end
    assert tail.lines() == ["NVRM: Xid (PCI:0000:3b:00): 31, pid=1, name=x"]
    with path.open("a") as handle:
        handle.write("f a line\n")
    assert tail.lines() == ["half a line"]
    tail.close()


def test_a_tail_of_a_log_not_there_yet_says_why_and_reads_it_once_it_is(
        tmp_path: Path) -> None:
    tail = Tail(str(tmp_path / "control.log"))
    assert tail.lines() == [] and tail.error is not None and "cannot read" in tail.error
    (tmp_path / "control.log").write_text("")
    assert tail.lines() == [] and tail.error is None
    (tmp_path / "control.log").write_text("Server 9 exited with status 1\n")
    assert tail.lines() == ["Server 9 exited with status 1"]


def pod_obj(name: str, namespace: str, uid: str, container_id: str,
            gpu: str = "GPU-a") -> dict[str, object]:
    text = ('{"version":1,"node":"n","containers":{"main":[{"uuid":"' + gpu +
            '","memory_mib":1024,"cores":30}]}}')
    return {"metadata": {"name": name, "namespace": namespace, "uid": uid,
                         "annotations": {"vgpu.io/assignment": text}},
            "spec": {"nodeName": "n", "schedulerName": "vgpu-scheduler"},
            "status": {"phase": "Running", "containerStatuses": [
                {"name": "main", "containerID": f"containerd://{container_id}"}]}}


UID_A = "aaaaaaaa-0000-0000-0000-000000000001"
UID_B = "bbbbbbbb-0000-0000-0000-000000000002"
CID_A, CID_B = "a" * 64, "b" * 64


def proc(root: Path, pid: int, *, uid: str | None = None, cid: str = "",
         user: int | None = None) -> None:
    folder = root / str(pid)
    folder.mkdir(parents=True)
    if uid is not None:
        (folder / "cgroup").write_text(f"0::/kubepods/burstable/pod{uid}/{cid}\n")
    if user is not None:
        (folder / "status").write_text(f"Name:\tnvidia-cuda-mps\nUid:\t{user}\t{user}\t0\t0\n")


def test_the_roster_ties_each_client_to_its_pod_and_each_server_to_its_user(
        tmp_path: Path) -> None:
    proc(tmp_path, 900, user=1000)
    proc(tmp_path, 1001, uid=UID_A, cid=CID_A)
    proc(tmp_path, 1002, uid=UID_B, cid=CID_B)
    answers = {"get_server_list": (0, "900\n"), "get_client_list 900": (0, "1001\n1002 1003")}
    pods = [pod_obj("a", "ns-a", UID_A, CID_A), pod_obj("b", "ns-b", UID_B, CID_B, "GPU-b")]
    roster = mps_roster.read_roster(lambda c: answers[c], pods, schedulers={"vgpu-scheduler"},
                                    proc_root=str(tmp_path), now=5.0)
    assert roster is not None
    (server,) = roster.servers.values()
    assert (server.pid, server.uid) == (900, 1000)
    owners = {c.pid: None if c.owner is None else (c.owner.pod, c.owner.container,
                                                   dict(c.owner.grants))
              for c in server.clients}
    assert owners == {1001: ("ns-a/a", "main", {"GPU-a": 1024}),
                      1002: ("ns-b/b", "main", {"GPU-b": 1024}),
                      1003: None}   # not a pod's process (or gone already)
    # A fault on GPU-a reached a's client and the process of no pod, not b's on GPU-b.
    assert [c.pid for _, c in mps_roster.reached([roster], "GPU-a")] == [1001, 1003]
    assert [c.pid for _, c in mps_roster.reached([roster], None)] == [1001, 1002, 1003]
    # A daemon that does not answer gives no roster.
    assert mps_roster.read_roster(lambda c: (1, "no"), pods, schedulers=set(),
                                  proc_root=str(tmp_path), now=6.0) is None


def test_reached_merges_the_roster_before_a_fault_with_the_one_after() -> None:
    a = Client(1, Owner("ns/a", "main", {"GPU-a": 1}, "ua"))
    b = Client(2, Owner("ns/b", "main", {"GPU-a": 1}, "ub"))
    before = Roster({9: Server(9, 0, (a, b))}, 1.0)
    after = Roster({9: Server(9, 0, (b,))}, 2.0)   # a's process already left
    assert [c.pid for _, c in mps_roster.reached([before, after], "GPU-a")] == [2, 1]
    assert mps_roster.reached([before, after], "GPU-a", server=8) == []


A = Client(11, Owner("ns-a/a", "main", {"GPU-a": 1}, "ua"))
A2 = Client(12, Owner("ns-a/a", "side", {"GPU-a": 1}, "ua"))
B = Client(21, Owner("ns-b/b", "main", {"GPU-a": 1}, "ub"))
STRAY = Client(31, None)
SERVER = Server(900, 1000)
HIT = ((SERVER, A), (SERVER, A2), (SERVER, B), (SERVER, STRAY))


@pytest.mark.parametrize(("fault", "uid", "says"), [
    (Fault("xid", "GPU-a", 31, HIT, A), "ub",
     ["GPU GPU-a raised XID 31 under MPS server 900", "this pod's container main among them "
      "(1 other pod too)", "It came from pod ns-a/a, container main (process 11"]),
    (Fault("xid", "GPU-a", 31, HIT, A), "ua",
     ["this pod's container main, side among them", "It came from this pod's container "
      "main (process 11"]),
    (Fault("xid", "GPU-a", 13, HIT, STRAY), "ua", ["It came from process 31, which is no "
                                                   "pod's."]),
    (Fault("xid", "GPU-a", 31, HIT, None, "isolation.mps.kernelLog is off"), "ub",
     ["Which client faulted is not known (isolation.mps.kernelLog is off)."]),
    (Fault("server-exit", None, None, HIT, None, "the server exited with status 1"), "ua",
     ["MPS server 900 exited with an error: the CUDA work of every one of its clients ended",
      "(1 other pod too)", "not known (the server exited with status 1)"]),
])
def test_what_each_pod_is_told(fault: Fault, uid: str, says: list[str]) -> None:
    _, clients = by_pod(fault)[uid]
    text = message(fault, uid, clients)
    for part in says:
        assert part in text, text
    assert "vgpu.io/fault-domain" in text and "docs/isolation.md#fault-domains" in text


def test_every_pod_the_fault_reached_is_told_once_and_a_stray_process_is_not() -> None:
    pods = by_pod(Fault("xid", "GPU-a", 31, HIT))
    assert {uid: (key, [c.pid for c in clients]) for uid, (key, clients) in pods.items()} == {
        "ua": ("ns-a/a", [11, 12]), "ub": ("ns-b/b", [21])}
