"""The manifests' workloads: pod hardening, ports, placement and the webhook's wiring.

Every pod runs hardened and probed, its ports are the config's defaults, the replicas
spread and keep a disruption budget, the agent mounts the device-plugin folder, and the
webhook's Service, Secret and registration agree with what ``vgpu certs`` writes.
"""

from __future__ import annotations

import pytest

from tests.ops.manifest_sources import BASE, Obj, find, pod_specs
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
        assert sc["capabilities"] == {"drop": ["ALL"]}
        assert "privileged" not in sc
        for kind in ("requests", "limits"):
            assert set(c["resources"][kind]) == {"cpu", "memory"}, (where, kind)
        assert c["image"] == "vgpu"
        if long_running:
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
