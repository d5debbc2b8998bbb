"""Checks on the manifests' sources, without kustomize (tests/e2e renders and applies).

What every kustomization names exists, the base has every piece, the 1.20 overlay holds
the base's objects in their beta versions, the image builds every package, and every
pod's command line parses. Rights are in ``test_manifests_rbac``, pod specs and the
webhook's wiring in ``test_manifests_pods``.
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path

import pytest
import yaml

from tests.ops.manifest_sources import (
    BASE,
    CORE,
    MANIFESTS,
    ROOT,
    docs,
    find,
    kustomization,
    kustomizations,
    pod_specs,
    resources,
)
from tests.product import PACKAGES
from vgpu import config


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
        ("Namespace", "vgpu-system"), ("Namespace", "vgpu-node"),
        *(("ServiceAccount", f"vgpu-{c}") for c in components),
        *((kind, f"vgpu-{c}") for c in components
          for kind in ("ClusterRole", "ClusterRoleBinding")),
        ("Role", "vgpu-scheduler-leader-election"),
        ("RoleBinding", "vgpu-scheduler-leader-election"),
        ("Role", "vgpu-certs"), ("RoleBinding", "vgpu-certs"),
        ("Role", "vgpu-webhook"), ("RoleBinding", "vgpu-webhook"),
        ("Role", "vgpu-webhook-agent-pods"), ("RoleBinding", "vgpu-webhook-agent-pods"),
        ("ClusterRole", "vgpu-metrics-reader"),
        ("NetworkPolicy", "vgpu-deny-ingress"), ("NetworkPolicy", "vgpu-deny-ingress"),
        ("NetworkPolicy", "vgpu-webhook"), ("NetworkPolicy", "vgpu-scheduler"),
        ("NetworkPolicy", "vgpu-nodeagent"),
        ("Deployment", "vgpu-scheduler"), ("Deployment", "vgpu-webhook"),
        ("Service", "vgpu-webhook"), ("PodDisruptionBudget", "vgpu-webhook"),
        ("MutatingWebhookConfiguration", "vgpu-webhook"), ("DaemonSet", "vgpu-nodeagent"),
        ("ValidatingWebhookConfiguration", "vgpu-webhook"),
        ("ValidatingAdmissionPolicy", "vgpu-annotations"),
        ("ValidatingAdmissionPolicyBinding", "vgpu-annotations"),
        ("ValidatingAdmissionPolicy", "vgpu-node-scope"),
        ("ValidatingAdmissionPolicyBinding", "vgpu-node-scope"),
        ("ValidatingAdmissionPolicy", "vgpu-certs-ca-bundle"),
        ("ValidatingAdmissionPolicyBinding", "vgpu-certs-ca-bundle"),
        ("Job", "vgpu-certs"), ("CronJob", "vgpu-certs"),
    ])
    # The config ConfigMap comes from a generator.
    generators = kustomization(MANIFESTS / "base" / "core")["configMapGenerator"]
    assert [(g["name"], g["namespace"], g["files"]) for g in generators] == [
        ("vgpu-config", "vgpu-system", ["config.yaml"]),
        ("vgpu-nodeagent-config", "vgpu-node", ["config.yaml"])]
    assert find(BASE, "Deployment", "vgpu-scheduler")["spec"]["replicas"] == 2
    assert find(BASE, "Deployment", "vgpu-webhook")["spec"]["replicas"] == 2


def test_the_config_file_is_valid() -> None:
    path = MANIFESTS / "base" / "core" / "config.yaml"
    cfg = config.load(str(path), {})
    assert cfg.scheduler_name == "vgpu-scheduler"
    # The file we ship names its format, as `vgpu config defaults` writes it.
    assert yaml.safe_load(path.read_text())["version"] == "v1"


# --- Kubernetes 1.20 ---------------------------------------------------------------------

def test_the_1_20_overlay_has_the_base_objects_in_their_beta_versions() -> None:
    overlay = resources(MANIFESTS / "overlays" / "k8s-1.20")
    # The ValidatingAdmissionPolicy (1.30+) has no 1.20 form: the overlay leaves it out.
    in_base_only = [o for o in BASE if o not in CORE
                    and not o["kind"].startswith("ValidatingAdmissionPolicy")]
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
    # The build context is what .dockerignore admits, copied whole: every package by the
    # rule pyproject.toml's package discovery states (vgpu and vgpu_*), nothing by name.
    assert re.search(r"^COPY \. \.$", text, re.M)
    admitted = {line[1:] for line in (ROOT / ".dockerignore").read_text().splitlines()
                if line.startswith("!")}
    assert {"vgpu/", "vgpu_*/", "pyproject.toml", "README.md"} <= admitted
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    include = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    assert include == ["vgpu", "vgpu.*", "vgpu_*"]
    assert all(fnmatch.fnmatch(name, "vgpu_*") or name == "vgpu" for name in PACKAGES)
    # The image starts from BASE, python:3.11-slim unless the builder passes another (CI's
    # Debian-built base, tests/image/build.sh); the build stage from BUILD_BASE, which is
    # BASE unless the builder passes one with the same python (CI's has binutils too).
    assert re.search(r"^ARG BASE=python:3.11-slim$", text, re.M)
    assert re.search(r"^ARG BUILD_BASE=\$\{BASE\}$", text, re.M)
    assert re.findall(r"^FROM (\S+)", text, re.M) == [
        "${BUILD_BASE}", "${BASE}", "${CUDA12_DEVEL}", "${CUDA13_DEVEL}", "build", "vgpu"]
    assert re.search(r"^USER 65532:65532$", text, re.M)
    assert re.search(r'^ENTRYPOINT \["vgpu"\]$', text, re.M)


def test_the_default_image_carries_hami_core_built_as_its_authors_build_it() -> None:
    """Each CUDA major's stage fetches the pinned commit, checks it is that commit, and runs
    HAMi-core's own build.sh (Debug); the agent's check indexes the builds; the default
    target copies them where the agent looks (nodeagent.hamiCoreBundle). CI, without the
    network, builds --target vgpu, the stage before them."""
    text = (ROOT / "Dockerfile").read_text()
    ref = re.search(r"^ARG HAMI_CORE_REF=([0-9a-f]{40})$", text, re.M)
    assert ref is not None
    stages = dict(re.findall(r"^FROM (\S+) AS (\S+)$", text, re.M)[::-1])
    majors = sorted(int(m) for m in re.findall(r"^FROM \S+ AS hami-core-cuda(\d+)$", text, re.M))
    assert majors == [12, 13] and stages.get("${BASE}") == "vgpu"
    for major in majors:
        body = text.split(f"AS hami-core-cuda{major}\n", 1)[1].split("\nFROM ", 1)[0]
        assert 'test "$(git rev-parse HEAD)" = "${HAMI_CORE_REF}"' in body
        assert "bash ./build.sh" in body and "CMAKE_BUILD_TYPE" not in body
        assert f"/out/cuda{major}/libvgpu.so" in body
    assert "python -m vgpu_nodeagent.isolation.hami_bundle /opt/vgpu/hami-core" in text
    last = text.rsplit("\nFROM ", 1)[1]
    assert last.startswith("vgpu\n")
    assert "COPY --from=hami-core /opt/vgpu/hami-core /opt/vgpu/hami-core" in last
    assert config.Config().nodeagent.hami_core_bundle == "/opt/vgpu/hami-core"
    assert "--target vgpu" in (ROOT / "tests/image/build.sh").read_text()
    # The pinned commit the docs name is the one built.
    assert ref.group(1)[:7] in (ROOT / "docs/isolation-setup.md").read_text()


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

    command = next(c for c in cli.subcommands() if c.name == args[0])
    # $(VAR) is the kubelet's substitution from the container's env.
    expanded = [re.sub(r"\$\(\w+\)", "vgpu-system", a) for a in args]
    parsed = cli.build_parser(expanded).parse_args(expanded)
    assert parsed._subcommand == command


def test_the_fail_open_patches_of_1_20_and_1_21_are_one_text() -> None:
    """kustomize reads no file outside a kustomization's folder: the k8s-1.21 overlay has
    copies of the k8s-1.20 overlay's webhook patches."""
    for name in ("mutating-fail-open.yaml", "validating-fail-open.yaml"):
        assert (MANIFESTS / "overlays" / "k8s-1.21" / name).read_text() == \
            (MANIFESTS / "overlays" / "k8s-1.20" / name).read_text()
    # Every webhook of each configuration is patched.
    for kind, name in (("MutatingWebhookConfiguration", "mutating-fail-open.yaml"),
                       ("ValidatingWebhookConfiguration", "validating-fail-open.yaml")):
        hooks = find(BASE, kind, "vgpu-webhook")["webhooks"]
        ops = yaml.safe_load((MANIFESTS / "overlays" / "k8s-1.20" / name).read_text())
        assert sorted({op["path"].split("/")[2] for op in ops}) == \
            [str(i) for i in range(len(hooks))]
