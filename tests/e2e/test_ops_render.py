"""`kubectl kustomize` of every manifest folder, with the kustomize kubectl 1.20 embeds.

No control plane needed: every folder renders, every object lands in vgpu-system, the
images transformer reaches every container, generated ConfigMaps are referred to by their
hashed names, and each overlay changes what it says it does. Applying them is
``test_ops_install``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.e2e.ops_support import RENDERABLE, Obj, check_rendered, kustomize


def named(objs: list[Obj], kind: str, name: str) -> Obj:
    hits = [o for o in objs if o["kind"] == kind and o["metadata"]["name"].startswith(name)]
    assert len(hits) == 1, (kind, name)
    return hits[0]


@pytest.mark.parametrize("folder", RENDERABLE)
def test_kubectl_kustomize_renders(kubectl_path: Path, folder: str) -> None:
    check_rendered(kustomize(kubectl_path, folder))


def test_overlays_change_what_they_say(kubectl_path: Path) -> None:
    def agent(folder: str) -> Obj:
        return named(kustomize(kubectl_path, folder), "DaemonSet", "vgpu-nodeagent")

    fake = agent("overlays/fake-gpus")["spec"]["template"]["spec"]
    assert fake["containers"][0]["args"] == ["nodeagent", "--proc-root=/host/proc",
                                             "--fake-devices=/run/vgpu-fake/devices.yaml"]
    assert fake["initContainers"][0]["name"] == "fake-devices"
    hami = agent("overlays/hami-core")["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in hami["containers"][0]["env"]}
    assert env["VGPU_NODEAGENT__HAMI_CORE_PATH"] == "/usr/local/vgpu/libvgpu.so"
    assert env["VGPU_NODEAGENT__HAMI_CORE_BUNDLE"] == ""
    assert {"hami-core", "vgpu-cache", "device-plugins"} <= {v["name"] for v in hami["volumes"]}
    # The base installs the library its image carries on a host path of the agent's.
    plain = agent("base")["spec"]["template"]["spec"]
    settings = yaml.safe_load(named(kustomize(kubectl_path, "base"), "ConfigMap",
                                    "vgpu-config")["data"]["config.yaml"])
    assert settings["nodeagent"] == {"hamiCorePath": "/var/lib/vgpu/lib/libvgpu.so",
                                     "sharedCacheDir": "/var/lib/vgpu"}
    assert {"name": "vgpu-cache", "mountPath": "/var/lib/vgpu"} in \
        plain["containers"][0]["volumeMounts"]
    monitoring = kustomize(kubectl_path, "overlays/prometheus-operator")
    assert sorted(o["metadata"]["name"] for o in monitoring if o["kind"] == "PodMonitor") == [
        "vgpu-nodeagent", "vgpu-scheduler", "vgpu-webhook"]
    dashboards = named(monitoring, "ConfigMap", "vgpu-dashboards")
    assert dashboards["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert sorted(dashboards["data"]) == ["vgpu-cluster.json", "vgpu-gpus.json"]
    old = kustomize(kubectl_path, "overlays/k8s-1.20")
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for hook in named(old, kind, "vgpu-webhook")["webhooks"]:
            assert "matchConditions" not in hook and hook["failurePolicy"] == "Ignore"
    # The ValidatingAdmissionPolicy (1.30+) is the base's, not the 1.20 overlay's.
    base = kustomize(kubectl_path, "base")
    named(base, "ValidatingAdmissionPolicy", "vgpu-annotations")
    named(base, "ValidatingAdmissionPolicyBinding", "vgpu-annotations")
    assert not [o for o in old if o["kind"].startswith("ValidatingAdmissionPolicy")]


def test_the_1_20_fake_gpu_overlay_is_the_1_20_overlay_with_the_fake_gpu_one(
        kubectl_path: Path) -> None:
    """k8s-1.20-fake-gpus holds copies of fake-gpus' files (kustomize reads none outside a
    kustomization's folder): rendered, its agent and devices are fake-gpus', and the rest
    is the 1.20 overlay's."""
    old_fake = kustomize(kubectl_path, "overlays/k8s-1.20-fake-gpus")
    fake = kustomize(kubectl_path, "overlays/fake-gpus")
    old = kustomize(kubectl_path, "overlays/k8s-1.20")
    for kind, name in (("DaemonSet", "vgpu-nodeagent"), ("ConfigMap", "vgpu-fake-devices")):
        assert named(old_fake, kind, name) == named(fake, kind, name), (kind, name)

    def key(o: Obj) -> tuple[str, str]:
        return o["kind"], o["metadata"]["name"]

    assert sorted(map(key, old_fake)) == sorted(
        [*map(key, old), key(named(fake, "ConfigMap", "vgpu-fake-devices"))])
    agent = named(old, "DaemonSet", "vgpu-nodeagent")
    assert [o for o in old_fake if key(o) not in {key(agent), key(named(
        fake, "ConfigMap", "vgpu-fake-devices"))}] == [o for o in old if key(o) != key(agent)]
