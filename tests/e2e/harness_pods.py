"""What a test does on a running stack: namespaces its webhook sees, pods, and waits.

:class:`StackPods` is the part of :class:`tests.e2e.harness.FullStack` that tests call
once it is up (starting and stopping it is the harness's own business); ``bind_phase``
and ``allocated`` read a pod as the node agent and the kubelet stand-in leave it.
"""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote

from tests.controlplane.cluster import ControlPlane
from tests.e2e.harness_nodes import SimNode
from tests.e2e.harness_processes import Processes, wait_until
from tests.support.kubelet_node import Admission
from vgpu.annotations import BIND_PHASE, PHASE_SUCCESS
from vgpu.cluster.port import Obj, Selector, key_of
from vgpu.errors import NotFoundError
from vgpu.kube.adapter import KubeCluster


def namespace_for_test(test_name: str) -> str:
    """A unique namespace name for one test, readable in logs: its name as a DNS label
    (at most 40 characters) and a random suffix."""
    slug = re.sub(r"[^a-z0-9]+", "-", test_name.lower()).strip("-")[:40].strip("-")
    return f"{slug}-{uuid.uuid4().hex[:6]}"


#: Namespace label the stack's webhook registration selects on (besides the system
#: namespaces' exclusion), so a registration can never reach another test's pods.
STACK_LABEL = "e2e.vgpu.io/stack"
#: Set by the API server itself from 1.21 on; set here by hand so that the manifest's
#: system-namespace selector is evaluated as written.
NAME_LABEL = "kubernetes.io/metadata.name"


class StackPods:
    """Pods on a running :class:`tests.e2e.harness.FullStack`, through its API client."""

    cp: ControlPlane
    cluster: KubeCluster
    tag: str
    procs: Processes
    nodes: dict[str, SimNode]

    def logs(self, lines: int = 60) -> str:
        """The components' log tails, for a wait's error; the stack gives them."""
        raise NotImplementedError

    def namespace(self, name: str) -> str:
        """A namespace whose pods this stack's webhook sees."""
        self.cp.ensure_namespace(name)
        self.cluster.request_json(
            "PATCH", f"/api/v1/namespaces/{quote(name)}", f"label namespace {name}",
            body={"metadata": {"labels": {STACK_LABEL: self.tag, NAME_LABEL: name}}},
            content_type="application/merge-patch+json")
        return name

    def create_pod(self, namespace: str, pod: Mapping[str, Any]) -> Obj:
        body = json.loads(json.dumps(pod))
        body.setdefault("metadata", {})["namespace"] = namespace
        body.setdefault("spec", {}).setdefault("automountServiceAccountToken", False)
        return self.cluster.create("pods", body)

    def pod(self, namespace: str, name: str) -> Obj:
        return self.cluster.get("pods", name, namespace)

    def pods(self, namespace: str) -> list[Obj]:
        return self.cluster.list("pods", Selector(namespace=namespace)).items

    def wait_pod(self, namespace: str, name: str, what: str, check: Callable[[Obj], bool],
                 timeout: float = 30.0) -> Obj:
        last: dict[str, Obj] = {}

        def probe() -> Obj | None:
            self.procs.check_alive()
            with contextlib.suppress(NotFoundError):
                last["pod"] = self.pod(namespace, name)
                return last["pod"] if check(last["pod"]) else None
            return None

        return wait_until(f"pod {namespace}/{name} {what}", probe, timeout, interval=0.15,
                          context=lambda: f"pod: {json.dumps(last.get('pod'))[:3000]}\n"
                                          f"events: {self.events(namespace, name)}")

    def wait_allocated(self, namespace: str, name: str, timeout: float = 30.0) -> Obj:
        """Bound, admitted by its node's kubelet (running), and ``bind-phase: success``."""
        return self.wait_pod(namespace, name, "allocated (bind-phase success, running)",
                             allocated, timeout)

    def admission(self, pod: Obj, timeout: float = 10.0) -> Admission:
        node = pod["spec"]["nodeName"]
        return self.nodes[node].stand_in.wait_admission(key_of(pod), timeout)

    def events(self, namespace: str, name: str) -> list[Obj]:
        answer = self.cluster.request_json(
            "GET", f"/api/v1/namespaces/{quote(namespace)}/events", "list events",
            query=[("fieldSelector", f"involvedObject.name={name}")])
        items: list[Obj] = answer.get("items") or []
        return items

    def delete_pod(self, namespace: str, name: str) -> None:
        """A plain delete (default grace period): a bound pod goes away once its node's
        kubelet finishes it, as on a real node."""
        self.cluster.delete("pods", name, namespace)

    def clear(self, namespace: str, timeout: float = 30.0, *,
              force_after: float | None = None) -> None:
        """Delete every pod of ``namespace`` and wait until they are gone.

        ``force_after``: seconds after which the pods still there are deleted at once
        (grace period 0). A real kubelet deletes a pod only once its containers are
        removed, and when it notices their end before the deletion it leaves them to its
        container GC, which runs once a minute.
        """
        path = f"/api/v1/namespaces/{quote(namespace)}/pods"
        self.cluster.request_json("DELETE", path, "delete pods")
        if force_after is not None:
            with contextlib.suppress(AssertionError):
                wait_until(f"every pod of {namespace} gone", lambda: not self.pods(namespace),
                           force_after, interval=0.2)
            self.cluster.request_json("DELETE", path, "force-delete pods",
                                      query=[("gracePeriodSeconds", "0")])
        wait_until(f"every pod of {namespace} gone", lambda: not self.pods(namespace),
                   timeout, interval=0.2, context=self.logs)

    def create(self, path: str, obj: Mapping[str, Any]) -> Obj:
        """POST any object (a Deployment, a ReplicaSet) to its collection ``path``."""
        return self.cluster.request_json("POST", path, f"create {path}", body=dict(obj))

    def cordon(self, node: str, unschedulable: bool = True) -> None:
        """``kubectl cordon`` (or ``uncordon``)."""
        self.cluster.request_json("PATCH", f"/api/v1/nodes/{quote(node)}", f"cordon {node}",
                                  body={"spec": {"unschedulable": unschedulable}},
                                  content_type="application/merge-patch+json")


def bind_phase(pod: Obj) -> str | None:
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(BIND_PHASE)
    return str(value) if value is not None else None


def allocated(pod: Obj) -> bool:
    """``bind-phase: success`` and running. The agent's phase patch and the stand-in
    kubelet's status patch both follow Allocate, in either order."""
    return bind_phase(pod) == PHASE_SUCCESS and (pod.get("status") or {}).get(
        "phase") == "Running"

