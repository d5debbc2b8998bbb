"""bench/isolation.py's checks end to end on a machine without a GPU: the real node agent,
kubelet stand-in and watchdog, with NVML, the MPS control daemon and the CUDA child played
by stand-ins. What it proves is the plumbing (every check runs, each Allocate answer
reaches its child, the JSON and its targets); what a GPU does is the device run's to say
(docs/isolation.md#measurements)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support import hami_standin

ROOT = Path(__file__).resolve().parents[2]
FAKE_CHILD = ROOT / "tests" / "ops" / "fake_isolation_child.py"
FAKE_CONTROL = ROOT / "tests" / "support" / "fake_mps_control.py"

RUN = """
import runpy, sys, types
sys.path.insert(0, "bench")
from tests.nodeagent import fake_pynvml
import _isolation_node as nodes

nodes.CHILD = {child!r}
spawned = []
real_spawn = nodes.spawn
def spawn(env, *args):
    proc = real_spawn(env, *args)
    spawned.append((proc, args))
    return proc
nodes.spawn = spawn

class Nvml(fake_pynvml.FakeNvml):
    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        # A hold child's memory as NVML counts it: its block and a CUDA context.
        return [fake_pynvml.Struct({{"pid": p.pid, "usedGpuMemory": (a[1] + 500) << 20}})
                for p, a in spawned if a[0] == "hold" and p.poll() is None]

sys.modules["pynvml"] = Nvml([fake_pynvml.Gpu("GPU-0", name="NVIDIA H100 80GB HBM3",
                                                  total=81559 << 20)])
sys.modules["torch"] = types.ModuleType("torch")
sys.argv = ["bench/isolation.py", "--seconds", "0.2", "--settle", "0.3",
            "--mps-control", {control!r}, "--checks", "mps,pair,fault,restart,watchdog"]
runpy.run_path("bench/isolation.py", run_name="__main__")
"""


def test_every_check_runs_through_the_agent() -> None:
    code = RUN.format(child=str(FAKE_CHILD),
                      control=f"{sys.executable} {FAKE_CONTROL}")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["gpu"] == "NVIDIA H100 80GB HBM3"
    # The agent's answers reached the children: limits in, the share scaled.
    mps = out["mps"]
    assert mps["env"]["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=4096M"
    assert mps["env"]["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "30"
    assert mps["mode"] == "mps" and mps["enforced_by_agent"] is True
    assert mps["ratio_vs_unlimited"] == 0.3
    pair = out["pair"]
    assert [pair[f"client{i}"]["env"]["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"]
            for i in range(2)] == ["0=4096M", "0=8192M"]
    assert pair["split"] == 1.0 and pair["sum_ratio_vs_unlimited"] == 1.0
    assert out["fault"]["faulting_client"]["faulted"] is True
    assert out["fault"]["new_client_after"]["tflops"] > 0
    restart = out["restart"]
    assert restart["adopted"] is True, restart
    assert restart["before"]["daemon"]["starts"] == 1
    dog = out["watchdog"]
    assert [b["pod"] for b in dog["breaches"]] == ["default/over"]
    assert {u["pod"]: u["used_mib"] for u in dog["uses"]} == {
        "default/over": 3572, "default/within": 1524}
    assert out["targets"] == {
        "mps_past_limit_refused": True, "mps_throughput_25_to_45_percent": True,
        "pair_caps_hold": True, "pair_split_even_within_15_percent": True,
        "restart_adopted_and_client_finished": True,
        "watchdog_breach_within_one_interval": True}
    assert "Traceback" not in done.stderr


def test_the_install_and_user_checks_run_through_the_agent(tmp_path: Path) -> None:
    """``installed`` on a bundle of stand-ins (the agent picks the CUDA 12 build for NVML's
    12.4 driver, installs and checks it), ``mps-hami-core`` on the same bundle, and
    ``users``: vgpu's scheduler on the agent's one MPS GPU keeps the second uid off it."""
    bundle = hami_standin.bundle(tmp_path / "bundle")
    code = RUN.format(child=str(FAKE_CHILD), control=f"{sys.executable} {FAKE_CONTROL}")
    code = code.replace('"--checks", "mps,pair,fault,restart,watchdog"',
                        f'"--checks", "installed,mps-hami-core,users", '
                        f'"--hami-bundle", {str(bundle)!r}')
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    installed = out["installed"]
    library = installed["hami_core_library"]
    assert library["ok"] is True and library["cuda"] == 12
    assert library["sha256"] == hami_standin.sha256(
        bundle / "cuda12" / "libvgpu.so")
    assert installed["mode"] == "hami-core" and installed["enforced_by_agent"] is True
    assert installed["env"]["CUDA_DEVICE_MEMORY_LIMIT_0"] == "4096m"
    combined = out["mps-hami-core"]
    assert combined["mode"] == "mps-hami-core", combined
    assert combined["env"]["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=4096M"
    assert combined["env"]["CUDA_DEVICE_SM_LIMIT"] == "0"
    users = out["users"]
    pods = {p["pod"]: p for p in users["pods"]}
    assert pods["first"]["gpu"] == "GPU-0" and pods["first"]["recorded_uid"] == 1000
    assert pods["other-user"]["gpu"] is None
    assert "too few GPUs whose MPS server may serve the pod's user (runAsUser)" in \
        pods["other-user"]["why"]
    assert pods["same-user"]["gpu"] == "GPU-0"
    assert out["targets"] == {
        "installed_library_checked": True, "installed_past_limit_refused": True,
        "mps_hami_core_total_is_the_grant": True, "mps_hami_core_past_limit_refused": True,
        "mps_hami_core_throughput_25_to_45_percent": True,
        "users_one_uid_per_mps_gpu": True, "users_same_uid_joins": True}
    assert "Traceback" not in done.stderr
