"""What a pod hit by a fault in its MPS fault domain is told, and the counts
(docs/isolation.md#fault-reports): pure, so the words are tested without a daemon.
:mod:`.mps_faults` finds the faults and whom they hit."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, Metric

from vgpu_nodeagent.isolation.mps_roster import Client, Server

REASON = "SharedGPUFault"
XID, SERVER_EXIT = "xid", "server-exit"
CAUSES = (XID, SERVER_EXIT)


@dataclass(frozen=True)
class Fault:
    """One fault and whom it reached."""

    cause: str
    gpu: str | None
    xid: int | None
    #: The clients it ended, with their servers.
    hit: tuple[tuple[Server, Client], ...]
    #: The process the kernel's Xid line names (None: not known), and its pod when it has
    #: one.
    culprit: Client | None = None
    #: Why the culprit is not known, for the message.
    unknown_culprit: str = ""


def _containers(clients: Sequence[Client]) -> str:
    names = sorted({c.owner.container for c in clients if c.owner is not None})
    return ", ".join(names)


def _culprit_text(fault: Fault, uid: str) -> str:
    culprit = fault.culprit
    if culprit is None:
        return f"Which client faulted is not known ({fault.unknown_culprit})."
    owner = culprit.owner
    if owner is None:
        return f"It came from process {culprit.pid}, which is no pod's."
    if owner.uid == uid:
        return (f"It came from this pod's container {owner.container} (process "
                f"{culprit.pid}, named by the kernel's Xid line).")
    return (f"It came from pod {owner.pod}, container {owner.container} (process "
            f"{culprit.pid}, named by the kernel's Xid line).")


def message(fault: Fault, uid: str, clients: Sequence[Client]) -> str:
    """The Warning a pod whose ``clients`` the fault ended gets."""
    servers = sorted({s.pid for s, _ in fault.hit})
    where = ", ".join(map(str, servers))
    if fault.cause == XID:
        what = (f"GPU {fault.gpu or '(unknown)'} raised XID {fault.xid} under MPS server "
                f"{where}: the CUDA work of every client of that server on the GPU ended "
                f"with it")
    else:
        what = (f"MPS server {where} exited with an error: the CUDA work of every one of "
                f"its clients ended with it")
    others = len({c.owner.uid for _, c in fault.hit if c.owner is not None} - {uid})
    return (f"{what}, this pod's container {_containers(clients)} among them "
            f"({others} other pod{'s' if others != 1 else ''} too). "
            f"{_culprit_text(fault, uid)} On MPS a GPU is one fault domain: a pod that must "
            f"not share one with other namespaces' pods says so with vgpu.io/fault-domain "
            f"(docs/isolation.md#fault-domains).")


def by_pod(fault: Fault) -> dict[str, tuple[str, list[Client]]]:
    """The pods the fault reached: uid -> (namespace/name, their clients)."""
    out: dict[str, tuple[str, list[Client]]] = {}
    for _, client in fault.hit:
        if client.owner is not None:
            out.setdefault(client.owner.uid, (client.owner.pod, []))[1].append(client)
    return out


def families(faults: Mapping[str, int], pods: int, servers: int) -> Iterator[Metric]:
    counted = CounterMetricFamily("vgpu_mps_faults",
                                  "GPU faults that ended the clients of an MPS server, by "
                                  "what showed them (an XID, a server's exit)",
                                  labels=["cause"])
    for cause in CAUSES:
        counted.add_metric([cause], faults.get(cause, 0))
    yield counted
    warned = CounterMetricFamily("vgpu_mps_fault_pods",
                                 "Pods told (a SharedGPUFault Warning) that a fault in their "
                                 "MPS fault domain ended their containers' work")
    warned.add_metric([], pods)
    yield warned
    started = CounterMetricFamily("vgpu_mps_servers_started",
                                  "MPS servers the agent started again after a fault took "
                                  "them")
    started.add_metric([], servers)
    yield started
