"""vgpu installed as a user installs it, on a :class:`RealCluster` (``test_install``).

The image comes from ``tests/image/build.sh`` (built here when the checkout has none,
before the cluster starts: builds are never timed), imported into the node's containerd
under a local name. The user's kustomization is written exactly as
docs/operator-guide.md#install shows it: a folder beside ``manifests/`` naming one of its
folders as base, with ``images:`` pointing ``vgpu`` at the local image; nothing else.
"""

from __future__ import annotations

import collections
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.controlplane.binaries import ControlPlaneError
from tests.controlplane.images import BUSYBOX
from tests.controlplane.real_cluster import RealCluster
from tests.e2e.harness_processes import wait_until
from tests.image.context import digest
from vgpu import codecs, meta, pods
from vgpu.annotations import PHASE_SUCCESS
from vgpu.cluster.port import Obj, Selector
from vgpu.kube.adapter import KubeCluster, connect

ROOT = Path(__file__).resolve().parents[2]
IMAGE_CACHE = Path(os.environ.get("VGPUDEV_IMAGE_CACHE", Path.home() / ".cache" / "vgpu-image"))
#: The names the image goes by on the node: what build.sh tags, and the "new release" an
#: upgrade applies (the same content with one more label: another digest, which is what a
#: roll needs; what it does is the point). The user's kustomization pins each by digest.
IMAGE = "localhost/vgpu"
TAG = "ci"
UPGRADE_TAG = "ci-upgrade"
#: The name the manifests give the image until a release pins its own (tests/image/pin.py).
UNRELEASED = "vgpu.invalid/vgpu"
#: What docs/operator-guide.md#install bases a Kubernetes 1.20 install without GPUs on.
BASE = "overlays/k8s-1.20-fake-gpus"
NAMESPACE = "vgpu-system"
#: The node agent's own namespace (it alone needs the host).
AGENT_NAMESPACE = "vgpu-node"
NODE = "node-a"
#: The users' namespace.
WORKLOADS = "team-a"
GPU = "nvidia.com/gpu"
#: Prints the environment, then waits; SIGTERM ends it at once.
WAIT = "trap 'exit 0' TERM; env; echo ENV-END; while true; do sleep 1; done"


def ensure_image(root: Path = ROOT) -> Path:
    """The image archive of this checkout's sources, built (minutes) when missing."""
    archive = IMAGE_CACHE / "archives" / f"{digest(root)}.tar"
    if not archive.is_file():
        result = subprocess.run(["bash", str(root / "tests" / "image" / "build.sh")],
                                stdout=sys.stderr, stderr=sys.stderr, check=False,
                                stdin=subprocess.DEVNULL)
        if result.returncode != 0 or not archive.is_file():
            raise ControlPlaneError(f"tests/image/build.sh exited {result.returncode} "
                                    f"without writing {archive}")
    return archive


@dataclass(frozen=True)
class UserKustomization:
    """The operator's own folder (docs/operator-guide.md#install: ``mkdir my-vgpu``),
    beside ``manifests``'s."""

    folder: Path

    def write(self, digest: str) -> None:
        """The kustomization pinning ``IMAGE@digest``, as docs/operator-guide.md#install
        writes it: the name ends in ``@sha256`` because kubectl 1.20's kustomize reads an
        image's name up to its last colon (and a current one matches it as well)."""
        base = os.path.relpath(ROOT / "manifests" / BASE, self.folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "kustomization.yaml").write_text(
            f"bases: [{base}]\n"
            f"images: [{{name: \"{UNRELEASED}@sha256\", newName: {IMAGE}, "
            f"digest: \"{digest}\"}}]\n")

    def rendered(self, cluster: RealCluster) -> list[Obj]:
        out = cluster.kubectl("kustomize", str(self.folder)).stdout
        return [d for d in yaml.safe_load_all(out) if d]


def second_release(archive: Path) -> Path:
    """The archive's image with one more label in its config: the same content under
    another digest, as a new release of the same sources would be. Kept beside it."""
    out = archive.with_name(archive.stem + "-upgrade.tar")
    if out.is_file():
        return out
    with tarfile.open(archive) as src, tarfile.open(out.with_suffix(".part"), "w") as dst:
        (manifest,) = json.load(src.extractfile("manifest.json"))  # type: ignore[arg-type]
        config = json.load(src.extractfile(manifest["Config"]))  # type: ignore[arg-type]
        config.setdefault("config", {}).setdefault("Labels", {})["vgpu.release"] = "upgrade"
        body = json.dumps(config).encode()
        name = hashlib.sha256(body).hexdigest() + ".json"
        manifest.update(Config=name, RepoTags=[f"{IMAGE}:{UPGRADE_TAG}"])
        for member in src.getmembers():
            if member.name in ("manifest.json", manifest["Config"]) or member.name == name:
                continue
            dst.addfile(member, src.extractfile(member) if member.isfile() else None)
        for file_name, data in ((name, body), ("manifest.json", json.dumps([manifest]).encode())):
            info = tarfile.TarInfo(file_name)
            info.size = len(data)
            dst.addfile(info, io.BytesIO(data))
    out.with_suffix(".part").rename(out)
    return out


def import_image(cluster: RealCluster, archive: Path, tag: str) -> str:
    """Import an image archive into the node's containerd as ``IMAGE:tag``; its digest,
    which is also made a name of it, as a pull by digest leaves it."""
    node = cluster.node
    node.ctr("images", "import", str(archive), timeout=600)
    listed = node.ctr("images", "ls", f"name=={IMAGE}:{tag}")
    (row,) = [line.split() for line in listed.splitlines()[1:] if line.strip()]
    digest = row[2]
    node.ctr("images", "tag", "--force", f"{IMAGE}:{tag}", f"{IMAGE}@{digest}")
    return digest


def api(cluster: RealCluster) -> KubeCluster:
    port = connect(str(cluster.cp.kubeconfig))
    assert port is not None
    return port


def container(name: str, **limits: str | int) -> dict[str, Any]:
    return {"name": name, "image": BUSYBOX, "imagePullPolicy": "Never",
            "command": ["sh", "-c", WAIT],
            "resources": {"limits": {f"nvidia.com/{k.replace('_', '-')}": str(v)
                                     for k, v in limits.items()}}}


def gpu_pod(name: str, *containers: dict[str, Any]) -> dict[str, Any]:
    """A GPU pod as a user writes it: no scheduler, no annotations, the pod network."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 2,
                     "containers": list(containers)}}


def create(cluster: RealCluster, namespace: str, pod: Mapping[str, Any]) -> None:
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input_text=json.dumps(pod))


def running(cluster: RealCluster, namespace: str, name: str, timeout: float = 90) -> Obj:
    """Wait until the pod runs with its GPUs allocated; fail at once if it failed."""
    port = api(cluster)

    def ready() -> Obj | None:
        pod = port.get("pods", name, namespace)
        status = pod.get("status") or {}
        if status.get("phase") == "Failed":
            raise AssertionError(f"{namespace}/{name} failed: {status}")
        return pod if status.get("phase") == "Running" and \
            pods.bind_phase(pod) == PHASE_SUCCESS else None

    return wait_until(f"{namespace}/{name} running with its GPUs", ready, timeout,
                      interval=0.5, context=cluster.logs)


def assignment(pod: Obj) -> codecs.Assignment:
    found = codecs.assignment_of(pod)
    assert found is not None, f"{pods.pod_key(pod)} has no assignment"
    return found


def env_of(cluster: RealCluster, namespace: str, pod: str, name: str) -> dict[str, str]:
    """The environment a container started with (it prints it first)."""

    def printed() -> dict[str, str] | None:
        text = cluster.kubectl("logs", "-n", namespace, pod, "-c", name, check=False).stdout
        if "ENV-END" not in text:
            return None
        lines = text.split("ENV-END", 1)[0].splitlines()
        return dict(line.split("=", 1) for line in lines if "=" in line)

    return wait_until(f"{namespace}/{pod} {name} printed its environment", printed, 30,
                      interval=0.5)


def kubectl_vgpu(cluster: RealCluster, *args: str) -> str:
    """``kubectl vgpu ARGS`` with the control plane's kubectl: the plugin is found on PATH,
    where ``pip install .`` puts ``kubectl-vgpu``."""
    env = {**os.environ, "KUBECONFIG": str(cluster.cp.kubeconfig),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    result = subprocess.run([str(cluster.cp.kubectl_path), "vgpu", *args], env=env,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, f"kubectl vgpu {' '.join(args)}: {result.stderr}"
    return result.stdout


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def sample_sum(samples: Samples, name: str, **labels: str) -> float:
    return sum(v for (n, got), v in samples.items()
               if n == name and labels.items() <= dict(got).items())


def namespace_of(component: str) -> str:
    return AGENT_NAMESPACE if component == "nodeagent" else NAMESPACE


def component_pods(port: KubeCluster, component: str) -> list[Obj]:
    """vgpu's running pods of one component (not being deleted)."""
    return [p for p in port.list("pods", Selector(namespace=namespace_of(component))).items
            if meta.labels_of(p).get("app.kubernetes.io/component") == component
            and not meta.deleting(p) and (p.get("status") or {}).get("phase") == "Running"]


def slices_per_gpu(pods: list[Obj]) -> dict[str, tuple[int, int]]:
    """Per GPU UUID: (vGPU slices, MiB) the pods' assignments hold."""
    count: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for pod in pods:
        for slices in assignment(pod).containers.values():
            for s in slices:
                count[s.uuid][0] += 1
                count[s.uuid][1] += s.memory_mib
    return {uuid: (n, mib) for uuid, (n, mib) in count.items()}


def rollouts(cluster: RealCluster, user: UserKustomization, timeout: int = 240) -> None:
    """``kubectl rollout status`` of every Deployment and DaemonSet the install has."""
    for obj in user.rendered(cluster):
        if obj["kind"] in ("Deployment", "DaemonSet"):
            cluster.kubectl("rollout", "status", "-n", obj["metadata"]["namespace"],
                            f"{obj['kind'].lower()}/{obj['metadata']['name']}",
                            f"--timeout={timeout}s", timeout=timeout + 30)


def webhook_configurations(cluster: RealCluster, user: UserKustomization) -> list[Obj]:
    return [o for o in user.rendered(cluster)
            if o["kind"] in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")]


class PodsMeanwhile:
    """Creates a GPU pod every ``every`` seconds on a thread until stopped: users do not
    wait for an upgrade to finish."""

    def __init__(self, cluster: RealCluster, most: int, every: float = 3.0) -> None:
        self.cluster, self.most, self.every = cluster, most, every
        self.names: list[str] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PodsMeanwhile:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)

    def _run(self) -> None:
        while not self._stop.is_set() and len(self.names) < self.most:
            name = f"meanwhile-{len(self.names)}"
            try:
                create(self.cluster, WORKLOADS, gpu_pod(name, container("main", gpu=1,
                                                                        gpumem=1000)))
                self.names.append(name)
            except Exception as exc:  # reported by the test, not lost on this thread
                self.errors.append(f"{name}: {exc}")
            self._stop.wait(self.every)
