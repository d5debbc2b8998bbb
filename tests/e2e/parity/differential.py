"""The randomized differential test's runner: a case laid out on the test API server for
kube-scheduler v1.20.2 and for vgpu-scheduler, each layout on nodes and namespaces of its
own, both at once; what each made of it; whether they agree; and, when they do not,
whether a documented version difference explains it.

Agreement: both leave the pod pending, or both bind it to the same node, or each binds it
to a node the other also accepts (asked by laying the case out again with every other node
full: score ties and policies may pick different nodes, the rules may not); in a large case
(:func:`tests.parity.large_cases.generate_large`) both bind it to the one node its soft
rules single out among all the feasible ones. A
disagreement is explained by a documented difference (:data:`DIFFERENCES`) when, with
that difference's neutralizing change, the two agree and vgpu decides as before.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from tests.e2e.parity.support import KUBE, VGPU
from tests.parity.case_objects import NEW, Names, neutralized, only_node, render
from tests.parity.random_cases import (
    COMPLETED,
    RUNTIME_CLASS,
    RUNTIME_OVERHEAD,
    TERMINATING,
    Case,
)
from vgpu.errors import ClusterError, ConflictError
from vgpu.kube import adapter

#: How long a pod with a FailedScheduling event must stay unbound to count as pending
#: (a node or pod the scheduler had not seen yet when it first tried wakes it at once).
QUIET = 1.5
TIMEOUT = 60.0


@dataclass(frozen=True)
class Outcome:
    #: The index of the node the pod was bound to; None: pending.
    node: int | None
    #: The latest FailedScheduling message ("" when bound).
    message: str = ""

    def __str__(self) -> str:
        return f"bound to node {self.node}" if self.node is not None else \
            f"pending ({self.message})"


@dataclass(frozen=True)
class Verdict:
    agree: bool
    kube: Outcome
    vgpu: Outcome
    #: Why they disagree, or how agreement was checked.
    detail: str = ""


class Runner:
    def __init__(self, kube: adapter.KubeCluster) -> None:
        self.kube = kube
        self._pool = ThreadPoolExecutor(4, thread_name_prefix="differential")

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def ensure_runtime_class(self) -> None:
        """The RuntimeClass whose overhead cases ask for (node.k8s.io/v1 since 1.20)."""
        with contextlib.suppress(ConflictError):
            self.kube.request_json("POST", "/apis/node.k8s.io/v1/runtimeclasses",
                                   "create runtimeclass", body={
                                       "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                                       "metadata": {"name": RUNTIME_CLASS}, "handler": "runc",
                                       "overhead": {"podFixed": RUNTIME_OVERHEAD}})

    # -- one layout ------------------------------------------------------------------------

    def _namespace(self, name: str) -> None:
        self.kube.request_json("POST", "/api/v1/namespaces", "create namespace", body={
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        self.kube.request_json("POST", f"/api/v1/namespaces/{name}/serviceaccounts",
                               "create serviceaccount", body={
                                   "apiVersion": "v1", "kind": "ServiceAccount",
                                   "metadata": {"name": "default"}})

    def lay_out(self, case: Case, scheduler: str) -> Outcome:
        run = uuid.uuid4().hex[:8]
        names = Names(run, f"diff-{run}", f"diff-{run}-o", scheduler)
        nodes, existing, new = render(case, names)
        try:
            for namespace in (names.namespace, names.other):
                self._namespace(namespace)
            for node in nodes:
                self.kube.create("nodes", node)
            for pod, state in existing:
                self._existing(pod, state)
            # The scheduler's node watch is not its pod watch: give it a moment to see
            # the nodes before the pod arrives (a late one wakes the pod anyway).
            time.sleep(0.2)
            self.kube.create("pods", new)
            return self._outcome(names, [n["metadata"]["name"] for n in nodes])
        finally:
            self._pool.submit(self._clean, nodes, existing, new)

    def _existing(self, pod: dict[str, Any], state: str) -> None:
        made = self.kube.create("pods", pod)
        md = made["metadata"]
        if state == COMPLETED:
            self.kube.patch_status("pods", md["name"], {"phase": "Succeeded"},
                                   md["namespace"])
        elif state == TERMINATING:  # the finalizer holds it, deletionTimestamp set
            self._delete_pod(md["namespace"], md["name"])

    def _delete_pod(self, namespace: str, name: str) -> None:
        with contextlib.suppress(ClusterError):
            self.kube.request_json("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}",
                                   "delete pod", query=[("gracePeriodSeconds", "0")])

    def _outcome(self, names: Names, node_names: list[str]) -> Outcome:
        path = f"/api/v1/namespaces/{names.namespace}/pods/{NEW}"
        events = f"/api/v1/namespaces/{names.namespace}/events"
        deadline = time.monotonic() + TIMEOUT
        pending_since: float | None = None
        message = ""
        while time.monotonic() < deadline:
            pod = self.kube.request_json("GET", path, "get pod")
            node = pod["spec"].get("nodeName")
            if node:
                return Outcome(node_names.index(node))
            now = time.monotonic()
            if pending_since is None:
                found = self.kube.request_json("GET", events, "list events", query=[
                    ("fieldSelector", f"involvedObject.name={NEW},reason=FailedScheduling")])
                if found["items"]:
                    pending_since = now
                    latest = max(found["items"], key=lambda e: e.get("lastTimestamp") or "")
                    message = latest["message"]
            elif now - pending_since >= QUIET:
                return Outcome(None, message)
            time.sleep(0.05)
        raise AssertionError(f"{names.scheduler}: neither bound nor refused within "
                             f"{TIMEOUT:g} s")

    def _clean(self, nodes: list[dict[str, Any]],
               existing: list[tuple[dict[str, Any], str]], new: dict[str, Any]) -> None:
        for pod, state in [*existing, (new, "")]:
            md = pod["metadata"]
            if state == TERMINATING:
                with contextlib.suppress(ClusterError):
                    self.kube.request_json(
                        "PATCH", f"/api/v1/namespaces/{md['namespace']}/pods/{md['name']}",
                        "release pod", body={"metadata": {"finalizers": None}},
                        content_type="application/merge-patch+json")
            self._delete_pod(md["namespace"], md["name"])
        for node in nodes:
            with contextlib.suppress(ClusterError):
                self.kube.delete("nodes", node["metadata"]["name"])

    # -- both schedulers -------------------------------------------------------------------

    def both(self, case: Case) -> tuple[Outcome, Outcome]:
        kube = self._pool.submit(self.lay_out, case, KUBE)
        ours = self.lay_out(case, VGPU)
        return kube.result(), ours

    def verdict(self, case: Case) -> Verdict:
        kube, ours = self.both(case)
        if case.best is not None:
            # Every feasible node is weighed by both: the soft rules' one choice, or not.
            missed = [f"{who} binds to node {node}, not {case.best}" for who, node in (
                ("kube-scheduler", kube.node), ("vgpu-scheduler", ours.node))
                if node != case.best]
            return Verdict(not missed, kube, ours, "; ".join(missed) or
                           f"both weigh every feasible node: node {case.best}")
        if kube.node == ours.node:
            return Verdict(True, kube, ours)
        if kube.node is None or ours.node is None:
            return Verdict(False, kube, ours, "one binds, the other does not")
        # Both bound, to different nodes: each node must be one the other accepts.
        kube_there = self._pool.submit(self.lay_out, only_node(case, ours.node), KUBE)
        ours_there = self.lay_out(only_node(case, kube.node), VGPU)
        refused = [f"{who} refuses node {node} alone" for who, node, there in (
            ("kube-scheduler", ours.node, kube_there.result()),
            ("vgpu-scheduler", kube.node, ours_there)) if there.node is None]
        if refused:
            return Verdict(False, kube, ours, "; ".join(refused))
        return Verdict(True, kube, ours, "different nodes, each accepted by the other")

    def explain(self, case: Case, verdict: Verdict) -> str | None:
        """The documented differences that explain a disagreement, or None."""
        for differences, changed in neutralized(case):
            again = self.verdict(changed)
            if again.agree and (again.vgpu.node is None) == (verdict.vgpu.node is None):
                return ", ".join(d.key for d in differences)
        return None

