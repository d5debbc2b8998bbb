from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from vgpu.errors import DiscoveryError
from vgpu_nodeagent.devices.discovery import GpuFacts, GpuSample
from vgpu_nodeagent.devices.fake import FakeDiscovery, parse

YAML = """
devices:
  - uuid: GPU-a
    index: 1
    model: NVIDIA A100-SXM4-40GB
    memory_mib: 40960
    numa: 1
    memory_used_mib: 512
    utilization: 12
  - {uuid: GPU-b, index: 0, model: Tesla T4, memory_mib: 15360, healthy: false}
"""


def test_yaml_with_optional_keys() -> None:
    read = parse(YAML, "gpus.yaml")
    facts, samples = read.facts, read.samples
    assert read.links is None  # no links: an unknown topology
    assert facts == (GpuFacts("GPU-b", 0, "Tesla T4", 15360, numa=-1, healthy=False),
                     GpuFacts("GPU-a", 1, "NVIDIA A100-SXM4-40GB", 40960, numa=1))
    assert samples == {"GPU-a": GpuSample(512, 12), "GPU-b": GpuSample(None, None)}


def test_json() -> None:
    text = json.dumps({"devices": [{"uuid": "GPU-a", "index": 0, "model": "A10",
                                    "memory_mib": 24576, "numa": 0}]})
    assert parse(text, "gpus.json").facts == (GpuFacts("GPU-a", 0, "A10", 24576, numa=0),)


def dev(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"uuid": "GPU-a", "index": 0, "model": "A10", "memory_mib": 100}
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


@pytest.mark.parametrize(("document", "message"), [
    ("devices: [", "f: not valid YAML or JSON"),
    ("[]", "f: expected a mapping with a list under 'devices'"),
    ({"gpus": []}, "expected a mapping with a list under 'devices'"),
    ({"devices": ["x"]}, "f: devices[0]: expected a mapping"),
    ({"devices": [dev(uuid=None)]}, "devices[0].uuid: expected a non-empty string"),
    ({"devices": [dev(model="")]}, "devices[0].model: expected a non-empty string"),
    ({"devices": [dev(index=None)]}, "devices[0]: index is missing"),
    ({"devices": [dev(memory_mib=0)]}, "devices[0].memory_mib: 0 is out of range"),
    ({"devices": [dev(memory_mib="40Gi")]}, "devices[0].memory_mib: expected an integer"),
    ({"devices": [dev(numa=-2)]}, "devices[0].numa: -2 is out of range"),
    ({"devices": [dev(utilization=101)]}, "utilization: 101 is out of range; it must be "
                                          "between 0 and 100"),
    ({"devices": [dev(healthy="yes")]}, "devices[0].healthy: expected true or false"),
    ({"devices": [dev(colour="green")]}, "devices[0].colour: unknown key"),
    ({"devices": [dev(), dev(index=1)]}, "devices[1].uuid: GPU-a appears twice"),
    ({"devices": [dev(), dev(uuid="GPU-b")]}, "devices[1].index: 0 appears twice"),
    ({"devices": [dev(compute_major=100)]}, "devices[0].compute_major: 100 is out of range"),
    ({"devices": [dev()], "cuda_driver_version": "13.0"}, "f.cuda_driver_version: expected an "
                                                          "integer"),
    ({"devices": [dev()], "cuda_driver_version": 999}, "f.cuda_driver_version: 999 is out of "
                                                       "range"),
])
def test_bad_files_say_what_and_where(document: Any, message: str) -> None:
    text = document if isinstance(document, str) else json.dumps(document)
    with pytest.raises(DiscoveryError) as info:
        parse(text, "f")
    assert message in str(info.value)


def test_the_driver_and_compute_capability_as_nvml_gives_them() -> None:
    read = parse(json.dumps({"devices": [dev(compute_major=9)],
                             "cuda_driver_version": 12040}), "f")
    assert read.cuda_driver_version == 12040 and read.facts[0].compute_major == 9
    assert parse(json.dumps({"devices": [dev()]}), "f").cuda_driver_version is None


def write(path: Path, devices: list[dict[str, Any]]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"devices": devices}))
    os.replace(tmp, path)


def test_reread_when_the_file_changes(tmp_path: Path) -> None:
    path = tmp_path / "gpus.json"
    write(path, [dev()])
    fake = FakeDiscovery(str(path))
    assert fake.refresh() is False
    write(path, [dev(healthy=False)])
    assert fake.refresh() is True
    assert fake.devices()[0].healthy is False
    write(path, [dev(healthy=False, utilization=50)])
    assert fake.refresh() is False  # samples changed, facts did not
    assert fake.samples()["GPU-a"].utilization == 50


def test_a_broken_rewrite_keeps_the_last_devices(tmp_path: Path) -> None:
    path = tmp_path / "gpus.json"
    write(path, [dev()])
    fake = FakeDiscovery(str(path))
    path.write_text("{broken")
    assert fake.refresh() is False
    assert fake.devices() == (GpuFacts("GPU-a", 0, "A10", 100),)
    path.unlink()
    assert fake.refresh() is False
    write(path, [dev(), dev(uuid="GPU-b", index=1)])
    assert fake.refresh() is True
    assert len(fake.devices()) == 2


def test_missing_file_at_startup(tmp_path: Path) -> None:
    with pytest.raises(DiscoveryError, match="cannot read the fake-device file"):
        FakeDiscovery(str(tmp_path / "none.yaml"))
