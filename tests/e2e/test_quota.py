"""Namespace GPU quotas through Kubernetes' own ResourceQuota, end to end.

The whole of vgpu (webhook, scheduler, node agents on kubelet stand-ins) runs on a control
plane of this module's own, beside kube-controller-manager running the ResourceQuota,
ReplicaSet and Deployment controllers (tests/controlplane/kube_controllers.py): the
shared control plane has none, and a ReplicaSet controller there would act on what other
tests left behind. Kubernetes 1.20.2's quota admission runs after the mutating webhooks,
so it charges the derived requests the webhook wrote (``requests.vgpu.io/memory-mib``);
the quota controller keeps ``used`` right when pods go; its messages are its own.

Nodes: ``v100`` with four Tesla V100 32 GB, ``t4`` with one T4 16 GB. None advertises a
``vgpu.io/`` resource: vgpu's scheduler binds every pod here regardless.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest

from tests.controlplane.cluster import ControlPlane
from tests.controlplane.kube_controllers import KubeControllers
from tests.e2e.full_stack_support import assignment_of, gpu_container, gpu_pod
from tests.e2e.harness import FullStack, Gpu, NodeSpec, wait_until
from tests.e2e.harness_pods import namespace_for_test
from vgpu import quota_charge
from vgpu.cluster.port import Obj, Selector
from vgpu.config import Config
from vgpu.errors import ClusterError
from vgpu.quantity import parse_whole
from vgpu.quota_charge import Charge, pod_charge
from vgpu_kubectl import inspect_cli, why_cli

V100 = Gpu("Tesla V100-SXM2-32GB", 32768)
T4 = Gpu("Tesla T4", 15360)
NODES = [NodeSpec("v100", (V100,) * 4), NodeSpec("t4", (T4,))]
MEM = quota_charge.QUOTA_PREFIX + quota_charge.MEMORY
VGPUS = quota_charge.QUOTA_PREFIX + quota_charge.VGPUS
CORES = quota_charge.QUOTA_PREFIX + quota_charge.CORES


@pytest.fixture(scope="module")
def cp() -> Iterator[ControlPlane]:
    with ControlPlane() as plane:
        yield plane


@pytest.fixture(scope="module")
def stack(cp: ControlPlane) -> Iterator[FullStack]:
    with KubeControllers(cp, ("resourcequota", "replicaset", "deployment")), \
            FullStack(cp, NODES) as running:
        yield running


@pytest.fixture
def ns(stack: FullStack, request: pytest.FixtureRequest) -> Iterator[str]:
    name = stack.namespace(namespace_for_test(request.node.name))
    yield name
    stack.clear(name)


def create_quota(stack: FullStack, ns: str, name: str, hard: dict[str, str],
                 **spec: Any) -> Obj:
    """A ResourceQuota, once the quota controller has counted it (until then quota
    admission refuses every pod it covers: "status unknown for quota")."""
    stack.create(f"/api/v1/namespaces/{ns}/resourcequotas",
                 {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name},
                  "spec": {"hard": hard, **spec}})
    return wait_until(f"quota {ns}/{name} counted", lambda: _counted(stack, ns, name), 30,
                      interval=0.2)


def _counted(stack: FullStack, ns: str, name: str) -> Obj | None:
    obj = stack.cluster.get("resourcequotas", name, ns)
    used = (obj.get("status") or {}).get("used") or {}
    return obj if set(obj["spec"]["hard"]) <= set(used) else None


def used(stack: FullStack, ns: str, name: str) -> dict[str, int]:
    obj = stack.cluster.get("resourcequotas", name, ns)
    return {k: parse_whole(v) for k, v in obj["status"]["used"].items()}


def refused(stack: FullStack, ns: str, pod: dict[str, Any]) -> str:
    with pytest.raises(ClusterError) as caught:
        stack.create_pod(ns, pod)
    return str(caught.value)


def derived(pod: Obj, container: str, part: str = "requests") -> dict[str, str]:
    for c in pod["spec"].get("containers", []) + pod["spec"].get("initContainers", []):
        if c["name"] == container:
            values = (c.get("resources") or {}).get(part) or {}
            return {k: v for k, v in values.items() if k in quota_charge.NAMES}
    raise AssertionError(f"no container {container}")


def test_quota_admission_charges_the_derived_requests(stack: FullStack, ns: str) -> None:
    create_quota(stack, ns, "gpu", {MEM: "100000", VGPUS: "20", CORES: "1000"})
    pod = gpu_pod("train", gpu_container("main", gpu=2, gpumem=3000, gpucores=30))
    pod["spec"]["initContainers"] = [gpu_container("warm", gpu=1, gpumem=1000)]
    created = stack.create_pod(ns, pod)
    # As Kubernetes counts init containers (and HAMi): the larger of the init container
    # and the app containers; the init container's slice nests into one of the app
    # container's, so the pod is charged its app containers alone, on the app container.
    assert derived(created, "main") == derived(created, "main", "limits") == {
        quota_charge.VGPUS: "2", quota_charge.MEMORY: "6k", quota_charge.CORES: "60"}
    assert derived(created, "warm") == {}
    # Quota admission counted it as it admitted it: 2 × 3000 MiB.
    assert used(stack, ns, "gpu") == {MEM: 6000, VGPUS: 2, CORES: 60}
    granted = assignment_of(stack.wait_allocated(ns, "train")).containers
    assert sum(g.memory_mib for g in granted["main"]) == 6000
    assert {g.uuid for g in granted.get("warm", ())} <= {g.uuid for g in granted["main"]}

    # Two GPU sizes: a percentage is charged on the larger one (never under-charged) ...
    stack.create_pod(ns, gpu_pod("half", gpu_container(gpu=1, gpumem_percentage=50)))
    assert used(stack, ns, "gpu")[MEM] == 6000 + V100.memory_mib // 2
    # ... and on the T4 when its annotations allow only T4s (the webhook resolves it).
    stack.create_pod(ns, gpu_pod("half-t4", gpu_container(gpu=1, gpumem_percentage=50),
                                 annotations={"nvidia.com/use-gputype": "T4"}))
    assert used(stack, ns, "gpu")[MEM] == 6000 + V100.memory_mib // 2 + T4.memory_mib // 2


def test_a_quota_admits_up_to_it_refuses_the_next_and_a_deletion_lets_it_in(
        stack: FullStack, ns: str) -> None:
    create_quota(stack, ns, "gpu", {MEM: "10000"})
    for name in ("p1", "p2"):
        stack.create_pod(ns, gpu_pod(name, gpu_container(gpu=1, gpumem=4000)))
    message = refused(stack, ns, gpu_pod("p3", gpu_container(gpu=1, gpumem=4000)))
    # Kubernetes' own words, from its quota admission.
    assert ('pods "p3" is forbidden: exceeded quota: gpu, requested: '
            'requests.vgpu.io/memory-mib=4k, used: requests.vgpu.io/memory-mib=8k, '
            'limited: requests.vgpu.io/memory-mib=10k') in message
    stack.wait_allocated(ns, "p1")
    stack.delete_pod(ns, "p1")
    wait_until("the quota controller gives p1's share back",
               lambda: used(stack, ns, "gpu")[MEM] == 4000, 30, interval=0.2)
    stack.create_pod(ns, gpu_pod("p3", gpu_container(gpu=1, gpumem=4000)))
    stack.wait_allocated(ns, "p3")
    assert used(stack, ns, "gpu")[MEM] == 8000


def test_a_deployments_replicaset_reports_the_refusal(stack: FullStack, ns: str) -> None:
    create_quota(stack, ns, "gpu", {MEM: "5000"})
    template = {"metadata": {"labels": {"app": "web"}},
                "spec": {"automountServiceAccountToken": False,
                         "containers": [gpu_container("server", gpu=1, gpumem=2000)]}}
    apps = f"/apis/apps/v1/namespaces/{quote(ns)}"
    stack.create(f"{apps}/deployments", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                 "template": template}})
    try:
        def failed_create() -> list[Obj]:
            return [e for e in stack.cluster.list("events", Selector(namespace=ns)).items
                    if e.get("reason") == "FailedCreate"
                    and "exceeded quota: gpu" in e.get("message", "")]

        (event, *_) = wait_until("the ReplicaSet records FailedCreate", failed_create, 60,
                                 interval=0.3)
        assert event["involvedObject"]["kind"] == "ReplicaSet"
        assert event["involvedObject"]["name"].startswith("web-")
        assert "requested: requests.vgpu.io/memory-mib=2k, used: " \
               "requests.vgpu.io/memory-mib=4k, limited: requests.vgpu.io/memory-mib=5k" \
               in event["message"]
        pods = stack.pods(ns)
        assert len(pods) == 2 and all(pod_charge(p) == Charge(1, 2000, 0) for p in pods)
        (rs,) = stack.cluster.list("replicasets", Selector(namespace=ns)).items
        (failure,) = [c for c in rs["status"].get("conditions") or []
                      if c["type"] == "ReplicaFailure"]
        assert failure["reason"] == "FailedCreate" and "exceeded quota: gpu" in \
            failure["message"]

        # `kubectl vgpu why web`: by the Deployment's name, in plain words.
        report = why_cli.collect(stack.cluster, Config(), ns, "web", dt.datetime.now(dt.UTC))
        assert report.state == "quota-refused"
        assert f"exceed ResourceQuota gpu in {ns}" in report.summary
        assert report.quota == ("GPU memory: asks for 2000 MiB, but 4000 of the 5000 MiB "
                                "allowed are in use, 1000 MiB left "
                                "(requests.vgpu.io/memory-mib)",)
        # `kubectl vgpu inspect`: the quota, what is used, what runs against it.
        rows, _ = inspect_cli.collect_quotas(stack.cluster)
        (row,) = [r for r in rows if r.namespace == ns]
        assert (row.lines[0].hard, row.lines[0].used) == (5000, 4000)
        assert row.charged == Charge(2, 4000, 0)
    finally:
        stack.cluster.request_json("PATCH", f"{apps}/deployments/web", "scale web to 0",
                                   body={"spec": {"replicas": 0}},
                                   content_type="application/merge-patch+json")
        wait_until("web scaled to 0", lambda: not stack.pods(ns), 60, interval=0.3)


def test_a_quota_scoped_by_priority_class(stack: FullStack, ns: str) -> None:
    low, high = f"gpu-low-{stack.tag}", f"gpu-high-{stack.tag}"
    for name, value in ((low, 100), (high, 1000)):
        stack.create("/apis/scheduling.k8s.io/v1/priorityclasses", {
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value})
    create_quota(stack, ns, "low", {MEM: "3000"}, scopeSelector={"matchExpressions": [
        {"scopeName": "PriorityClass", "operator": "In", "values": [low]}]})

    def pod(name: str, priority: str | None) -> dict[str, Any]:
        obj = gpu_pod(name, gpu_container(gpu=1, gpumem=2000))
        if priority:
            obj["spec"]["priorityClassName"] = priority
        return obj

    stack.create_pod(ns, pod("low-1", low))
    assert "exceeded quota: low" in refused(stack, ns, pod("low-2", low))
    # Out of the quota's scope: not charged to it.
    stack.create_pod(ns, pod("high-1", high))
    stack.create_pod(ns, pod("none-1", None))
    assert used(stack, ns, "low")[MEM] == 2000
    for name in ("low-1", "high-1", "none-1"):
        stack.wait_allocated(ns, name)


def test_a_limitrange_caps_a_containers_derived_memory(stack: FullStack, ns: str) -> None:
    stack.create(f"/api/v1/namespaces/{quote(ns)}/limitranges", {
        "apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "gpu"},
        "spec": {"limits": [{"type": "Container", "max": {quota_charge.MEMORY: "8000"}}]}})
    message = refused(stack, ns, gpu_pod("big", gpu_container(gpu=2, gpumem=5000)))
    assert "maximum vgpu.io/memory-mib usage per Container is 8k" in message
    stack.create_pod(ns, gpu_pod("fits", gpu_container(gpu=1, gpumem=5000)))
    stack.wait_allocated(ns, "fits")


def test_a_pod_the_webhook_never_saw_is_not_charged(stack: FullStack) -> None:
    """A GPU pod created where vgpu's webhook does not act (before it was installed, say)
    carries no derived requests; a quota made later counts nothing of it."""
    ns = namespace_for_test("before-vgpu")
    stack.cp.ensure_namespace(ns)  # not labelled for this stack's webhook
    created = stack.create_pod(ns, gpu_pod("old", gpu_container(gpu=2, gpumem=3000)))
    assert derived(created, "main") == {}
    create_quota(stack, ns, "gpu", {MEM: "1000"})
    assert used(stack, ns, "gpu") == {MEM: 0}
    stack.cluster.delete("pods", "old", ns)
