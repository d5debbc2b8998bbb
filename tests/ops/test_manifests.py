"""Checks on the manifests' sources, without kustomize (tests/e2e renders and applies).

Least privilege is pinned as exact rule sets: any new right for a component fails here
and must be argued for in the table below.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from certs import cli as certs_cli
from vgpu import config

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"
Obj = dict[str, Any]


def kustomization(folder: Path) -> Obj:
    data: Obj = yaml.safe_load((folder / "kustomization.yaml").read_text())
    return data


def docs(path: Path) -> list[Obj]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def resources(folder: Path) -> list[Obj]:
    """The objects a kustomization lists, its bases' included (no patches applied)."""
    k = kustomization(folder)
    out: list[Obj] = []
    for base in k.get("bases", []):
        out += resources((folder / base).resolve())
    for name in k.get("resources", []):
        out += docs(folder / name)
    return out


def kustomizations() -> list[Path]:
    return sorted(p.parent for p in MANIFESTS.rglob("kustomization.yaml"))


BASE = resources(MANIFESTS / "base")
CORE = resources(MANIFESTS / "base" / "core")


def find(objs: list[Obj], kind: str, name: str) -> Obj:
    hits = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(hits) == 1, (kind, name, len(hits))
    return hits[0]


def pod_specs(objs: list[Obj]) -> Iterator[tuple[str, Obj]]:
    for o in objs:
        spec = o.get("spec", {})
        if o["kind"] in ("Deployment", "DaemonSet", "Job"):
            yield f"{o['kind']}/{o['metadata']['name']}", spec["template"]["spec"]
        elif o["kind"] == "CronJob":
            job = spec["jobTemplate"]["spec"]
            yield f"CronJob/{o['metadata']['name']}", job["template"]["spec"]


@pytest.mark.parametrize("folder", kustomizations(), ids=lambda p: str(p.relative_to(MANIFESTS)))
def test_every_file_a_kustomization_names_exists(folder: Path) -> None:
    k = kustomization(folder)
    for base in k.get("bases", []):
        assert (folder / base / "kustomization.yaml").is_file(), base
    named = list(k.get("resources", [])) + list(k.get("patchesStrategicMerge", []))
    named += [p["path"] for p in k.get("patchesJson6902", [])]
    named += [f for g in k.get("configMapGenerator", []) for f in g.get("files", [])]
    for name in named:
        assert (folder / name).is_file(), name
    # kustomize v2.0.3 (kubectl 1.20) reads folders only under `bases`.
    assert not [r for r in k.get("resources", []) if (folder / r).is_dir()]


def test_base_has_every_piece() -> None:
    components = ("scheduler", "webhook", "nodeagent", "certs")
    assert sorted((o["kind"], o["metadata"]["name"]) for o in BASE) == sorted([
        ("Namespace", "vgpu-system"),
        *(("ServiceAccount", f"vgpu-{c}") for c in components),
        *((kind, f"vgpu-{c}") for c in components
          for kind in ("ClusterRole", "ClusterRoleBinding")),
        ("Role", "vgpu-scheduler-leader-election"),
        ("RoleBinding", "vgpu-scheduler-leader-election"),
        ("Role", "vgpu-certs"), ("RoleBinding", "vgpu-certs"),
        ("Deployment", "vgpu-scheduler"), ("Deployment", "vgpu-webhook"),
        ("Service", "vgpu-webhook"), ("PodDisruptionBudget", "vgpu-webhook"),
        ("MutatingWebhookConfiguration", "vgpu-webhook"), ("DaemonSet", "vgpu-nodeagent"),
        ("Job", "vgpu-certs"), ("CronJob", "vgpu-certs"),
    ])
    # The config ConfigMap comes from a generator.
    generator = kustomization(MANIFESTS / "base" / "core")["configMapGenerator"][0]
    assert (generator["name"], generator["files"]) == ("vgpu-config", ["config.yaml"])
    assert find(BASE, "Deployment", "vgpu-scheduler")["spec"]["replicas"] == 2
    assert find(BASE, "Deployment", "vgpu-webhook")["spec"]["replicas"] == 2


def test_the_config_file_is_valid() -> None:
    cfg = config.load(str(MANIFESTS / "base" / "core" / "config.yaml"), {})
    assert cfg.scheduler_name == "vgpu-scheduler"


# --- RBAC --------------------------------------------------------------------------------

def rules_of(sa: str, objs: list[Obj] = BASE) -> set[tuple[str, str, str, str]]:
    """(scope, apiGroup, resource[/name], verb) for every right bound to a ServiceAccount."""
    out: set[tuple[str, str, str, str]] = set()
    for binding in objs:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if not any(s["kind"] == "ServiceAccount" and s["name"] == sa
                   and s["namespace"] == "vgpu-system" for s in binding["subjects"]):
            continue
        ref = binding["roleRef"]
        role = find(objs, ref["kind"], ref["name"])
        scope = "cluster" if binding["kind"] == "ClusterRoleBinding" else "vgpu-system"
        for rule in role["rules"]:
            names = rule.get("resourceNames") or [""]
            for g in rule["apiGroups"]:
                for r in rule["resources"]:
                    for n in names:
                        for v in rule["verbs"]:
                            out.add((scope, g, f"{r}/{n}" if n else r, v))
    return out


def _rights(scope: str, group: str, resource: str, *verbs: str) -> set[tuple[str, str, str, str]]:
    return {(scope, group, resource, v) for v in verbs}


EXPECTED_RIGHTS = {
    "vgpu-scheduler": (
        _rights("cluster", "", "pods", "get", "list", "watch", "patch")
        | _rights("cluster", "", "pods/binding", "create")
        | _rights("cluster", "", "pods/status", "patch")
        | _rights("cluster", "", "nodes", "get", "list", "watch")
        | _rights("cluster", "", "events", "create", "patch")
        | _rights("cluster", "events.k8s.io", "events", "create", "patch")
        | _rights("vgpu-system", "coordination.k8s.io", "leases", "create")
        | _rights("vgpu-system", "coordination.k8s.io", "leases/vgpu-scheduler", "get", "update")),
    "vgpu-webhook": _rights("cluster", "", "nodes", "list", "watch"),
    "vgpu-nodeagent": (
        _rights("cluster", "", "pods", "get", "list", "watch", "patch")
        | _rights("cluster", "", "nodes", "patch")),
    "vgpu-certs": (
        _rights("vgpu-system", "", "secrets", "create")
        | _rights("vgpu-system", "", f"secrets/{certs_cli.DEFAULT_SECRET}", "get", "update")
        | _rights("cluster", "admissionregistration.k8s.io",
                  f"mutatingwebhookconfigurations/{certs_cli.DEFAULT_WEBHOOK_CONFIG}",
                  "get", "update")),
}


@pytest.mark.parametrize("sa", sorted(EXPECTED_RIGHTS))
def test_each_service_account_has_exactly_its_rights(sa: str) -> None:
    assert rules_of(sa) == EXPECTED_RIGHTS[sa]


def test_no_wildcards_and_no_deletes_anywhere() -> None:
    for o in BASE:
        for rule in o.get("rules", []):
            for key in ("apiGroups", "resources", "verbs", "resourceNames"):
                assert "*" not in rule.get(key, []), (o["metadata"]["name"], rule)
            assert not {"delete", "deletecollection", "escalate", "bind", "impersonate"} & \
                set(rule["verbs"]), (o["metadata"]["name"], rule)


def test_workloads_run_as_their_own_service_account() -> None:
    accounts = {f"vgpu-{c}" for c in ("scheduler", "webhook", "nodeagent", "certs")}
    for where, spec in pod_specs(BASE):
        assert spec["serviceAccountName"] in accounts, where


# --- pods --------------------------------------------------------------------------------

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


# --- Kubernetes 1.20 ---------------------------------------------------------------------

def test_the_1_20_overlay_has_the_base_objects_in_their_beta_versions() -> None:
    overlay = resources(MANIFESTS / "overlays" / "k8s-1.20")
    in_base_only = [o for o in BASE if o not in CORE]
    assert sorted(o["kind"] for o in in_base_only) == ["CronJob", "PodDisruptionBudget"]
    versions = {"PodDisruptionBudget": ("policy/v1", "policy/v1beta1"),
                "CronJob": ("batch/v1", "batch/v1beta1")}
    for obj in in_base_only:
        ga, beta = versions[obj["kind"]]
        assert obj["apiVersion"] == ga
        twin = find(overlay, obj["kind"], obj["metadata"]["name"])
        assert twin == {**obj, "apiVersion": beta}


# --- image -------------------------------------------------------------------------------

def test_dockerfile_builds_every_package_and_runs_as_non_root() -> None:
    text = (ROOT / "Dockerfile").read_text()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    include = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = [p.rstrip("*") for p in include]
    for package in packages:
        assert re.search(rf"^COPY {package} {package}$", text, re.M), package
        assert f"!{package}/" in (ROOT / ".dockerignore").read_text()
    assert re.findall(r"^FROM (\S+)", text, re.M) == ["python:3.11-slim"] * 2
    assert re.search(r"^USER 65532:65532$", text, re.M)
    assert re.search(r'^ENTRYPOINT \["vgpu"\]$', text, re.M)


# --- the commands the pods run -----------------------------------------------------------

def _commands() -> list[tuple[str, list[str]]]:
    out = []
    for where, spec in pod_specs(BASE):
        for c in spec["containers"]:
            out.append((f"{where}/{c['name']}", list(c["args"])))
    fake = docs(MANIFESTS / "overlays" / "fake-gpus" / "nodeagent-fake.yaml")[0]
    agent = fake["spec"]["template"]["spec"]["containers"][0]
    out.append(("fake-gpus DaemonSet/vgpu-nodeagent", list(agent["args"])))
    return out


@pytest.mark.parametrize(("where", "args"), _commands(), ids=[w for w, _ in _commands()])
def test_every_pod_runs_a_vgpu_command_line_that_parses(where: str, args: list[str]) -> None:
    from vgpu import cli

    command = next(c for c in cli.SUBCOMMANDS if c.name == args[0])
    if command.module is None:
        pytest.skip(f"`vgpu {command.name}` is not in this tree yet; its flags are unchecked")
    # $(VAR) is the kubelet's substitution from the container's env.
    expanded = [re.sub(r"\$\(\w+\)", "vgpu-system", a) for a in args]
    parsed = cli.build_parser(expanded).parse_args(expanded)
    assert parsed._subcommand is command
