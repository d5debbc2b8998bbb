"""The derived quota requests: what each container carries, and what Kubernetes charges.

Each case gives a pod and the cluster the webhook knows, and expects, per container name,
the ``(vgpu.io/vgpus, vgpu.io/memory-mib, vgpu.io/cores)`` it must carry (in limits and
requests alike; a container not named carries none), or a denial. Every allowed case is
also checked against Kubernetes' own count of the patched pod (``vgpu.quota_charge.pod_charge``):
it must equal the sum of every GPU container's true total, with and without sidecar
support in the API server.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.webhook.pods import (
    HOMOGENEOUS,
    MIXED,
    NO_GPUS,
    admit,
    ctr,
    node_inventory,
    pod,
)
from tests.webhook.quota_support import THREE, derived_of, true_total, without_sidecars
from vgpu import quota_charge
from vgpu.config import Config, QuotaConfig, ResourceNames
from vgpu.pod_history import ADMISSION, decode_admission
from vgpu.pods import containers
from vgpu.quota_charge import Charge, pod_charge
from vgpu_webhook.gpus import ClusterGpus

GPU, MEM, PCT, CORES, PRIO = ResourceNames().all()
VG, MB, CO = quota_charge.NAMES
OFF = Config(quota=QuotaConfig(derived_requests=False))
SCALED = Config(device_memory_scaling=2.0)
FALLBACK = Config(quota=QuotaConfig(unknown_gpu_memory_mib=81920))
#: No GPU known, and a ResourceQuota of team-a (the pods' namespace) caps GPU memory.
CAPPED = ClusterGpus(capped=frozenset({"team-a"}))
THREE_CAPPED = ClusterGpus(kinds=THREE.kinds, max_gpus_per_node=8, nodes=3,
                           capped=frozenset({"team-a"}))
#: The operator's declared node-pool GPU types (quota.gpuTypes).
DECLARED = Config(quota=QuotaConfig(gpu_types=("NVIDIA H100 80GB HBM3=81559",
                                               "NVIDIA A100-SXM4-80GB=81920")))
CUSTOM = Config(resource_names=ResourceNames(gpu="example.com/vgpu", gpumem="example.com/mem",
                                             gpumem_percentage="example.com/mem-pct",
                                             gpucores="example.com/cores",
                                             priority="example.com/prio"))


def sidecar(name: str, limits: dict[str, Any]) -> dict[str, Any]:
    return {**ctr(name, limits), "restartPolicy": "Always"}


@dataclass(frozen=True)
class Case:
    name: str
    pod: dict[str, Any]
    #: per container name: (vgpus, MiB, cores) it carries; absent = none.
    expect: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    gpus: ClusterGpus = HOMOGENEOUS
    config: Config = field(default_factory=Config)
    denied: str | None = None


CASES = [
    # --- one container ------------------------------------------------------------------
    Case("one vGPU, MiB and cores", pod(ctr("c", {GPU: "1", MEM: "3000", CORES: "30"})),
         {"c": (1, 3000, 30)}),
    Case("the issue's example: gpu 2, gpumem 3000 is 6000 MiB",
         pod(ctr("c", {GPU: "2", MEM: "3000"})), {"c": (2, 6000, 0)}),
    Case("count defaulted to 1", pod(ctr("c", {MEM: "2000", CORES: "25"})),
         {"c": (1, 2000, 25)}),
    Case("binary-SI memory is MiB as Kubernetes reads it: 1Ki = 1024",
         pod(ctr("c", {GPU: "1", MEM: "1Ki"})), {"c": (1, 1024, 0)}),
    Case("requests only: mirrored, charged",
         pod(ctr("c", requests={GPU: "3", MEM: "1000", CORES: "5", "cpu": "1"})),
         {"c": (3, 3000, 15)}),
    Case("exclusive: 100 cores a vGPU, memory as given",
         pod(ctr("c", {GPU: "2", MEM: "4000", CORES: "100"})), {"c": (2, 8000, 200)}),
    Case("exclusive whole GPU by default: 100 % of the GPU, 100 cores",
         pod(ctr("c", {GPU: "1", CORES: "100"})), {"c": (1, 40960, 100)}),
    Case("priority only: no GPU, as in HAMi, so no charge", pod(ctr("c", {PRIO: "1"}))),
    Case("default memory from the config; no memory given is the whole GPU, exclusive",
         pod(ctr("c", {GPU: "2"})), {"c": (2, 2000, 200)},
         config=Config(default_mem=1000, default_cores=20)),
    Case("default memory and cores from the config", pod(ctr("c", {GPU: "2", PCT: "10"})),
         {"c": (2, 8192, 40)}, config=Config(default_cores=20)),
    Case("custom resource names: the derived names stay vgpu.io's",
         pod(ctr("c", {"example.com/vgpu": "2", "example.com/mem": "100"})),
         {"c": (2, 200, 0)}, config=CUSTOM),
    # --- several containers -------------------------------------------------------------
    Case("several GPU containers: each its own",
         pod(ctr("a", {GPU: "2", MEM: "1000", CORES: "10"}), ctr("b", {MEM: "500"})),
         {"a": (2, 2000, 20), "b": (1, 500, 0)}),
    Case("a container without GPUs carries none",
         pod(ctr("web", {"cpu": "1"}), ctr("train", {GPU: "1", MEM: "8000"}), ctr("log")),
         {"train": (1, 8000, 0)}),
    # --- init and sidecar containers ----------------------------------------------------
    Case("GPU init container inside the first app container's slice: nothing more, as "
         "Kubernetes counts init containers",
         pod(ctr("main", {GPU: "1", MEM: "1000"}), init=(ctr("warm", {GPU: "1", MEM: "500"}),)),
         {"main": (1, 1000, 0)}),
    Case("GPU init container larger than the app's slice: charged on the first app container",
         pod(ctr("main", {GPU: "1", MEM: "1000"}), init=(ctr("warm", {GPU: "1", MEM: "1500"}),)),
         {"main": (2, 2500, 0)}),
    Case("GPU init container of more vGPUs than the app's: charged",
         pod(ctr("main", {GPU: "1", MEM: "1000"}), init=(ctr("warm", {GPU: "2", MEM: "500"}),)),
         {"main": (3, 2000, 0)}),
    Case("GPU init container, percentage against MiB: cannot be compared, charged",
         pod(ctr("main", {GPU: "1", MEM: "1000"}), init=(ctr("warm", {GPU: "1", PCT: "1"}),)),
         {"main": (2, 1409, 0)}, gpus=MIXED),
    Case("GPU init container inside by percentage and cores",
         pod(ctr("main", {GPU: "2", PCT: "50", CORES: "40"}),
             init=(ctr("warm", {GPU: "1", PCT: "30", CORES: "40"}),)),
         {"main": (2, 40960, 80)}),
    Case("GPU init container before a CPU-only app: the app container carries it",
         pod(ctr("main", {"cpu": "1"}), init=(ctr("warm", {GPU: "2", MEM: "700"}),)),
         {"main": (2, 1400, 0)}),
    # A count alone on the second init container: its cores (defaulted to 100, a whole GPU)
    # move into vgpu.io/init-resources, the app container carries the charge; the second
    # pass reads the cores back from the record and changes nothing.
    Case("a count alone on the second init container, no GPU known: a whole GPU, no MiB",
         {"metadata": {"generateName": "job-"},
          "spec": {"containers": [{"name": "b", "resources": {}}],
                   "initContainers": [{"name": "c", "resources": {}},
                                      {"name": "a", "resources": {"limits": {GPU: "1"}}}]}},
         {"b": (1, 0, 100)}, gpus=NO_GPUS),
    Case("a count alone on the second init container: a whole A100's MiB",
         {"metadata": {"generateName": "job-"},
          "spec": {"containers": [{"name": "b", "resources": {}}],
                   "initContainers": [{"name": "c", "resources": {}},
                                      {"name": "a", "resources": {"limits": {GPU: "1"}}}]}},
         {"b": (1, 40960, 100)}),
    Case("two GPU init containers add up (Kubernetes' max rule alone would count one)",
         pod(ctr("main", {GPU: "1", MEM: "100"}),
             init=(ctr("i1", {GPU: "1", MEM: "1000"}), ctr("i2", {GPU: "1", MEM: "2000"}))),
         {"main": (3, 3100, 0)}),
    Case("init charges go to the first app container, GPU or not",
         pod(ctr("proxy"), ctr("train", {GPU: "1", MEM: "4000", CORES: "50"}),
             init=(ctr("warm", {GPU: "1", MEM: "5000", CORES: "10"}),)),
         {"proxy": (1, 5000, 10), "train": (1, 4000, 50)}),
    Case("sidecar GPU container: charged on the first app container",
         pod(ctr("main", {GPU: "1", MEM: "1000"}),
             init=(sidecar("metrics", {GPU: "1", MEM: "300", CORES: "5"}),)),
         {"main": (2, 1300, 5)}),
    Case("sidecar, plain init and app containers together",
         pod(ctr("main", {GPU: "2", MEM: "1000"}),
             init=(sidecar("s", {GPU: "1", MEM: "100"}), ctr("i", {GPU: "1", MEM: "5000"}))),
         {"main": (4, 7100, 0)}),
    Case("app container without resources gets a resources map",
         pod({"name": "main", "image": "x"}, init=(ctr("i", {GPU: "1", MEM: "10"}),)),
         {"main": (1, 10, 0)}),
    Case("app container with resources: null gets a resources map",
         pod({"name": "main", "image": "x", "resources": None},
             init=(ctr("i", {GPU: "1", MEM: "10"}),)),
         {"main": (1, 10, 0)}),
    # --- percentages --------------------------------------------------------------------
    Case("percentage, one GPU size: the resolved MiB",
         pod(ctr("c", {GPU: "2", PCT: "50"})), {"c": (2, 40960, 0)}),
    Case("percentage, two sizes: the larger GPU's share",
         pod(ctr("c", {GPU: "1", PCT: "50"})), {"c": (1, 20480, 0)}, gpus=MIXED),
    Case("whole-GPU default, two sizes: the larger GPU", pod(ctr("c", {GPU: "1"})),
         {"c": (1, 40960, 100)}, gpus=MIXED),
    Case("percentage, three sizes: the largest, the H100",
         pod(ctr("c", {GPU: "1", PCT: "25"})), {"c": (1, 20389, 0)}, gpus=THREE),
    Case("percentage, use-gputype T4: the T4's share",
         pod(ctr("c", {GPU: "1", PCT: "50"}), annotations={"nvidia.com/use-gputype": "T4"}),
         {"c": (1, 7680, 0)}, gpus=THREE),
    Case("percentage, nouse-gputype H100: the A100's share",
         pod(ctr("c", {GPU: "1", PCT: "50"}), annotations={"nvidia.com/nouse-gputype": "H100"}),
         {"c": (1, 20480, 0)}, gpus=THREE),
    Case("percentage, use-gpuuuid names one T4",
         pod(ctr("c", {GPU: "1", PCT: "10"}), annotations={"nvidia.com/use-gpuuuid": "GPU-t0-0"}),
         {"c": (1, 1536, 0)}, gpus=THREE),
    Case("percentage with memory scaling 2: of the scaled size",
         pod(ctr("c", {GPU: "1", PCT: "50"})), {"c": (1, 40960, 0)}, config=SCALED),
    Case("percentage, 1 % of a tiny GPU floors to 0 MiB, as the grant does",
         pod(ctr("c", {GPU: "1", PCT: "1"})), {"c": (1, 0, 0)},
         gpus=ClusterGpus.from_inventories([node_inventory("tiny", 50, 1, "z")])),
    # --- GPU pods before their nodes (scale from zero) ----------------------------------
    Case("percentage, no GPU known, a quota caps GPU memory: refused, not under-charged",
         pod(ctr("c", {GPU: "1", PCT: "50"})), gpus=CAPPED,
         denied="no GPU it may land on is known yet"),
    Case("whole-GPU default, no GPU known, a quota caps GPU memory: refused",
         pod(ctr("c", {GPU: "1"})), gpus=CAPPED, denied="asks for 100% of a GPU's memory"),
    Case("percentage, annotations exclude every known GPU, a quota caps: refused",
         pod(ctr("c", {GPU: "1", PCT: "50"}), annotations={"nvidia.com/use-gputype": "B200"}),
         gpus=THREE_CAPPED, denied="quota.gpuTypes"),
    Case("percentage in an init container, no GPU known, a quota caps: refused",
         pod(ctr("c", {GPU: "1", MEM: "10"}), init=(ctr("i", {PCT: "5"}),)), gpus=CAPPED,
         denied="container 'i'"),
    Case("percentage, no GPU known, no quota caps GPU memory: admitted, no memory charged",
         pod(ctr("c", {GPU: "2", PCT: "50"})), {"c": (2, 0, 0)}, gpus=NO_GPUS),
    Case("whole GPU, no GPU known, a quota in another namespace: admitted",
         pod(ctr("c", {GPU: "1"})), {"c": (1, 0, 100)},
         gpus=ClusterGpus(capped=frozenset({"team-b"}))),
    Case("percentage, no node up, a type seen before: its share",
         pod(ctr("c", {GPU: "1", PCT: "50"})), {"c": (1, 40960, 0)},
         gpus=ClusterGpus(capped=frozenset({"team-a"})).with_facts(
             [("NVIDIA A100-SXM4-80GB", 81920)], frozenset({"team-a"}))),
    Case("percentage, no node up, the operator's declared node-pool types: the largest allowed",
         pod(ctr("c", {GPU: "1", PCT: "50"}), annotations={"nvidia.com/nouse-gputype": "H100"}),
         {"c": (1, 40960, 0)}, gpus=CAPPED, config=DECLARED),
    Case("percentage, a small GPU up, a larger one declared: the larger",
         pod(ctr("c", {GPU: "1", PCT: "10"})), {"c": (1, 8192, 0)}, config=DECLARED),
    Case("percentage, no inventory, unknownGpuMemoryMib set: its share",
         pod(ctr("c", {GPU: "2", PCT: "50"})), {"c": (2, 81920, 0)}, gpus=NO_GPUS,
         config=FALLBACK),
    Case("percentage, no GPU allowed known, unknownGpuMemoryMib set: its share",
         pod(ctr("c", {GPU: "1", PCT: "25"}), annotations={"nvidia.com/use-gputype": "B200"}),
         {"c": (1, 20480, 0)}, gpus=MIXED, config=FALLBACK),
    Case("MiB needs no inventory", pod(ctr("c", {GPU: "1", MEM: "3000"})),
         {"c": (1, 3000, 0)}, gpus=NO_GPUS),
    # --- what the pod wrote under the derived names --------------------------------------
    Case("a GPU container's own values are replaced",
         pod(ctr("c", {GPU: "2", MEM: "1000", MB: "0", VG: "0"}, {MB: "0", VG: "0"})),
         {"c": (2, 2000, 0)}),
    Case("an init container's own values are removed",
         pod(ctr("c", {GPU: "1", MEM: "10"}),
             init=(ctr("i", {GPU: "1", MEM: "20", MB: "99999"}, {MB: "99999"}),)),
         {"c": (2, 30, 0)}),
    Case("a CPU-only container's own values are removed",
         pod(ctr("c", {GPU: "1", MEM: "10"}), ctr("x", {CO: "7", "cpu": "1"}, {CO: "7"})),
         {"c": (1, 10, 0)}),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_derived_requests(case: Case) -> None:
    response, patched = admit(case.pod, case.gpus, case.config)
    if case.denied is not None:
        assert response["allowed"] is False
        assert response["status"]["code"] == 403
        assert case.denied in response["status"]["message"]
        assert "quota" in response["status"]["message"]
        return
    assert response["allowed"] is True, response.get("status")
    carried = {}
    for ref in containers(patched):
        limits, requests = derived_of(ref.container)
        # Requests and limits equal, whole numbers, all three or none.
        assert limits == requests
        if limits:
            assert set(limits) == set(quota_charge.NAMES) and not ref.init
            carried[ref.name] = (int(limits[VG]), int(limits[MB]), int(limits[CO]))
    assert carried == case.expect
    expected = Charge()
    for vgpus, mib, cores in case.expect.values():
        expected += Charge(vgpus, mib, cores)
    # Kubernetes charges exactly what vgpu will hold, whether its API server knows sidecars.
    assert pod_charge(patched) == expected == true_total(patched, case.config, case.gpus)
    assert pod_charge(without_sidecars(patched)) == expected
    again, _ = admit(patched, case.gpus, case.config)
    assert again["allowed"] is True and "patch" not in again


def test_enough_cases() -> None:
    assert len(CASES) >= 30
    assert len({c.name for c in CASES}) == len(CASES)


def test_switched_off_nothing_is_derived_and_the_pods_values_stay() -> None:
    own = pod(ctr("c", {GPU: "1", MEM: "10", MB: "5"}, {MB: "5"}),
              init=(ctr("i", {GPU: "1", MEM: "10"}),))
    response, patched = admit(own, HOMOGENEOUS, OFF)
    assert response["allowed"] is True
    main, = patched["spec"]["containers"]
    assert derived_of(main) == ({MB: "5"}, {MB: "5"})
    assert derived_of(patched["spec"]["initContainers"][0]) == ({}, {})
    # And a whole-GPU pod with no inventory is not refused for the quota's sake.
    response, _ = admit(pod(ctr("c", {GPU: "1"})), NO_GPUS, OFF)
    assert response["allowed"] is True


def test_values_in_the_api_servers_canonical_form_are_kept() -> None:
    # The API server stores 3000 as "3k"; a reinvocation must not rewrite it.
    derived = {VG: "1", MB: "3k", CO: "0"}
    stored = pod(ctr("c", {GPU: "1", MEM: "3000", **derived}, dict(derived)),
                 scheduler="vgpu-scheduler")
    response, _ = admit(stored, HOMOGENEOUS)
    assert response["allowed"] is True and "patch" not in response


def test_the_record_lists_the_derived_requests() -> None:
    _, patched = admit(pod(ctr("c", {GPU: "1", MEM: "3000"})), HOMOGENEOUS)
    changes = decode_admission(patched["metadata"]["annotations"][ADMISSION])
    assert any(line.startswith("containers[c].resources.limits[vgpu.io/memory-mib]: \"3000\"")
               for line in changes), changes
