"""Request parsing: the pods users write, turned into per-container GPU requests.

The first table holds the examples of the HAMi / 4paradigm k8s-vgpu-scheduler README and
its ``examples/nvidia/*.yaml`` (so pods written for HAMi keep their meaning), then the
shapes the defaulting rules of DESIGN §2–3 must cover.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vgpu import policy
from vgpu.annotations import GpuSelector, PodChoices
from vgpu.config import Config, ResourceNames
from vgpu.errors import QuantityError, RequestError
from vgpu.requests import (
    ContainerRequest,
    PodRequest,
    names_gpu_resource,
    parse_pod,
    privileged_gpu_containers,
)

GPU = "nvidia.com/gpu"
MEM = "nvidia.com/gpumem"
PCT = "nvidia.com/gpumem-percentage"
CORES = "nvidia.com/gpucores"
PRIO = "nvidia.com/priority"

DEFAULT = Config()
DEFAULT_MEM_2048 = Config(default_mem=2048)
DEFAULT_CORES_20 = Config(default_cores=20)
CUSTOM = Config(resource_names=ResourceNames(
    gpu="example.com/vgpu", gpumem="example.com/vmem",
    gpumem_percentage="example.com/vmem-pct", gpucores="example.com/vcores",
    priority="example.com/vprio",
))


def ctr(name: str = "main", limits: dict[str, Any] | None = None,
        requests: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if limits is not None:
        resources["limits"] = limits
    if requests is not None:
        resources["requests"] = requests
    return {"name": name, "image": "ubuntu:22.04", "resources": resources, **extra}


def pod(*containers: dict[str, Any], init: tuple[dict[str, Any], ...] = (),
        annotations: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": list(containers)}
    if init:
        spec["initContainers"] = list(init)
    metadata: dict[str, Any] = {"name": "gpu-pod", "namespace": "default"}
    if annotations is not None:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def want(name: str = "main", count: int = 1, *, mib: int | None = None,
         pct: int | None = None, cores: int = 0, priority: int | None = None,
         init: bool = False, defaulted: bool = False) -> ContainerRequest:
    return ContainerRequest(name=name, count=count, memory_mib=mib, memory_percent=pct,
                            cores=cores, priority=priority, init=init,
                            count_defaulted=defaulted)


@dataclass(frozen=True)
class Case:
    id: str
    pod: dict[str, Any]
    expected: tuple[ContainerRequest, ...]
    choices: PodChoices = PodChoices()
    config: Config = field(default=DEFAULT)


CASES: list[Case] = [
    # --- the HAMi README and examples/nvidia/*.yaml -------------------------------------
    Case("hami-readme-gpu2-mem3000-cores30",
         pod(ctr("ubuntu-container", {GPU: 2, MEM: 3000, CORES: 30})),
         (want("ubuntu-container", 2, mib=3000, cores=30),)),
    Case("hami-readme-hard-limit-gpu1-mem3000",
         pod(ctr("ubuntu-container", {GPU: 1, MEM: 3000})),
         (want("ubuntu-container", 1, mib=3000),)),
    Case("hami-example-deployment-template",
         pod(ctr("cuda-sample-vector-add", {GPU: 1, MEM: 3000})),
         (want("cuda-sample-vector-add", 1, mib=3000),)),
    Case("hami-readme-percentage-50",
         pod(ctr("ubuntu-container", {GPU: 2, PCT: 50})),
         (want("ubuntu-container", 2, pct=50),)),
    Case("hami-use-memory-fraction",
         pod(ctr("ubuntu-container", {GPU: 2, PCT: 50, CORES: 30})),
         (want("ubuntu-container", 2, pct=50, cores=30),)),
    Case("hami-use-exclusive-card",
         pod(ctr("ubuntu-container", {GPU: 2, PCT: 100, CORES: 100})),
         (want("ubuntu-container", 2, pct=100, cores=100),)),
    Case("hami-use-sharing-card-pod1",
         pod(ctr("ubuntu-container", {GPU: 1, PCT: 40, CORES: 60})),
         (want("ubuntu-container", 1, pct=40, cores=60),)),
    Case("hami-use-sharing-card-pod2",
         pod(ctr("ubuntu-container", {GPU: 1, PCT: 60, CORES: 40})),
         (want("ubuntu-container", 1, pct=60, cores=40),)),
    Case("hami-use-as-normal-whole-gpus",
         pod(ctr("ubuntu-container", {GPU: 2})),
         (want("ubuntu-container", 2, pct=100),)),
    Case("hami-priority-high",
         pod(ctr("ubuntu-container", {GPU: 1, MEM: 3000, PRIO: 0})),
         (want("ubuntu-container", 1, mib=3000, priority=0),)),
    Case("hami-specify-card-type-to-use",
         pod(ctr("ubuntu-container", {GPU: 2}),
             annotations={"nvidia.com/use-gputype": "A100,V100"}),
         (want("ubuntu-container", 2, pct=100),),
         PodChoices(GpuSelector(use_types=("A100", "V100")))),
    Case("hami-specify-card-type-not-use",
         pod(ctr("ubuntu-container", {GPU: 2}),
             annotations={"nvidia.com/nouse-gputype": "1080,2080"}),
         (want("ubuntu-container", 2, pct=100),),
         PodChoices(GpuSelector(nouse_types=("1080", "2080")))),
    Case("hami-specify-uuid-to-use",
         pod(ctr("ubuntu-container", {GPU: 1}),
             annotations={"nvidia.com/use-gpuuuid": "GPU-123456"}),
         (want("ubuntu-container", 1, pct=100),),
         PodChoices(GpuSelector(use_uuids=("GPU-123456",)))),
    Case("hami-specify-uuid-not-use",
         pod(ctr("ubuntu-container", {GPU: 2}),
             annotations={"nvidia.com/nouse-gpuuuid": "GPU-123456"}),
         (want("ubuntu-container", 2, pct=100),),
         PodChoices(GpuSelector(nouse_uuids=("GPU-123456",)))),
    Case("hami-specify-scheduling-policy",
         pod(ctr("ubuntu-container", {GPU: 1}),
             annotations={"hami.io/node-scheduler-policy": "spread",
                          "hami.io/gpu-scheduler-policy": "binpack"}),
         (want("ubuntu-container", 1, pct=100),),
         PodChoices(gpu_policy="binpack", node_policy="spread")),
    # --- where the numbers come from -----------------------------------------------------
    Case("requests-only",
         pod(ctr(requests={GPU: 1, MEM: 1024, CORES: 10})),
         (want(mib=1024, cores=10),)),
    Case("limits-only",
         pod(ctr(limits={GPU: 1, MEM: 1024, CORES: 10})),
         (want(mib=1024, cores=10),)),
    Case("limits-win-over-requests",
         pod(ctr(limits={GPU: 2, MEM: 4096, CORES: 50},
                 requests={GPU: 1, MEM: 1024, CORES: 10})),
         (want(count=2, mib=4096, cores=50),)),
    Case("limits-win-per-resource-requests-fill-the-rest",
         pod(ctr(limits={GPU: 2}, requests={MEM: 1024})),
         (want(count=2, mib=1024),)),
    Case("empty-limits-section-requests-count",
         pod(ctr(limits={}, requests={GPU: 1})),
         (want(pct=100),)),
    Case("string-quantities",
         pod(ctr(limits={GPU: "2", MEM: "3000", CORES: "30"})),
         (want(count=2, mib=3000, cores=30),)),
    Case("quantity-3k", pod(ctr(limits={GPU: 1, MEM: "3k"})), (want(mib=3000),)),
    Case("quantity-3Ki", pod(ctr(limits={GPU: 1, MEM: "3Ki"})), (want(mib=3072),)),
    Case("quantity-1e3", pod(ctr(limits={GPU: 1, MEM: "1e3"})), (want(mib=1000),)),
    Case("quantity-2000m-count", pod(ctr(limits={GPU: "2000m"})), (want(count=2, pct=100),)),
    Case("quantity-json-float-whole", pod(ctr(limits={GPU: 1.0, MEM: 512.0})),
         (want(mib=512),)),
    # --- containers ----------------------------------------------------------------------
    Case("init-container-only",
         pod(ctr("app"), init=(ctr("warmup", {GPU: 1, MEM: 2000}),)),
         (want("warmup", mib=2000, init=True),)),
    Case("init-and-regular-containers",
         pod(ctr("app", {GPU: 2, PCT: 25}), init=(ctr("warmup", {GPU: 1, MEM: 500}),)),
         (want("warmup", mib=500, init=True), want("app", 2, pct=25))),
    Case("several-gpu-containers",
         pod(ctr("a", {GPU: 1, MEM: 1000}), ctr("b", {GPU: 2, PCT: 30, CORES: 20}),
             ctr("c", {GPU: 1, CORES: 100})),
         (want("a", mib=1000), want("b", 2, pct=30, cores=20), want("c", pct=100, cores=100))),
    Case("only-some-containers-have-gpus",
         pod(ctr("sidecar", {"cpu": "100m", "memory": "64Mi"}), ctr("trainer", {GPU: 1}),
             ctr("logger")),
         (want("trainer", pct=100),)),
    Case("no-gpu-anywhere",
         pod(ctr("web", {"cpu": "1"}), init=(ctr("setup"),)),
         ()),
    Case("container-without-resources",
         pod({"name": "plain"}, ctr("gpu", {GPU: 1})),
         (want("gpu", pct=100),)),
    Case("resources-null-sections",
         pod({"name": "x", "resources": {"limits": None, "requests": None}},
             ctr("gpu", {GPU: 1})),
         (want("gpu", pct=100),)),
    # --- defaulting ----------------------------------------------------------------------
    Case("default-mem-0-means-whole-gpu", pod(ctr(limits={GPU: 1})), (want(pct=100),)),
    Case("default-mem-positive-is-mib", pod(ctr(limits={GPU: 1})), (want(mib=2048),),
         config=DEFAULT_MEM_2048),
    Case("default-mem-does-not-override-percentage", pod(ctr(limits={GPU: 1, PCT: 10})),
         (want(pct=10),), config=DEFAULT_MEM_2048),
    Case("default-mem-does-not-override-mib", pod(ctr(limits={GPU: 1, MEM: 100})),
         (want(mib=100),), config=DEFAULT_MEM_2048),
    Case("default-cores-applied", pod(ctr(limits={GPU: 1})), (want(pct=100, cores=20),),
         config=DEFAULT_CORES_20),
    Case("explicit-zero-cores-beats-default", pod(ctr(limits={GPU: 1, CORES: 0})),
         (want(pct=100, cores=0),), config=DEFAULT_CORES_20),
    Case("count-defaulted-memory-only", pod(ctr(limits={MEM: 3000})),
         (want(mib=3000, defaulted=True),)),
    Case("count-defaulted-percentage-only", pod(ctr(limits={PCT: 50})),
         (want(pct=50, defaulted=True),)),
    Case("count-defaulted-cores-only", pod(ctr(limits={CORES: 30})),
         (want(pct=100, cores=30, defaulted=True),)),
    Case("count-defaulted-priority-only", pod(ctr(limits={PRIO: 1})),
         (want(pct=100, priority=1, defaulted=True),)),
    # --- boundaries ----------------------------------------------------------------------
    Case("percentage-1", pod(ctr(limits={GPU: 1, PCT: 1})), (want(pct=1),)),
    Case("cores-0-and-100",
         pod(ctr("a", {GPU: 1, CORES: 0}), ctr("b", {GPU: 1, CORES: 100})),
         (want("a", pct=100, cores=0), want("b", pct=100, cores=100))),
    Case("gpumem-1-mib", pod(ctr(limits={GPU: 1, MEM: 1})), (want(mib=1),)),
    Case("many-gpus", pod(ctr(limits={GPU: 16})), (want(count=16, pct=100),)),
    # --- configurable names ----------------------------------------------------------------
    Case("custom-resource-names",
         pod(ctr(limits={"example.com/vgpu": 2, "example.com/vmem": 1000,
                         "example.com/vcores": 10, "example.com/vprio": 1})),
         (want(count=2, mib=1000, cores=10, priority=1),), config=CUSTOM),
    Case("custom-names-ignore-nvidia-names",
         pod(ctr("nv", {GPU: 1}), ctr("ours", {"example.com/vmem-pct": 20})),
         (want("ours", pct=20, defaulted=True),), config=CUSTOM),
    # --- annotations -----------------------------------------------------------------------
    Case("annotations-empty-mapping", pod(ctr(limits={GPU: 1}), annotations={}),
         (want(pct=100),)),
    Case("annotations-null", pod(ctr(limits={GPU: 1}), annotations=None), (want(pct=100),)),
    Case("use-and-nouse-gputype-with-spaces",
         pod(ctr(limits={GPU: 1}), annotations={"nvidia.com/use-gputype": " a100 , H100,, ",
                                                 "nvidia.com/nouse-gputype": "MIG"}),
         (want(pct=100),),
         PodChoices(GpuSelector(use_types=("a100", "H100"), nouse_types=("MIG",)))),
    Case("use-and-nouse-uuids",
         pod(ctr(limits={GPU: 1}), annotations={"nvidia.com/use-gpuuuid": "GPU-a,GPU-b",
                                                 "nvidia.com/nouse-gpuuuid": "GPU-c"}),
         (want(pct=100),),
         PodChoices(GpuSelector(use_uuids=("GPU-a", "GPU-b"), nouse_uuids=("GPU-c",)))),
    Case("numa-bind-true",
         pod(ctr(limits={GPU: 2}), annotations={"nvidia.com/numa-bind": "true"}),
         (want(count=2, pct=100),), PodChoices(GpuSelector(numa_bind=True))),
    Case("numa-bind-false",
         pod(ctr(limits={GPU: 2}), annotations={"nvidia.com/numa-bind": "false"}),
         (want(count=2, pct=100),), PodChoices(GpuSelector(numa_bind=False))),
    Case("vgpu-io-policy-spellings",
         pod(ctr(limits={GPU: 1}), annotations={"vgpu.io/gpu-scheduler-policy": "spread",
                                                 "vgpu.io/node-scheduler-policy": "binpack"}),
         (want(pct=100),), PodChoices(gpu_policy="spread", node_policy="binpack")),
    Case("vgpu-io-spelling-wins-over-hami-io",
         pod(ctr(limits={GPU: 1}),
             annotations={"vgpu.io/gpu-scheduler-policy": "fragmentation-aware",
                          "hami.io/gpu-scheduler-policy": "binpack"}),
         (want(pct=100),), PodChoices(gpu_policy="fragmentation-aware")),
    Case("policy-value-trimmed",
         pod(ctr(limits={GPU: 1}), annotations={"hami.io/gpu-scheduler-policy": " spread "}),
         (want(pct=100),), PodChoices(gpu_policy="spread")),
    Case("unrelated-annotations-ignored",
         pod(ctr(limits={GPU: 1}), annotations={"example.com/owner": "team-a"}),
         (want(pct=100),)),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_parse_pod(case: Case) -> None:
    parsed = parse_pod(case.pod, case.config)
    assert parsed == PodRequest(containers=case.expected, choices=case.choices)
    assert parsed.is_gpu_pod is bool(case.expected)
    # names_gpu_resource is the webhook's cheap pre-check: it must agree with parse_pod.
    assert names_gpu_resource(case.pod, case.config) is bool(case.expected)


def test_at_least_thirty_pod_shapes() -> None:
    assert len(CASES) >= 30


def test_by_name_and_max_count() -> None:
    parsed = parse_pod(pod(ctr("a", {GPU: 1}), ctr("b", {GPU: 3}),
                           init=(ctr("i", {GPU: 2}),)), DEFAULT)
    assert set(parsed.by_name()) == {"a", "b", "i"}
    assert parsed.by_name()["i"].init is True
    assert parsed.max_count == 3
    assert parse_pod(pod(ctr("web")), DEFAULT).max_count == 0


@pytest.mark.parametrize(("cores", "exclusive"), [(0, False), (99, False), (100, True)])
def test_exclusive_means_all_cores(cores: int, exclusive: bool) -> None:
    parsed = parse_pod(pod(ctr(limits={GPU: 1, CORES: cores})), DEFAULT)
    assert parsed.containers[0].exclusive is exclusive


# --- rejected pods: the message names the container and the resource ------------------------

@dataclass(frozen=True)
class Bad:
    id: str
    pod: Any
    fragments: tuple[str, ...]
    config: Config = field(default=DEFAULT)
    error: type[RequestError] = RequestError


REJECTED: list[Bad] = [
    Bad("bad-string-gpumem", pod(ctr("trainer", {GPU: 1, MEM: "lots"})),
        ("container 'trainer'", MEM, "'lots'"), error=QuantityError),
    Bad("bad-string-count", pod(ctr("trainer", {GPU: "two"})),
        ("container 'trainer'", GPU, "'two'"), error=QuantityError),
    Bad("bad-string-in-requests", pod(ctr("trainer", requests={CORES: "30%"})),
        ("container 'trainer'", CORES, "'30%'"), error=QuantityError),
    Bad("bad-string-in-init-container",
        pod(ctr("app"), init=(ctr("warmup", {GPU: 1, PCT: "half"}),)),
        ("init container 'warmup'", PCT, "'half'"), error=QuantityError),
    Bad("milli-count-not-whole", pod(ctr("trainer", {GPU: "1500m"})),
        ("container 'trainer'", GPU, "not a whole number"), error=QuantityError),
    Bad("fractional-memory", pod(ctr("trainer", {GPU: 1, MEM: "1.5"})),
        ("container 'trainer'", MEM, "not a whole number"), error=QuantityError),
    Bad("fractional-json-number", pod(ctr("trainer", {GPU: 1, MEM: 100.5})),
        ("container 'trainer'", MEM, "not a whole number"), error=QuantityError),
    Bad("bool-quantity", pod(ctr("trainer", {GPU: True})),
        ("container 'trainer'", GPU, "not a quantity"), error=QuantityError),
    Bad("mapping-quantity", pod(ctr("trainer", {GPU: {"value": 1}})),
        ("container 'trainer'", GPU, "not a quantity"), error=QuantityError),
    Bad("huge-percentage", pod(ctr("trainer", {GPU: 1, PCT: "1" + "0" * 5000})),
        ("container 'trainer'", PCT, "out of range"), error=QuantityError),
    Bad("custom-name-in-message", pod(ctr("t", {"example.com/vmem": "x"})),
        ("container 't'", "example.com/vmem"), config=CUSTOM, error=QuantityError),
    Bad("both-gpumem-and-percentage", pod(ctr("trainer", {GPU: 1, MEM: 1000, PCT: 50})),
        ("container 'trainer'", MEM, PCT, "keep only one")),
    Bad("both-split-over-limits-and-requests",
        pod(ctr("trainer", limits={GPU: 1, MEM: 1000}, requests={PCT: 50})),
        ("container 'trainer'", MEM, PCT)),
    Bad("percentage-0", pod(ctr("trainer", {GPU: 1, PCT: 0})),
        ("container 'trainer'", PCT, "0", "between 1 and 100")),
    Bad("percentage-101", pod(ctr("trainer", {GPU: 1, PCT: 101})),
        ("container 'trainer'", PCT, "101", "between 1 and 100")),
    Bad("cores-101", pod(ctr("trainer", {GPU: 1, CORES: 101})),
        ("container 'trainer'", CORES, "101", "between 0 and 100")),
    Bad("cores-negative", pod(ctr("trainer", {GPU: 1, CORES: -1})),
        ("container 'trainer'", CORES, "-1", "between 0 and 100")),
    Bad("count-0", pod(ctr("trainer", {GPU: 0, MEM: 1000})),
        ("container 'trainer'", GPU, "at least 1")),
    Bad("count-negative", pod(ctr("trainer", {GPU: "-2"})),
        ("container 'trainer'", GPU, "-2")),
    Bad("gpumem-0", pod(ctr("trainer", {GPU: 1, MEM: 0})),
        ("container 'trainer'", MEM, "at least 1 MiB")),
    Bad("priority-2", pod(ctr("trainer", {GPU: 1, PRIO: 2})),
        ("container 'trainer'", PRIO, "2", "0 (high) or 1 (low)")),
    Bad("priority-negative", pod(ctr("trainer", {GPU: 1, PRIO: -1})),
        ("container 'trainer'", PRIO, "-1")),
    Bad("duplicate-container-names", pod(ctr("dup", {GPU: 1}), ctr("dup", {GPU: 1})),
        ("container 'dup'", "unique")),
    Bad("duplicate-init-and-regular-names",
        pod(ctr("dup", {GPU: 1}), init=(ctr("dup", {GPU: 1}),)),
        ("container 'dup'", "unique")),
    Bad("nameless-gpu-container", pod({"resources": {"limits": {GPU: 1}}}),
        ("spec.containers[0]", "name")),
    Bad("non-string-name", pod({"name": 7, "resources": {"limits": {GPU: 1}}}),
        ("spec.containers[0]", "name")),
    Bad("container-not-a-mapping", pod(ctr("a", {GPU: 1}), "not-a-container"),  # type: ignore[arg-type]
        ("spec.containers[1]", "mapping")),
    Bad("init-container-not-a-mapping", pod(ctr("a"), init=(["x"],)),  # type: ignore[arg-type]
        ("spec.initContainers[0]", "mapping")),
    Bad("resources-not-a-mapping", pod({"name": "a", "resources": ["limits"]}),
        ("container 'a'", "resources must be a mapping")),
    Bad("limits-not-a-mapping", pod({"name": "a", "resources": {"limits": [GPU]}}),
        ("container 'a'", "resources.limits")),
    Bad("requests-not-a-mapping", pod({"name": "a", "resources": {"requests": "1"}}),
        ("container 'a'", "resources.requests")),
    Bad("containers-not-a-list", {"spec": {"containers": {"name": "a"}}},
        ("spec.containers", "list")),
    Bad("pod-not-a-mapping", ["pod"], ("pod", "JSON object")),
    Bad("pod-without-spec", {"metadata": {"name": "x"}}, ("no spec",)),
    Bad("spec-not-a-mapping", {"spec": []}, ("no spec",)),
    Bad("metadata-not-a-mapping", {"metadata": "x", "spec": {"containers": []}},
        ("metadata",)),
    Bad("annotations-not-a-mapping",
        {"metadata": {"annotations": ["a"]}, "spec": {"containers": []}},
        ("annotations",)),
    Bad("unknown-gpu-policy-vgpu-io",
        pod(ctr(limits={GPU: 1}), annotations={"vgpu.io/gpu-scheduler-policy": "worst-fit"}),
        ("vgpu.io/gpu-scheduler-policy", "'worst-fit'", *policy.GPU_POLICIES)),
    Bad("unknown-gpu-policy-hami-io",
        pod(ctr(limits={GPU: 1}), annotations={"hami.io/gpu-scheduler-policy": "Binpack"}),
        ("hami.io/gpu-scheduler-policy", "'Binpack'", *policy.GPU_POLICIES)),
    Bad("unknown-node-policy-vgpu-io",
        pod(ctr(limits={GPU: 1}), annotations={"vgpu.io/node-scheduler-policy": "random"}),
        ("vgpu.io/node-scheduler-policy", "'random'", *policy.NODE_POLICIES)),
    Bad("unknown-node-policy-hami-io",
        pod(ctr(limits={GPU: 1}), annotations={"hami.io/node-scheduler-policy": ""}),
        ("hami.io/node-scheduler-policy", *policy.NODE_POLICIES)),
    Bad("gpu-policy-name-is-not-a-node-policy",
        pod(ctr(limits={GPU: 1}),
            annotations={"vgpu.io/node-scheduler-policy": "lowest-task-count"}),
        ("vgpu.io/node-scheduler-policy", "binpack, spread")),
    Bad("numa-bind-not-boolean",
        pod(ctr(limits={GPU: 1}), annotations={"nvidia.com/numa-bind": "maybe"}),
        ("nvidia.com/numa-bind", "'maybe'", "true")),
]


@pytest.mark.parametrize("case", REJECTED, ids=[c.id for c in REJECTED])
def test_parse_pod_rejects(case: Bad) -> None:
    with pytest.raises(case.error) as caught:
        parse_pod(case.pod, case.config)
    message = str(caught.value)
    for fragment in case.fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


# --- annotations select GPUs -------------------------------------------------------------

@pytest.mark.parametrize(
    ("annotations", "model", "uuid", "allowed"),
    [
        ({"nvidia.com/use-gputype": "a100"}, "NVIDIA A100-SXM4-40GB", "GPU-1", True),
        ({"nvidia.com/use-gputype": "A100"}, "nvidia a100-pcie", "GPU-1", True),
        ({"nvidia.com/use-gputype": "A100,V100"}, "Tesla V100-SXM2-32GB", "GPU-1", True),
        ({"nvidia.com/use-gputype": "A100,V100"}, "NVIDIA H100 80GB HBM3", "GPU-1", False),
        ({"nvidia.com/nouse-gputype": "1080,2080"}, "GeForce GTX 1080 Ti", "GPU-1", False),
        ({"nvidia.com/nouse-gputype": "1080,2080"}, "GeForce RTX 3090", "GPU-1", True),
        ({"nvidia.com/nouse-gputype": "t4"}, "Tesla T4", "GPU-1", False),
        ({"nvidia.com/use-gputype": "A100", "nvidia.com/nouse-gputype": "40GB"},
         "NVIDIA A100-SXM4-40GB", "GPU-1", False),
        ({"nvidia.com/use-gpuuuid": "GPU-1,GPU-2"}, "any", "GPU-2", True),
        ({"nvidia.com/use-gpuuuid": "GPU-1"}, "any", "GPU-12", False),
        ({"nvidia.com/use-gpuuuid": "gpu-1"}, "any", "GPU-1", False),
        ({"nvidia.com/nouse-gpuuuid": "GPU-1"}, "any", "GPU-1", False),
        ({"nvidia.com/nouse-gpuuuid": "GPU-1"}, "any", "GPU-10", True),
        ({}, "anything", "GPU-x", True),
    ],
    ids=["use-type-lower-matches-upper", "use-type-upper-matches-lower", "use-type-list",
         "use-type-list-miss", "nouse-type-substring", "nouse-type-miss", "nouse-type-case",
         "use-and-nouse-type", "use-uuid-list", "use-uuid-exact-not-prefix",
         "use-uuid-case-sensitive", "nouse-uuid", "nouse-uuid-exact", "unrestricted"],
)
def test_selector_from_annotations(annotations: dict[str, str], model: str, uuid: str,
                                   allowed: bool) -> None:
    selector = parse_pod(pod(ctr(limits={GPU: 1}), annotations=annotations), DEFAULT
                         ).choices.selector
    assert (selector.type_allowed(model) and selector.uuid_allowed(uuid)) is allowed
    assert selector.unrestricted is (not annotations)


# --- names_gpu_resource: the webhook's cheap test, never raises ------------------------------

NAMES: list[tuple[str, Any, bool]] = [
    ("gpu-in-limits", pod(ctr(limits={GPU: 1})), True),
    ("gpumem-in-requests", pod(ctr(requests={MEM: 10})), True),
    ("priority-only", pod(ctr(limits={PRIO: 1})), True),
    ("init-container-only", pod(ctr("a"), init=(ctr("i", {CORES: 5}),)), True),
    ("bad-quantity-still-names-it", pod(ctr(limits={GPU: "junk"})), True),
    ("cpu-only", pod(ctr(limits={"cpu": "1", "memory": "1Gi"})), False),
    ("other-vendor", pod(ctr(limits={"amd.com/gpu": 1})), False),
    ("no-containers", {"spec": {}}, False),
    ("none", None, False),
    ("list", [], False),
    ("string", "pod", False),
    ("spec-list", {"spec": []}, False),
    ("containers-string", {"spec": {"containers": "abc"}}, False),
    ("container-string", {"spec": {"containers": ["abc", 1, None]}}, False),
    ("resources-list", {"spec": {"containers": [{"resources": [GPU]}]}}, False),
    ("limits-list", {"spec": {"containers": [{"resources": {"limits": [GPU]}}]}}, False),
    ("limits-string", {"spec": {"containers": [{"resources": {"limits": GPU}}]}}, False),
    ("odd-keys", {"spec": {"containers": [{"resources": {"limits": {1: 2, (3,): 4}}}]}},
     False),
    ("garbage-then-gpu",
     {"spec": {"containers": ["x", {"resources": None}, {"resources": {"limits": {GPU: 1}}}]}},
     True),
]


@pytest.mark.parametrize(("obj", "expected"), [n[1:] for n in NAMES], ids=[n[0] for n in NAMES])
def test_names_gpu_resource(obj: Any, expected: bool) -> None:
    assert names_gpu_resource(obj, DEFAULT) is expected


def test_names_gpu_resource_uses_configured_names() -> None:
    assert names_gpu_resource(pod(ctr(limits={"example.com/vcores": 1})), CUSTOM) is True
    assert names_gpu_resource(pod(ctr(limits={GPU: 1})), CUSTOM) is False


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5)
    | st.sampled_from([GPU, MEM, "spec", "containers", "resources", "limits", "requests"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["spec", "containers", "initContainers", "resources", "limits",
                         "requests", "name", GPU, MEM]) | st.text(max_size=3),
        inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=100, deadline=None)
@given(_json)
def test_names_gpu_resource_never_raises(obj: Any) -> None:
    assert names_gpu_resource(obj, DEFAULT) in (True, False)


@settings(max_examples=100, deadline=None)
@given(_json)
def test_parse_pod_raises_only_request_errors(obj: Any) -> None:
    # Whatever arrives, the caller gets a PodRequest or a RequestError, never a traceback.
    with contextlib.suppress(RequestError):
        parse_pod(obj, DEFAULT)


# --- privileged containers ---------------------------------------------------------------

def test_privileged_gpu_containers() -> None:
    privileged = {"securityContext": {"privileged": True}}
    p = pod(
        ctr("gpu-priv", {GPU: 1}, **privileged),
        ctr("gpu-plain", {GPU: 1}),
        ctr("gpu-unprivileged", {GPU: 1}, securityContext={"privileged": False}),
        ctr("cpu-priv", {"cpu": "1"}, **privileged),
        init=(ctr("init-priv", {MEM: 100}, **privileged),),
    )
    request = parse_pod(p, DEFAULT)
    assert privileged_gpu_containers(p, request) == ["init-priv", "gpu-priv"]


def test_privileged_gpu_containers_none() -> None:
    p = pod(ctr("a", {GPU: 1}, securityContext=None), ctr("b", {GPU: 1}, securityContext="x"))
    assert privileged_gpu_containers(p, parse_pod(p, DEFAULT)) == []
