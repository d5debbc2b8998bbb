"""No tenant can take another's slice (issue 24), on the real API server.

A tenant (``kubectl --as tenant-a``, with a Role of a namespace's pods, as a team's
``edit`` gives them: the control plane authorizes with RBAC) tries every route around the
scheduler and every edit of vgpu's annotations the issue found; each is refused with a
message saying what to do instead, the GPU placed before the table keeps its slice, and
nothing is over-committed. Then the defences behind admission, with admission out of the
way (a namespace the webhook does not watch, an admin's edit): the scheduler keeps counting
a slice whose annotation went, and the node agent refuses an Allocate for a pod it did not
place while the pod in allocation gets its own grant (kubelet stand-in; the real kubelet's
case is in test_real_node_tenant.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.controlplane.cluster import ControlPlane
from tests.e2e.full_stack_support import assignment_of, failed_scheduling, gpu_container, gpu_pod
from tests.e2e.harness import FullStack, Gpu, NodeSpec, bind_phase, wait_until
from tests.e2e.harness_pods import namespace_for_test
from vgpu.annotations import ASSIGNMENT, BIND_PHASE, PHASE_ALLOCATING, PHASE_SUCCESS
from vgpu.codecs import Assignment, GrantedDevice, encode_assignment
from vgpu.usage import claimed, tally

A100 = Gpu("NVIDIA A100-SXM4-40GB", 40960)
TENANT = "tenant-a"


@pytest.fixture(scope="module")
def stack(control_plane: ControlPlane) -> Iterator[FullStack]:
    with FullStack(control_plane, [NodeSpec("gpu", (A100, A100))]) as running:
        yield running


def tenant_role(stack: FullStack, ns: str) -> None:
    """What a team's edit role gives on pods: no binding, no status, no eviction."""
    rbac = "/apis/rbac.authorization.k8s.io/v1/namespaces"
    stack.create(f"{rbac}/{ns}/roles", {
        "metadata": {"name": "pods"},
        "rules": [{"apiGroups": [""], "resources": ["pods"],
                   "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}]})
    stack.create(f"{rbac}/{ns}/rolebindings", {
        "metadata": {"name": "pods"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pods"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                      "name": TENANT}]})


@pytest.fixture(scope="module")
def ns(stack: FullStack) -> Iterator[str]:
    name = stack.namespace(namespace_for_test("tenant-boundary"))
    tenant_role(stack, name)
    yield name
    stack.clear(name)


def as_tenant(stack: FullStack, ns: str, *args: str, body: Any = None) -> tuple[int, str]:
    proc = stack.cp.kubectl("--as", TENANT, "-n", ns, *args, check=False,
                            input_text=None if body is None else json.dumps(body))
    return proc.returncode, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def victim(stack: FullStack, ns: str) -> dict[str, Any]:
    """The tenant's own GPU pod, placed and allocated before anything hostile is tried."""
    code, out = as_tenant(stack, ns, "create", "-f", "-",
                          body=gpu_pod("victim", gpu_container(gpu=1, gpumem=30000)))
    assert code == 0, out
    return stack.wait_allocated(ns, "victim")


def pod_with(name: str, **spec: Any) -> dict[str, Any]:
    body = gpu_pod(name)
    annotations = spec.pop("annotations", None)
    if annotations:
        body["metadata"]["annotations"] = annotations
    body["spec"].update(spec)
    return body


FORGED = encode_assignment(Assignment("any", {"main": (GrantedDevice("GPU-x", 40960, 100),)}))
CPU_ONLY = {"name": "main", "image": "busybox", "resources": {"limits": {"cpu": "100m"}}}

#: (what is tried, kubectl arguments, body, a fragment of the refusal)
CREATES = [
    ("a GPU pod bound to a node at creation",
     pod_with("t-node", nodeName="NODE"), "spec.nodeName is set to"),
    ("a GPU pod naming another scheduler",
     pod_with("t-sched", schedulerName="volcano"), "spec.schedulerName is 'volcano'"),
    ("a privileged GPU container",
     pod_with("t-priv", containers=[{**gpu_container(gpu=1),
                                     "securityContext": {"privileged": True}}]),
     "is privileged in a pod that asks for vGPUs"),
    ("a privileged sidecar in a GPU pod",
     pod_with("t-side", containers=[gpu_container(gpu=1),
                                    {**CPU_ONLY, "name": "side",
                                     "securityContext": {"privileged": True}}]),
     "container 'side' is privileged"),
    ("a GPU container naming every GPU",
     pod_with("t-env", containers=[{**gpu_container(gpu=1), "env": [
         {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}]),
     "sets NVIDIA_VISIBLE_DEVICES"),
    ("a GPU pod carrying a forged assignment",
     pod_with("t-forge", annotations={ASSIGNMENT: FORGED, BIND_PHASE: PHASE_ALLOCATING}),
     "belong to vgpu"),
    ("a pod asking for no GPU carrying a forged assignment",
     pod_with("t-cpu-forge", containers=[CPU_ONLY],
              annotations={ASSIGNMENT: FORGED, BIND_PHASE: PHASE_SUCCESS}),
     "belong to vgpu"),
]


@pytest.mark.parametrize(("what", "body", "refusal"), CREATES, ids=[c[0] for c in CREATES])
def test_a_hostile_creation_is_refused(stack: FullStack, ns: str, victim: dict[str, Any], *,
                                       what: str, body: dict[str, Any], refusal: str) -> None:
    if body["spec"].get("nodeName") == "NODE":
        body["spec"]["nodeName"] = victim["spec"]["nodeName"]
    code, out = as_tenant(stack, ns, "create", "-f", "-", body=body)
    assert code != 0, f"{what} was admitted: {out}"
    assert "denied the request" in out and refusal in out, out
    assert "Traceback" not in out


EDITS = [
    ("remove the assignment of a running pod",
     ("annotate", "pod", "victim", f"{ASSIGNMENT}-"), "belongs to vgpu"),
    ("rewrite the assignment",
     ("annotate", "pod", "victim", "--overwrite", f"{ASSIGNMENT}={FORGED}"), "belongs to vgpu"),
    ("set the bind phase back to allocating",
     ("annotate", "pod", "victim", "--overwrite", f"{BIND_PHASE}={PHASE_ALLOCATING}"),
     "belongs to vgpu"),
    ("remove every vgpu annotation with a merge patch",
     ("patch", "pod", "victim", "--type", "merge", "-p",
      json.dumps({"metadata": {"annotations": {ASSIGNMENT: None, BIND_PHASE: None}}})),
     "belong to vgpu"),
    ("remove the whole annotation map with a JSON patch",
     ("patch", "pod", "victim", "--type", "json", "-p",
      json.dumps([{"op": "remove", "path": "/metadata/annotations"}])), "belong to vgpu"),
    ("add a webhook record of its own",
     ("annotate", "pod", "victim", "--overwrite", "vgpu.io/admission={}"), "belongs to vgpu"),
    ("bind its own pod with annotations of its own", ("create", "-f", "-"), "forbidden"),
]


@pytest.mark.parametrize(("what", "args", "refusal"), EDITS, ids=[e[0] for e in EDITS])
def test_a_hostile_edit_is_refused(stack: FullStack, ns: str, victim: dict[str, Any], *,
                                   what: str, args: tuple[str, ...], refusal: str) -> None:
    body = None
    if what.startswith("bind"):
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": {
            "name": "victim", "annotations": {ASSIGNMENT: FORGED}},
            "target": {"apiVersion": "v1", "kind": "Node", "name": victim["spec"]["nodeName"]}}
    code, out = as_tenant(stack, ns, *args, body=body)
    assert code != 0, f"{what} went through: {out}"
    assert refusal in out, out


def test_the_status_subresource_is_not_the_tenants(stack: FullStack, ns: str,
                                                   victim: dict[str, Any]) -> None:
    """pods/status can change annotations (1.20.2 stores them); a tenant has no right to
    it, and the 1.30+ policy checks it too."""
    for verb, resource in (("patch", ("pods", "--subresource=status")),
                           ("create", ("pods", "--subresource=binding")),
                           ("create", ("bindings",))):
        _, out = as_tenant(stack, ns, "auth", "can-i", verb, *resource)
        assert out.strip() == "no", (resource, out)
    _, out = as_tenant(stack, ns, "auth", "can-i", "patch", "pods")
    assert out.strip() == "yes", out  # the question is asked right


ALLOWED = [
    ("relabel a running GPU pod", ("label", "pod", "victim", "team=a")),
    ("set a user annotation", ("annotate", "pod", "victim",
                               "vgpu.io/gpu-scheduler-policy=spread")),
    ("set an annotation of its own", ("annotate", "pod", "victim", "note=mine")),
]


@pytest.mark.parametrize(("what", "args"), ALLOWED, ids=[a[0] for a in ALLOWED])
def test_what_a_tenant_may_still_do(stack: FullStack, ns: str, victim: dict[str, Any], *,
                                    what: str, args: tuple[str, ...]) -> None:
    code, out = as_tenant(stack, ns, *args)
    assert code == 0, out


def test_nothing_is_disturbed_or_over_committed(stack: FullStack, ns: str,
                                                victim: dict[str, Any]) -> None:
    """After the table: the victim's slice is as the scheduler gave it, it runs, no other
    pod was admitted, and no GPU holds more than it has."""
    now = stack.pod(ns, "victim")
    assert now["metadata"]["annotations"][ASSIGNMENT] == \
        victim["metadata"]["annotations"][ASSIGNMENT]
    assert bind_phase(now) == PHASE_SUCCESS and now["status"]["phase"] == "Running"
    assert {p["metadata"]["name"] for p in stack.pods(ns)} == {"victim"}
    held = [a for p in stack.pods(ns) if (a := claimed(p, {stack.scheduler_name}))]
    assert all(u.memory_mib <= A100.memory_mib for u in tally(held).values())


# --- behind admission: what holds when it is out of the way ------------------------------

@pytest.fixture(scope="module")
def unwatched(stack: FullStack) -> Iterator[str]:
    """A namespace the stack's webhook does not see: as a cluster whose webhook is down
    under the 1.20 overlay's failurePolicy Ignore."""
    name = namespace_for_test("tenant-unwatched")
    stack.cp.ensure_namespace(name)
    yield name
    stack.clear(name)


def test_the_scheduler_counts_only_what_its_bindings_gave(
        stack: FullStack, ns: str, unwatched: str, victim: dict[str, Any]) -> None:
    """The issue: a pod asking for no GPU with a forged assignment blocked both GPUs of a
    node (40000 MiB each), and removing the annotation of a running pod freed its slice in
    the scheduler's view. With admission out of the way, neither moves the scheduler."""
    node = victim["spec"]["nodeName"]
    everything = encode_assignment(Assignment(node, {"main": tuple(
        GrantedDevice(uuid, A100.memory_mib, 100) for uuid in stack.nodes[node].spec.uuids())}))
    for name, scheduler in (("forger-other", "default-scheduler"),
                            ("forger-own", stack.scheduler_name)):
        stack.create_pod(unwatched, {"metadata": {"name": name, "annotations": {
            ASSIGNMENT: everything, BIND_PHASE: PHASE_SUCCESS}}, "spec": {
            "nodeName": node, "schedulerName": scheduler, "containers": [CPU_ONLY]}})
    stack.create_pod(ns, gpu_pod("probe", gpu_container(gpu=1, gpumem=30000)))
    probe = stack.wait_allocated(ns, "probe")
    (theirs,) = assignment_of(victim).containers["main"]
    (mine,) = assignment_of(probe).containers["main"]
    assert mine.uuid != theirs.uuid
    # An admin (a writer: the webhook lets it) strips the victim's assignment.
    stack.cluster.patch_annotations("pods", "victim", {ASSIGNMENT: None}, ns)
    stack.create_pod(ns, gpu_pod("overflow", gpu_container(gpu=1, gpumem=30000)))
    wait_until("overflow reported unschedulable",
               lambda: failed_scheduling(stack, ns, "overflow"), 30, context=stack.logs)
    assert not stack.pod(ns, "overflow")["spec"].get("nodeName")
    for name in ("probe", "overflow"):
        stack.delete_pod(ns, name)


def test_an_intruder_gets_no_grant_and_the_pod_in_allocation_completes(
        stack: FullStack, ns: str, unwatched: str, victim: dict[str, Any]) -> None:
    """The issue's first case on the kubelet stand-in: a GPU pod created on the node with
    another scheduler's name is admitted by the kubelet while a vgpu pod is in allocation;
    the agent used to serve it that pod's grant. Now its Allocate is refused (the kubelet
    fails it) and the vgpu pod's own Allocate gets the grant."""
    node = victim["spec"]["nodeName"]
    kubelet = stack.nodes[node].stand_in
    with kubelet.paused():
        stack.create_pod(unwatched, {"metadata": {"name": "intruder"}, "spec": {
            "nodeName": node, "schedulerName": "x", "containers": [gpu_container(gpu=1)]}})
        code, out = as_tenant(stack, ns, "create", "-f", "-",
                              body=gpu_pod("victim2", gpu_container(gpu=1, gpumem=1000)))
        assert code == 0, out
        bound = stack.wait_pod(ns, "victim2", "bound, in allocation",
                               lambda p: bind_phase(p) == PHASE_ALLOCATING)
    refused = stack.admission(stack.pod(unwatched, "intruder"))
    assert refused.error is not None and "no vgpu scheduler placed it" in refused.error
    stack.wait_pod(unwatched, "intruder", "failed by its kubelet",
                   lambda p: p["status"].get("phase") == "Failed")
    served = stack.admission(bound)
    assert served.error is None
    (granted,) = assignment_of(bound).containers["main"]
    env = served.containers["main"].envs
    assert env["NVIDIA_VISIBLE_DEVICES"] == granted.uuid
    assert env["CUDA_DEVICE_MEMORY_LIMIT_0"] == "1000m"
    stack.wait_allocated(ns, "victim2")
    reasons = [e["reason"] for e in stack.events(unwatched, "intruder")]
    assert "AllocateRefused" in reasons
