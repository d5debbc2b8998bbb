"""Request parsing: the pods users write, turned into per-container GPU requests.

The first table holds the examples of the HAMi / 4paradigm k8s-vgpu-scheduler README and its
``examples/nvidia/*.yaml`` (so pods written for HAMi keep their meaning), then the shapes
the defaulting rules of docs/contracts.md#request-defaults must cover. The pods
``parse_pod`` refuses are in ``test_request_errors``; the selector, ``names_gpu_resource``
and privileged containers in ``test_request_checks``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.unit.requests_support import CORES, CUSTOM, DEFAULT, GPU, MEM, PCT, PRIO, ctr, pod
from vgpu.annotations import GpuSelector, PodChoices
from vgpu.config import Config
from vgpu.hami_fields import parse_gpu_policy
from vgpu.requests import ContainerRequest, PodRequest, names_gpu_resource, parse_pod

DEFAULT_MEM_2048 = Config(default_mem=2048)
DEFAULT_CORES_20 = Config(default_cores=20)


def want(name: str = "main", count: int = 1, *, mib: int | None = None,
         pct: int | None = None, cores: int = 0, priority: int | None = None,
         init: bool = False, defaulted: bool = False, excl: bool = False) -> ContainerRequest:
    """``excl``: a whole GPU's memory and no cores, exclusive by HAMi's rule."""
    return ContainerRequest(name=name, count=count, memory_mib=mib, memory_percent=pct,
                            cores=100 if excl else cores, priority=priority, init=init,
                            count_defaulted=defaulted, cores_defaulted=excl)


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
         (want("ubuntu-container", 2, pct=100, excl=True),)),
    Case("hami-priority-high",
         pod(ctr("ubuntu-container", {GPU: 1, MEM: 3000, PRIO: 0})),
         (want("ubuntu-container", 1, mib=3000, priority=0),)),
    Case("hami-specify-card-type-to-use",
         pod(ctr("ubuntu-container", {GPU: 2}),
             annotations={"nvidia.com/use-gputype": "A100,V100"}),
         (want("ubuntu-container", 2, pct=100, excl=True),),
         PodChoices(GpuSelector(use_types=("A100", "V100")))),
    Case("hami-specify-card-type-not-use",
         pod(ctr("ubuntu-container", {GPU: 2}),
             annotations={"nvidia.com/nouse-gputype": "1080,2080"}),
         (want("ubuntu-container", 2, pct=100, excl=True),),
         PodChoices(GpuSelector(nouse_types=("1080", "2080")))),
    Case("hami-specify-uuid-to-use",
         pod(ctr("ubuntu-container", {GPU: 1}),
             annotations={"nvidia.com/use-gpuuuid": "GPU-123456"}),
         (want("ubuntu-container", 1, pct=100, excl=True),),
         PodChoices(GpuSelector(use_uuids=("GPU-123456",)))),
    Case("hami-specify-uuid-not-use",
         pod(ctr("ubuntu-container", {GPU: 2}),
             annotations={"nvidia.com/nouse-gpuuuid": "GPU-123456"}),
         (want("ubuntu-container", 2, pct=100, excl=True),),
         PodChoices(GpuSelector(nouse_uuids=("GPU-123456",)))),
    Case("hami-specify-scheduling-policy",
         pod(ctr("ubuntu-container", {GPU: 1}),
             annotations={"hami.io/node-scheduler-policy": "spread",
                          "hami.io/gpu-scheduler-policy": "binpack"}),
         (want("ubuntu-container", 1, pct=100, excl=True),),
         PodChoices(node_policy="hami-spread", hami_gpu=parse_gpu_policy("binpack"))),
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
         (want(pct=100, excl=True),)),
    Case("string-quantities",
         pod(ctr(limits={GPU: "2", MEM: "3000", CORES: "30"})),
         (want(count=2, mib=3000, cores=30),)),
    Case("quantity-3k", pod(ctr(limits={GPU: 1, MEM: "3k"})), (want(mib=3000),)),
    Case("quantity-3Ki", pod(ctr(limits={GPU: 1, MEM: "3Ki"})), (want(mib=3072),)),
    Case("quantity-1e3", pod(ctr(limits={GPU: 1, MEM: "1e3"})), (want(mib=1000),)),
    Case("quantity-2000m-count", pod(ctr(limits={GPU: "2000m"})),
         (want(count=2, pct=100, excl=True),)),
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
         (want("trainer", pct=100, excl=True),)),
    Case("no-gpu-anywhere",
         pod(ctr("web", {"cpu": "1"}), init=(ctr("setup"),)),
         ()),
    Case("container-without-resources",
         pod({"name": "plain"}, ctr("gpu", {GPU: 1})),
         (want("gpu", pct=100, excl=True),)),
    Case("resources-null-sections",
         pod({"name": "x", "resources": {"limits": None, "requests": None}},
             ctr("gpu", {GPU: 1})),
         (want("gpu", pct=100, excl=True),)),
    # --- defaulting ----------------------------------------------------------------------
    Case("default-mem-0-means-whole-gpu", pod(ctr(limits={GPU: 1})),
         (want(pct=100, excl=True),)),
    # HAMi's webhook: a count and no memory is the whole GPU, so exclusive, defaultMem or not.
    Case("default-mem-positive-is-mib", pod(ctr(limits={GPU: 1})),
         (want(mib=2048, excl=True),), config=DEFAULT_MEM_2048),
    Case("default-mem-does-not-override-percentage", pod(ctr(limits={GPU: 1, PCT: 10})),
         (want(pct=10),), config=DEFAULT_MEM_2048),
    Case("default-mem-does-not-override-mib", pod(ctr(limits={GPU: 1, MEM: 100})),
         (want(mib=100),), config=DEFAULT_MEM_2048),
    Case("default-cores-applied", pod(ctr(limits={GPU: 1, MEM: 1000})),
         (want(mib=1000, cores=20),), config=DEFAULT_CORES_20),
    Case("default-cores-not-for-a-whole-gpu", pod(ctr(limits={GPU: 1})),
         (want(pct=100, excl=True),), config=DEFAULT_CORES_20),
    Case("explicit-zero-cores-beats-default", pod(ctr(limits={GPU: 1, CORES: 0})),
         (want(pct=100, cores=0),), config=DEFAULT_CORES_20),
    Case("count-defaulted-memory-only", pod(ctr(limits={MEM: 3000})),
         (want(mib=3000, defaulted=True),)),
    Case("count-defaulted-percentage-only", pod(ctr(limits={PCT: 50})),
         (want(pct=50, defaulted=True),)),
    Case("count-defaulted-cores-only", pod(ctr(limits={CORES: 30})),
         (want(pct=100, cores=30, defaulted=True),)),
    # --- boundaries ----------------------------------------------------------------------
    Case("percentage-1", pod(ctr(limits={GPU: 1, PCT: 1})), (want(pct=1),)),
    Case("cores-0-and-100",
         pod(ctr("a", {GPU: 1, CORES: 0}), ctr("b", {GPU: 1, CORES: 100})),
         (want("a", pct=100, cores=0), want("b", pct=100, cores=100))),
    Case("gpumem-1-mib", pod(ctr(limits={GPU: 1, MEM: 1})), (want(mib=1),)),
    Case("many-gpus", pod(ctr(limits={GPU: 16})), (want(count=16, pct=100, excl=True),)),
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
         (want(pct=100, excl=True),)),
    Case("annotations-null", pod(ctr(limits={GPU: 1}), annotations=None),
         (want(pct=100, excl=True),)),
    Case("use-and-nouse-gputype-with-spaces",
         pod(ctr(limits={GPU: 1}), annotations={"nvidia.com/use-gputype": " a100 , H100,, ",
                                                 "nvidia.com/nouse-gputype": "MIG"}),
         (want(pct=100, excl=True),),
         PodChoices(GpuSelector(use_types=("a100", "H100"), nouse_types=("MIG",)))),
    Case("use-and-nouse-uuids",
         pod(ctr(limits={GPU: 1}), annotations={"nvidia.com/use-gpuuuid": "GPU-a,GPU-b",
                                                 "nvidia.com/nouse-gpuuuid": "GPU-c"}),
         (want(pct=100, excl=True),),
         PodChoices(GpuSelector(use_uuids=("GPU-a", "GPU-b"), nouse_uuids=("GPU-c",)))),
    Case("numa-bind-true",
         pod(ctr(limits={GPU: 2}), annotations={"nvidia.com/numa-bind": "true"}),
         (want(count=2, pct=100, excl=True),), PodChoices(GpuSelector(numa_bind=True))),
    Case("numa-bind-false",
         pod(ctr(limits={GPU: 2}), annotations={"nvidia.com/numa-bind": "false"}),
         (want(count=2, pct=100, excl=True),), PodChoices(GpuSelector(numa_bind=False))),
    Case("vgpu-io-policy-spellings",
         pod(ctr(limits={GPU: 1}), annotations={"vgpu.io/gpu-scheduler-policy": "spread",
                                                 "vgpu.io/node-scheduler-policy": "binpack"}),
         (want(pct=100, excl=True),), PodChoices(gpu_policy="spread", node_policy="binpack")),
    Case("vgpu-io-spelling-wins-over-hami-io",
         pod(ctr(limits={GPU: 1}),
             annotations={"vgpu.io/gpu-scheduler-policy": "fragmentation-aware",
                          "hami.io/gpu-scheduler-policy": "binpack"}),
         (want(pct=100, excl=True),), PodChoices(gpu_policy="fragmentation-aware")),
    Case("policy-value-trimmed",
         pod(ctr(limits={GPU: 1}), annotations={"hami.io/gpu-scheduler-policy": " spread "}),
         (want(pct=100, excl=True),), PodChoices(hami_gpu=parse_gpu_policy(" spread "))),
    Case("gpu-topology-required",
         pod(ctr(limits={GPU: 2}), annotations={"vgpu.io/gpu-topology": " Required "}),
         (want(count=2, pct=100, excl=True),), PodChoices(topology="required")),
    Case("gpu-topology-preferred",
         pod(ctr(limits={GPU: 2}), annotations={"vgpu.io/gpu-topology": "preferred"}),
         (want(count=2, pct=100, excl=True),), PodChoices(topology="preferred")),
    Case("unrelated-annotations-ignored",
         pod(ctr(limits={GPU: 1}), annotations={"example.com/owner": "team-a"}),
         (want(pct=100, excl=True),)),
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
