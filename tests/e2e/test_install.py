"""vgpu installed the way docs/operator-guide.md#install tells a user, on a real cluster.

The cluster (:class:`tests.controlplane.real_cluster.RealCluster`) is Kubernetes 1.20.2
built from Debian's sources: the control plane with kube-controller-manager and
kube-scheduler, one node with the kubelet, containerd, a CNI bridge and kube-proxy. vgpu's
image (``tests/image/build.sh``) is imported into the node's containerd; the user's
kustomization names the base (the 1.20 fake-GPU overlay) and pins the image by digest; the
control plane's kubectl applies it. Everything then runs as pods, in order on one install:
pods, the operator's tools, metrics, stolen tokens, an upgrade, an uninstall, a reinstall.
Nothing here knows which webhooks ``manifests/`` registers: each is checked the same way.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.controlplane.real_cluster import RealCluster
from tests.e2e.harness_processes import wait_until
from tests.e2e.install_probes import (
    metrics_show_the_grants,
    reader_token,
    scrape,
    stolen_agent_token_writes_only_its_own_node,
    stolen_scheduler_token_cannot_patch_a_pod,
)
from tests.e2e.install_support import (
    AGENT_NAMESPACE,
    GPU,
    IMAGE,
    NAMESPACE,
    NODE,
    TAG,
    UPGRADE_TAG,
    WORKLOADS,
    PodsMeanwhile,
    UserKustomization,
    api,
    assignment,
    component_pods,
    container,
    create,
    ensure_image,
    env_of,
    gpu_pod,
    import_image,
    kubectl_vgpu,
    rollouts,
    running,
    sample_sum,
    second_release,
    slices_per_gpu,
    webhook_configurations,
)
from tests.e2e.real_node_support import expected_env
from vgpu import codecs, meta, pods
from vgpu.annotations import NODE_GPUS, NODE_HEARTBEAT
from vgpu.cluster.port import Obj, Selector
from vgpu.codecs import decode_inventory
from vgpu.pod_history import ADMISSION

RELEASES: dict[str, str] = {}  # tag: digest of the images on the node


@pytest.fixture(scope="module")
def cluster() -> Iterator[RealCluster]:
    archive = ensure_image()  # a build, when there is one, before anything is timed
    upgrade = second_release(archive)
    with RealCluster(NODE) as running_cluster:
        RELEASES[TAG] = import_image(running_cluster, archive, TAG)
        RELEASES[UPGRADE_TAG] = import_image(running_cluster, upgrade, UPGRADE_TAG)
        yield running_cluster


@pytest.fixture(scope="module")
def user(cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory) -> UserKustomization:
    """The steps of docs/operator-guide.md#install, as written there: label the GPU node
    (and, on 1.20, kube-system), write the kustomization, apply it."""
    cluster.kubectl("label", "node", NODE, "gpu=on")
    cluster.kubectl("label", "namespace", "kube-system",
                    "kubernetes.io/metadata.name=kube-system")
    folder = UserKustomization(tmp_path_factory.mktemp("operator") / "my-vgpu")
    folder.write(RELEASES[TAG])
    cluster.kubectl("apply", "-k", str(folder.folder))
    cluster.kubectl("create", "namespace", WORKLOADS)
    return folder


def test_the_certs_job_completes_and_the_ca_lands_in_every_webhook_configuration(
        cluster: RealCluster, user: UserKustomization) -> None:
    cluster.kubectl("wait", "-n", NAMESPACE, "--for=condition=complete", "job/vgpu-certs",
                    "--timeout=240s", timeout=270)
    ca = cluster.kubectl("get", "secret", "-n", NAMESPACE, "vgpu-webhook-tls", "-o",
                         "jsonpath={.data.ca\\.crt}").stdout
    assert ca
    configurations = webhook_configurations(cluster, user)
    assert configurations
    for config in configurations:
        stored = json.loads(cluster.kubectl(
            "get", config["kind"].lower(), config["metadata"]["name"], "-o", "json").stdout)
        for hook in stored["webhooks"]:
            # Called through vgpu's own Service, with the CA the Job made.
            assert hook["clientConfig"]["service"]["namespace"] == NAMESPACE, hook["name"]
            assert hook["clientConfig"].get("caBundle") == ca, hook["name"]


def test_the_components_become_ready_the_scheduler_leads_and_the_agent_registers(
        cluster: RealCluster, user: UserKustomization) -> None:
    rollouts(cluster, user)
    port = api(cluster)
    schedulers = {meta.name(p) for p in component_pods(port, "scheduler")}
    holder = wait_until("a scheduler holds the Lease", lambda: (
        port.get("leases", "vgpu-scheduler", NAMESPACE).get("spec") or {}).get(
        "holderIdentity"), 60, interval=0.5)
    assert holder in schedulers
    # The agent, in its pod, registered with the kubelet (20 = 2 fake GPUs x split 10)
    # and published the inventory on the Node.
    def offered() -> Obj | None:
        node = port.get("nodes", NODE)
        return node if node["status"]["allocatable"].get(GPU) == "20" else None

    node = wait_until("the kubelet offers the agent's devices", offered, 120, interval=0.5,
                      context=cluster.logs)
    assert len(decode_inventory(meta.annotations_of(node)[NODE_GPUS]).devices) == 2
    # The webhook's Service has its pods behind it, and the node's kube-proxy serves it.
    endpoints = json.loads(cluster.kubectl("get", "endpoints", "-n", NAMESPACE,
                                           "vgpu-webhook", "-o", "json").stdout)
    ready = {a["targetRef"]["name"] for subset in endpoints.get("subsets", [])
             for a in subset.get("addresses", [])}
    assert ready == {meta.name(p) for p in component_pods(port, "webhook")}
    service = json.loads(cluster.kubectl("get", "service", "-n", NAMESPACE, "vgpu-webhook",
                                         "-o", "json").stdout)
    assert service["spec"]["clusterIP"] in cluster.node.iptables_nat()


def test_an_unmodified_gpu_pod_is_mutated_scheduled_allocated_and_runs(
        cluster: RealCluster, user: UserKustomization) -> None:
    create(cluster, WORKLOADS, gpu_pod("notebook", container("main", gpu=1, gpumem=3000)))
    pod = running(cluster, WORKLOADS, "notebook")
    assert pod["spec"]["schedulerName"] == "vgpu-scheduler"
    assert "vgpu-scheduler" in meta.annotations_of(pod)[ADMISSION]
    assert pods.node_name(pod) == NODE
    got = assignment(pod)
    assert [s.memory_mib for s in got.containers["main"]] == [3000]
    env = env_of(cluster, WORKLOADS, "notebook", "main")
    assert expected_env(got, "main").items() <= env.items()


def test_a_two_container_pod_and_a_percentage_request_get_their_grants(
        cluster: RealCluster, user: UserKustomization) -> None:
    create(cluster, WORKLOADS, gpu_pod("pair", container("a", gpu=1, gpumem=2000, gpucores=30),
                                       container("b", gpu=1, gpumem_percentage=25)))
    pod = running(cluster, WORKLOADS, "pair")
    got = assignment(pod)
    # Every GPU has 40960 MiB: the webhook turns the percentage into MiB at admission.
    limits = pod["spec"]["containers"][1]["resources"]["limits"]
    assert limits["nvidia.com/gpumem"] == "10240"
    assert [(s.memory_mib, s.cores) for s in got.containers["a"]] == [(2000, 30)]
    assert [s.memory_mib for s in got.containers["b"]] == [10240]
    for name in ("a", "b"):
        env = env_of(cluster, WORKLOADS, "pair", name)
        assert expected_env(got, name).items() <= env.items()


def test_kubectl_vgpu_inspect_and_why_answer_against_the_cluster(
        cluster: RealCluster, user: UserKustomization) -> None:
    inspect = json.loads(kubectl_vgpu(cluster, "inspect", "-o", "json"))
    (node,) = inspect["nodes"]
    listed = {(p["namespace"], p["name"], p["container"]): p["memoryMiB"]
              for gpu in node["gpus"] for p in gpu["pods"]}
    assert listed[(WORKLOADS, "notebook", "main")] == 3000
    assert listed[(WORKLOADS, "pair", "b")] == 10240
    assert not node["stale"]
    why = kubectl_vgpu(cluster, "why", "notebook", "-n", WORKLOADS)
    assert "running on node-a" in why, why
    assert "mutated by the vgpu webhook" in why, why


def test_each_components_metrics_over_https_with_a_readers_token_show_the_grants(
        cluster: RealCluster, user: UserKustomization) -> None:
    """As a Prometheus scrapes them: pod IPs, HTTPS, the token of an account bound to
    vgpu-metrics-reader; no token, or a token not allowed the path, is refused; the
    webhook's Service carries admissions only (install_probes.py)."""
    port = api(cluster)
    granted = sum(s.memory_mib for p in ("notebook", "pair")
                  for slices in assignment(port.get("pods", p, WORKLOADS)).containers.values()
                  for s in slices)
    metrics_show_the_grants(cluster, granted)


def test_a_stolen_component_token_makes_only_that_components_writes(
        cluster: RealCluster, user: UserKustomization,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """RBAC and /node-scope through the real API server (install_probes.py): the
    scheduler's token cannot patch a pod; the agent's, bound to its pod as the kubelet's
    is, writes its Node's vgpu.io/ annotations, not a label of it, not another Node."""
    folder = tmp_path_factory.mktemp("tokens")
    stolen_scheduler_token_cannot_patch_a_pod(cluster, folder)
    stolen_agent_token_writes_only_its_own_node(cluster, folder)


def test_an_upgrade_rolls_every_component_without_losing_or_doubling_a_gpu_pod(
        cluster: RealCluster, user: UserKustomization) -> None:
    port = api(cluster)
    before = {name: port.get("pods", name, WORKLOADS) for name in ("notebook", "pair")}
    old = {c: {meta.name(p) for p in component_pods(port, c)}
           for c in ("scheduler", "webhook", "nodeagent")}
    # docs/operator-guide.md#upgrades, 1.20: the finished certs Job stays (no TTL); it goes first.
    cluster.kubectl("delete", "job", "-n", NAMESPACE, "vgpu-certs")
    user.write(RELEASES[UPGRADE_TAG])
    with PodsMeanwhile(cluster, most=14) as meanwhile:
        cluster.kubectl("apply", "-k", str(user.folder))
        rollouts(cluster, user)
    assert not meanwhile.errors, meanwhile.errors
    assert len(meanwhile.names) >= 5, meanwhile.names
    # The webhook's preStop hook ran in every replaced pod (a failed one is only an event).
    events = json.loads(cluster.kubectl("get", "events", "-n", NAMESPACE, "-o", "json").stdout)
    failed = [e["message"] for e in events["items"] if e.get("reason") == "FailedPreStopHook"]
    assert not failed, failed
    for name in meanwhile.names:
        # Mutated (not let through unmutated while a webhook pod went away), bound, run.
        pod = running(cluster, WORKLOADS, name, timeout=180)
        assert pod["spec"]["schedulerName"] == "vgpu-scheduler", name
    for name, pod in before.items():
        now = running(cluster, WORKLOADS, name, timeout=5)
        assert meta.uid(now) == meta.uid(pod) and assignment(now) == assignment(pod), name
    # Not double-allocated: every GPU holds at most its slices and its memory, and the agent
    # counts each container's grant once.
    gpu_pods = [port.get("pods", n, WORKLOADS) for n in [*before, *meanwhile.names]]
    for uuid, (slices, mib) in slices_per_gpu(gpu_pods).items():
        assert slices <= 10 and mib <= 40960, (uuid, slices, mib)
    granted = sum(s.memory_mib for p in gpu_pods for c in assignment(p).containers.values()
                  for s in c)
    (agent,) = component_pods(port, "nodeagent")
    samples = scrape(agent, 9394, reader_token(cluster))
    assert sample_sum(samples, "vgpu_container_memory_granted_bytes",
                      namespace=WORKLOADS) == granted * 1024 * 1024
    # Every component runs the new image in new pods; a new scheduler leads.
    for component, names in old.items():
        replaced = component_pods(port, component)
        assert replaced and not names & {meta.name(p) for p in replaced}, component
        for p in replaced:
            assert all(c["image"] == f"{IMAGE}@{RELEASES[UPGRADE_TAG]}"
                       for c in p["spec"]["containers"])
    holder = port.get("leases", "vgpu-scheduler", NAMESPACE)["spec"]["holderIdentity"]
    assert holder in {meta.name(p) for p in component_pods(port, "scheduler")}
    # The agent's documented strategy: a rolling update, one node at a time.
    strategy = json.loads(cluster.kubectl("get", "daemonset", "-n", AGENT_NAMESPACE,
                                          "vgpu-nodeagent", "-o", "json").stdout)["spec"][
        "updateStrategy"]
    assert strategy == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}


def test_uninstall_leaves_nothing_in_the_way_and_a_reinstall_runs_gpu_pods(
        cluster: RealCluster, user: UserKustomization) -> None:
    port = api(cluster)
    installed = user.rendered(cluster)
    cluster.kubectl("delete", "-k", str(user.folder), timeout=300)
    # Everything it made is gone (the namespace too: kubectl waits for it), above all every
    # webhook configuration, which would otherwise send pods to a webhook that is no more.
    for obj in installed:
        left = cluster.kubectl("get", obj["kind"].lower(), obj["metadata"]["name"], "-n",
                               obj["metadata"].get("namespace") or NAMESPACE, check=False)
        assert left.returncode != 0 and "NotFound" in left.stderr, (obj["kind"], left.stdout)
    # Pods are created as if vgpu had never been here (a GPU pod too: nothing refuses it,
    # nothing schedules it); the GPU pods keep running.
    create(cluster, WORKLOADS, {"apiVersion": "v1", "kind": "Pod",
                                "metadata": {"name": "plain"},
                                "spec": {"containers": [container("main")],
                                         "terminationGracePeriodSeconds": 2}})
    create(cluster, WORKLOADS, gpu_pod("unserved", container("main", gpu=1)))
    wait_until("a plain pod runs", lambda: (port.get("pods", "plain", WORKLOADS).get(
        "status") or {}).get("phase") == "Running", 90, interval=0.5, context=cluster.logs)
    assert not pods.node_name(port.get("pods", "unserved", WORKLOADS))
    cluster.kubectl("delete", "pod", "-n", WORKLOADS, "unserved", "--wait=false")
    running(cluster, WORKLOADS, "notebook", timeout=5)
    # The kubelet offers no GPU now; the agent's annotations stay on the Node (its rights
    # went with the install before it stopped), and a reinstall's agent replaces them.
    node = port.get("nodes", NODE)
    assert node["status"]["allocatable"].get(GPU) == "0"
    before = meta.annotations_of(node).get(NODE_HEARTBEAT)
    user.write(RELEASES[TAG])
    cluster.kubectl("apply", "-k", str(user.folder))
    rollouts(cluster, user)
    wait_until("the reinstalled agent publishes", lambda: meta.annotations_of(
        port.get("nodes", NODE)).get(NODE_HEARTBEAT) != before, 60, interval=0.5)
    create(cluster, WORKLOADS, gpu_pod("reinstalled", container("main", gpu=1, gpumem=1000)))
    pod = running(cluster, WORKLOADS, "reinstalled", timeout=120)
    assert pod["spec"]["schedulerName"] == "vgpu-scheduler"
    # The reinstall counts what still runs from before: no slice is handed out twice.
    inspect = json.loads(kubectl_vgpu(cluster, "inspect", "-o", "json"))
    listed = {(p["namespace"], p["name"]) for gpu in inspect["nodes"][0]["gpus"]
              for p in gpu["pods"]}
    assert {(WORKLOADS, "notebook"), (WORKLOADS, "pair"), (WORKLOADS, "reinstalled")} <= listed
    everyone = [p for p in port.list("pods", Selector(namespace=WORKLOADS)).items
                if codecs.assignment_of(p) is not None]
    for uuid, (slices, mib) in slices_per_gpu(everyone).items():
        assert slices <= 10 and mib <= 40960, (uuid, slices, mib)
