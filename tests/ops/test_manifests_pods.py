"""The manifests' workloads: pod hardening, ports, placement and the webhook's wiring.

Every pod runs hardened and probed, its ports are the config's defaults, the replicas
spread and keep a disruption budget, the agent mounts the device-plugin folder, and the
webhook's Service, Secret and registration agree with what ``vgpu certs`` writes.
"""

from __future__ import annotations

import pytest

from tests.ops.manifest_sources import BASE, Obj, find, pod_specs
from tests.ops.rendered import INSTALLS, render
from vgpu import config
from vgpu_certs import cli as certs_cli


@pytest.mark.parametrize(("where", "spec"), list(pod_specs(BASE)),
                         ids=[where for where, _ in pod_specs(BASE)])


def test_pod_hardening(where: str, spec: Obj) -> None:
    pod_sc = spec["securityContext"]
    assert pod_sc["seccompProfile"] == {"type": "RuntimeDefault"}
    if where == "DaemonSet/vgpu-nodeagent":
        # The one root component (see the comment in nodeagent.yaml).
        assert pod_sc["runAsUser"] == 0
    else:
        assert pod_sc["runAsNonRoot"] is True and pod_sc["runAsUser"] != 0
    long_running = not where.startswith(("Job/", "CronJob/"))
    for c in spec["containers"]:
        sc = c["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False
        assert sc["readOnlyRootFilesystem"] is True
        # The agent alone adds one, CHOWN (test_the_agent_adds_chown_alone).
        assert sc["capabilities"] == {"drop": ["ALL"]} or where == "DaemonSet/vgpu-nodeagent"
        assert "privileged" not in sc
        for kind in ("requests", "limits"):
            assert set(c["resources"][kind]) == {"cpu", "memory"}, (where, kind)
        assert c["image"] == "vgpu"
        if long_running:
            # The operations port is HTTPS (metricsServer); the kubelet probes it as such.
            for probe in ("livenessProbe", "readinessProbe"):
                assert c[probe]["httpGet"]["scheme"] == "HTTPS", (where, probe)
            assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
            assert c["readinessProbe"]["httpGet"]["path"] in ("/readyz", "/healthz")
            port_names = {p["name"] for p in c["ports"]}
            assert c["livenessProbe"]["httpGet"]["port"] in port_names


def _container(objs: list[Obj], kind: str, name: str) -> Obj:
    spec = find(objs, kind, name)["spec"]["template"]["spec"]
    container: Obj = spec["containers"][0]
    return container


def _port(container: Obj, name: str) -> int:
    port: int = next(p["containerPort"] for p in container["ports"] if p["name"] == name)
    return port


def test_ports_match_the_config_defaults() -> None:
    defaults = config.Config()
    assert _port(_container(BASE, "Deployment", "vgpu-scheduler"), "metrics") == \
        defaults.scheduler.metrics_port
    assert _port(_container(BASE, "Deployment", "vgpu-webhook"), "metrics") == \
        defaults.webhook.metrics_port
    assert _port(_container(BASE, "Deployment", "vgpu-webhook"), "https") == \
        defaults.webhook.port
    assert _port(_container(BASE, "DaemonSet", "vgpu-nodeagent"), "metrics") == \
        defaults.nodeagent.metrics_port


def test_anti_affinity_and_disruption_budget() -> None:
    for name in ("vgpu-scheduler", "vgpu-webhook"):
        spec = find(BASE, "Deployment", name)["spec"]
        terms = spec["template"]["spec"]["affinity"]["podAntiAffinity"][
            "preferredDuringSchedulingIgnoredDuringExecution"]
        assert terms[0]["podAffinityTerm"]["labelSelector"]["matchLabels"] == \
            spec["selector"]["matchLabels"]
    pdb = find(BASE, "PodDisruptionBudget", "vgpu-webhook")
    assert pdb["spec"]["selector"] == find(BASE, "Deployment", "vgpu-webhook")["spec"]["selector"]
    assert pdb["spec"]["minAvailable"] == 1


def test_the_agent_runs_on_gpu_nodes_with_the_device_plugin_folder() -> None:
    ds = find(BASE, "DaemonSet", "vgpu-nodeagent")["spec"]["template"]["spec"]
    assert ds["nodeSelector"] == {"gpu": "on"}
    folder = config.Config().nodeagent.device_plugin_dir
    volume = next(v for v in ds["volumes"] if v["name"] == "device-plugins")
    assert volume["hostPath"]["path"] == folder
    mount = next(m for m in ds["containers"][0]["volumeMounts"] if m["name"] == "device-plugins")
    assert mount["mountPath"] == folder


# --- the webhook's wiring ----------------------------------------------------------------

def test_webhook_service_secret_and_registration_agree_with_vgpu_certs() -> None:
    service = find(BASE, "Service", certs_cli.DEFAULT_SERVICE)
    webhook = find(BASE, "MutatingWebhookConfiguration", certs_cli.DEFAULT_WEBHOOK_CONFIG)
    deployment = find(BASE, "Deployment", "vgpu-webhook")
    for hook in webhook["webhooks"]:
        svc = hook["clientConfig"]["service"]
        assert (svc["name"], svc["namespace"]) == (certs_cli.DEFAULT_SERVICE,
                                                   certs_cli.DEFAULT_NAMESPACE)
        port = next(p for p in service["spec"]["ports"] if p["port"] == svc["port"])
        assert port["targetPort"] == "https"
        assert "caBundle" not in hook["clientConfig"]  # `vgpu certs` owns it
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    volumes = deployment["spec"]["template"]["spec"]["volumes"]
    tls = next(v for v in volumes if v["name"] == "tls")
    assert tls["secret"]["secretName"] == certs_cli.DEFAULT_SECRET
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--cert-file=/etc/vgpu/tls/tls.crt" in args


def test_the_webhook_never_waits_on_itself() -> None:
    namespace = find(BASE, "Namespace", "vgpu-system")
    webhook = find(BASE, "MutatingWebhookConfiguration", "vgpu-webhook")
    for hook in webhook["webhooks"]:
        expr = hook["namespaceSelector"]["matchExpressions"][0]
        assert expr["key"] == "kubernetes.io/metadata.name" and expr["operator"] == "NotIn"
        assert "vgpu-system" in expr["values"]
    # 1.20 does not set this label by itself.
    assert namespace["metadata"]["labels"]["kubernetes.io/metadata.name"] == "vgpu-system"


# --- namespaces and Pod Security -----------------------------------------------------------

#: The volume types Pod Security's `restricted` level allows.
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                      "persistentVolumeClaim", "projected", "secret"}


def restricted_violations(spec: Obj) -> list[str]:
    """What in a pod spec Pod Security's `restricted` level (v1.30) refuses."""
    out = [f"{key}" for key in ("hostNetwork", "hostPID", "hostIPC") if spec.get(key)]
    pod_sc = spec.get("securityContext", {})
    for v in spec.get("volumes", []):
        kinds = set(v) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            out.append(f"volume {v['name']}: {sorted(kinds)}")
    for c in spec.get("initContainers", []) + spec["containers"]:
        sc = c.get("securityContext", {})
        where = f"container {c['name']}"
        if sc.get("privileged"):
            out.append(f"{where}: privileged")
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(f"{where}: allowPrivilegeEscalation")
        caps = sc.get("capabilities", {})
        if "ALL" not in caps.get("drop", []) or set(caps.get("add", [])) - {"NET_BIND_SERVICE"}:
            out.append(f"{where}: capabilities")
        if not (sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot"))):
            out.append(f"{where}: runAsNonRoot")
        if sc.get("runAsUser", pod_sc.get("runAsUser")) == 0:
            out.append(f"{where}: runAsUser 0")
        seccomp = sc.get("seccompProfile", pod_sc.get("seccompProfile", {}))
        if seccomp.get("type") not in ("RuntimeDefault", "Localhost"):
            out.append(f"{where}: seccompProfile")
        if any(p.get("hostPort") for p in c.get("ports", [])):
            out.append(f"{where}: hostPort")
    return out


def workloads(objs: list[Obj]) -> list[tuple[Obj, Obj]]:
    """(object, pod spec) of every workload."""
    out = []
    for where, spec in pod_specs(objs):
        kind, name = where.split("/", 1)
        out.append((next(o for o in objs if o["kind"] == kind
                         and o["metadata"]["name"] == name), spec))
    return out


@pytest.mark.parametrize("folder", INSTALLS)
def test_vgpu_system_enforces_restricted_and_every_pod_there_meets_it(folder: str) -> None:
    objs = render(folder)
    system = find(objs, "Namespace", "vgpu-system")["metadata"]["labels"]
    assert system["pod-security.kubernetes.io/enforce"] == "restricted"
    for obj, spec in workloads(objs):
        if obj["metadata"]["namespace"] == "vgpu-system":
            assert restricted_violations(spec) == [], obj["metadata"]["name"]


@pytest.mark.parametrize("folder", INSTALLS)
def test_only_the_node_agent_runs_in_the_privileged_namespace(folder: str) -> None:
    objs = render(folder)
    labels = find(objs, "Namespace", "vgpu-node")["metadata"]["labels"]
    assert labels["kubernetes.io/metadata.name"] == "vgpu-node"  # 1.20 does not set it
    assert [o["metadata"]["name"] for o, _ in workloads(objs)
            if o["metadata"]["namespace"] == "vgpu-node"] == ["vgpu-nodeagent"]


@pytest.mark.parametrize("folder", INSTALLS)
def test_the_agent_reads_the_hosts_proc_read_only_instead_of_sharing_its_pids(
        folder: str) -> None:
    spec = find(render(folder), "DaemonSet", "vgpu-nodeagent")["spec"]["template"]["spec"]
    # Only MPS needs the host's PID namespace: the MPS server finds itself in it.
    assert bool(spec.get("hostPID")) == (folder == "overlays/mps")
    (agent,) = spec["containers"]
    volume = next(v for v in spec["volumes"] if v.get("hostPath", {}).get("path") == "/proc")
    mount = next(m for m in agent["volumeMounts"] if m["name"] == volume["name"])
    assert mount["readOnly"] is True
    assert f"--proc-root={mount['mountPath']}" in agent["args"]


@pytest.mark.parametrize("folder", INSTALLS)
def test_the_agents_token_is_bound_to_its_pod(folder: str) -> None:
    """Projected (TokenRequest, bound to the pod) also on 1.20, where the default token of
    a cluster without BoundServiceAccountTokenVolume is a Secret's, bound to nothing:
    admission reads the agent's node from the pod its token names."""
    spec = find(render(folder), "DaemonSet", "vgpu-nodeagent")["spec"]["template"]["spec"]
    assert spec["automountServiceAccountToken"] is False
    mount = next(m for m in spec["containers"][0]["volumeMounts"]
                 if m["mountPath"] == "/var/run/secrets/kubernetes.io/serviceaccount")
    volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
    sources = volume["projected"]["sources"]
    assert sources[0]["serviceAccountToken"]["path"] == "token"
    assert {s.get("configMap", {}).get("name") for s in sources} >= {"kube-root-ca.crt"}


# --- the operations ports ---------------------------------------------------------------------

def test_the_metrics_reader_may_only_get_metrics() -> None:
    role = find(render("base"), "ClusterRole", "vgpu-metrics-reader")
    assert role["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]


def test_the_prometheus_operator_scrapes_over_https_with_a_readers_token() -> None:
    objs = render("overlays/prometheus-operator")
    binding = find(objs, "ClusterRoleBinding", "vgpu-metrics-reader")
    readers = {(s["namespace"], s["name"]) for s in binding["subjects"]}
    monitors = [o for o in objs if o["kind"] == "PodMonitor"]
    assert {o["metadata"]["name"] for o in monitors} == {
        "vgpu-scheduler", "vgpu-webhook", "vgpu-nodeagent"}
    for monitor in monitors:
        namespace = monitor["metadata"]["namespace"]
        (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
        assert endpoint["scheme"] == "https"
        secret = next(o for o in objs if o["kind"] == "Secret" and o["metadata"]["name"] ==
                      endpoint["authorization"]["credentials"]["name"]
                      and o["metadata"]["namespace"] == namespace)
        assert secret["type"] == "kubernetes.io/service-account-token"
        account = secret["metadata"]["annotations"]["kubernetes.io/service-account.name"]
        assert (namespace, account) in readers


# --- network policies ---------------------------------------------------------------------------

def _admitted(objs: list[Obj], namespace: str, labels: dict[str, str],
              port: int) -> list[Obj]:
    """The peers every NetworkPolicy of ``namespace`` selecting the pod admits on ``port``."""
    peers: list[Obj] = []
    for policy in (o for o in objs if o["kind"] == "NetworkPolicy"
                   and o["metadata"]["namespace"] == namespace):
        selector = policy["spec"]["podSelector"].get("matchLabels", {})
        if not selector.items() <= labels.items():
            continue
        assert policy["spec"]["policyTypes"] == ["Ingress"]
        for rule in policy["spec"].get("ingress", []):
            if any(p["port"] == port for p in rule.get("ports", [])):
                peers += rule["from"]
    return peers


@pytest.mark.parametrize("folder", INSTALLS)
def test_network_policies_let_in_only_what_each_port_is_for(folder: str) -> None:
    objs = render(folder)
    for namespace in ("vgpu-system", "vgpu-node"):
        deny = [o for o in objs if o["kind"] == "NetworkPolicy"
                and o["metadata"]["namespace"] == namespace and o["spec"]["podSelector"] == {}]
        assert deny and all(not o["spec"].get("ingress") for o in deny), namespace
    monitoring = [{"namespaceSelector": {"matchLabels": {
        "kubernetes.io/metadata.name": "monitoring"}}}]
    for obj, spec in workloads(objs):
        spec_of = obj["spec"].get("jobTemplate", {}).get("spec", obj["spec"])
        labels = spec_of["template"]["metadata"]["labels"]
        for c in spec["containers"]:
            for p in c.get("ports", []):
                peers = _admitted(objs, obj["metadata"]["namespace"], labels,
                                  p["containerPort"])
                if p["name"] == "metrics":
                    assert peers == monitoring, (obj["metadata"]["name"], peers)
                else:  # the admission port: addresses (the API server's), never pods
                    assert peers and all(set(peer) == {"ipBlock"} for peer in peers), peers


@pytest.mark.parametrize("folder", INSTALLS)
def test_the_webhook_service_carries_admissions_only(folder: str) -> None:
    service = find(render(folder), "Service", "vgpu-webhook")
    assert [p["name"] for p in service["spec"]["ports"]] == ["https"]


@pytest.mark.parametrize("folder", INSTALLS)
def test_the_agent_adds_chown_alone(folder: str) -> None:
    # Every install hands out HAMi-core (the image's build, or the node's in hami-core).
    spec = find(render(folder), "DaemonSet", "vgpu-nodeagent")["spec"]["template"]["spec"]
    (agent,) = spec["containers"]
    assert agent["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN"]}
    assert agent["securityContext"]["allowPrivilegeEscalation"] is False
