"""HAMi's pod annotations: GPU type names (pkg/device/nvidia/device_test.go), policy chains
(pkg/util/util_test.go) and scoring weights (pkg/util/device_scoring_weights_test.go)."""

from __future__ import annotations

from typing import Any

from tests.hami.rows import Row
from vgpu import hami_fields
from vgpu.annotations import parse_pod_choices
from vgpu.config import Config
from vgpu.errors import RequestError

DEV = "pkg/device/nvidia/device_test.go"
UTIL = "pkg/util/util_test.go"
WEIGHTS = "pkg/util/device_scoring_weights_test.go"
USE, NOUSE, MODE = "nvidia.com/use-gputype", "nvidia.com/nouse-gputype", "nvidia.com/vgpu-mode"


def type_ok(annotations: dict[str, str], model: str) -> bool:
    return parse_pod_choices(annotations).selector.type_allowed(model)


def mode_ok(annotations: dict[str, str], mode: str) -> bool:
    return parse_pod_choices(annotations).selector.mode_allowed(mode)


def contains(value: str, target: str) -> bool:
    parsed = hami_fields.parse_gpu_policy(value)
    if target == hami_fields.MUTEX:
        return parsed.mutex
    if target == hami_fields.TOPOLOGY_AWARE:
        return parsed.topology
    return target in parsed.keys


def policy_of(default: str, annotations: dict[str, str] | None) -> str:
    choices = parse_pod_choices(annotations)
    config = Config(default_gpu_policy=default)
    if choices.hami_gpu is not None:
        return choices.hami_gpu.raw
    return choices.gpu_policy or config.default_gpu_policy


def weights(value: str) -> Any:
    try:
        w = hami_fields.parse_scoring_weights(value)
    except RequestError as e:
        return ("refused", str(e))
    return (w.slot, w.core, w.memory)


def _weights_or_default(annotations: dict[str, str]) -> tuple[int, int, int]:
    w = parse_pod_choices(annotations).weights or hami_fields.DEFAULT_WEIGHTS
    return (w.slot, w.core, w.memory)


def refused(value: str) -> str:
    got = weights(value)
    return "refused" if got[0] == "refused" else "accepted"


def _rows() -> list[Row]:
    rows: list[Row] = []
    for case, annos, model, want in [
        ("use A10, device NVIDIA A100", {USE: "A10"}, "NVIDIA A100", True),
        ("use A10 nouse A100, device NVIDIA A100", {USE: "A10", NOUSE: "A100"},
         "NVIDIA A100", False),
        ("use A10 nouse A100, device NVIDIA A10", {USE: "A10", NOUSE: "A100"},
         "NVIDIA A10", True),
    ]:
        rows.append(Row(f"{DEV}: Test_checkType/{case}",
                        lambda a=annos, m=model: type_ok(a, m), want))
    for case, annos, model, want in [
        ("NoUse A100 vs NVIDIA-A100", {NOUSE: "A100"}, "NVIDIA-A100", False),
        ("NoUse A100 vs NVIDIA-V100", {NOUSE: "A100"}, "NVIDIA-V100", True),
        ("EmptyAnnotation use ''", {USE: ""}, "NVIDIA-A100", True),
        ("EmptyAnnotation use blanks", {USE: "   "}, "NVIDIA-A100", True),
        ("EmptyAnnotation nouse ''", {NOUSE: ""}, "NVIDIA-A100", True),
        ("EmptyAnnotation nouse blanks", {NOUSE: "   "}, "NVIDIA-A100", True),
        ("InUseMismatch", {USE: "A100"}, "NVIDIA-V100", False),
        # HAMi registers a driver name without the prefix as NVIDIA-<name> (device.go).
        ("registered name: use NVIDIA on Tesla T4", {USE: "NVIDIA"}, "Tesla T4", True),
        ("registered name: nouse NVIDIA-Tesla on Tesla V100", {NOUSE: "NVIDIA-Tesla"},
         "Tesla V100-SXM2-16GB", False),
    ]:
        rows.append(Row(f"{DEV}: TestCheckGPUtype/{case}",
                        lambda a=annos, m=model: type_ok(a, m), want))
    for case, annos, mode, want in [
        ("mps vs hami-core", {MODE: "mps"}, "hami-core", False),
        ("hami-core vs hami-core", {MODE: "hami-core"}, "hami-core", True),
    ]:
        rows.append(Row(f"{DEV}: TestCheckType_AllocateMode/{case}",
                        lambda a=annos, m=mode: mode_ok(a, m), want))
    for case, value, target, want in [
        ("single value match", "mutex", "mutex", True),
        ("single value no match", "spread", "mutex", False),
        ("empty policy", "", "mutex", False),
        ("comma list match first", "mutex,spread", "mutex", True),
        ("comma list match last", "spread,numa,mutex", "mutex", True),
        ("comma list no match", "binpack,spread", "mutex", False),
        ("comma list with spaces", "mutex, spread, numa", "numa", True),
        ("chain of sort keys, no filter", "binpack,spread,numa", "topology-aware", False),
    ]:
        rows.append(Row(f"{UTIL}: TestPolicyContains/{case}",
                        lambda v=value, t=target: contains(v, t), want))
    for case, annos, want in [
        ("no annotation", None, "binpack"),
        ("other annotations", {"other-annotation": "value"}, "binpack"),
        ("with annotation", {"hami.io/gpu-scheduler-policy": "spread"}, "spread"),
    ]:
        rows.append(Row(f"{UTIL}: TestGetGPUSchedulerPolicyByPod/{case}",
                        lambda a=annos: policy_of("binpack", a), want))
    for case, value, want in [
        ("valid ordered weights", "slot=1,core=2,memory=3", (1, 2, 3)),
        ("valid reordered weights and whitespace", " memory = 3, slot = 1, core = 0 ",
         (1, 0, 3)),
    ]:
        rows.append(Row(f"{WEIGHTS}: TestParseDeviceScoringWeights/{case}",
                        lambda v=value: weights(v), want))
    for case, value in [
        ("empty annotation", ""), ("missing dimension", "slot=1,memory=3"),
        ("malformed entry", "slot=1,core,memory=3"),
        ("non-integer", "slot=1,core=high,memory=3"),
        ("negative", "slot=1,core=-1,memory=3"),
        ("unknown key", "slot=1,bandwidth=2,memory=3"),
        ("duplicate key", "slot=1,slot=2,memory=3"),
        ("all zero", "slot=0,core=0,memory=0"),
    ]:
        rows.append(Row(f"{WEIGHTS}: TestParseDeviceScoringWeights/{case}",
                        lambda v=value: refused(v), "refused"))
    rows.append(Row(f"{WEIGHTS}: TestGetDeviceScoringWeightsByPod/missing annotation",
                    lambda: _weights_or_default({}), (1, 1, 1)))
    rows.append(Row(f"{WEIGHTS}: TestGetDeviceScoringWeightsByPod/invalid annotation",
                    lambda: refused("slot=1,core=-1,memory=3"), "refused"))
    return rows


ROWS = _rows()
