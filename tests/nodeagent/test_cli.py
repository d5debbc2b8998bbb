from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.nodeagent.conftest import DEFAULT_GPUS
from tests.support.kubelet import KubeletStandIn, device_plugin_dir
from vgpu.cli import main


def test_help_lists_the_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["nodeagent", "--help"])
    out = capsys.readouterr().out
    for flag in ("--node-name", "--fake-devices", "--device-plugin-dir", "--kubeconfig",
                 "--config", "--metrics-port", "--proc-root", "--no-cluster"):
        assert flag in out


@pytest.fixture
def no_cluster_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    # VGPU_* settings of the caller's shell (or CI's own, like VGPU_CI_VENV) are not ours.
    for name in list(os.environ):
        if name.startswith("VGPU_") or name in ("NODE_NAME", "KUBECONFIG",
                                                "KUBERNETES_SERVICE_HOST"):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    devices = tmp_path / "gpus.json"
    devices.write_text(json.dumps({"devices": DEFAULT_GPUS}))
    return devices


@pytest.mark.parametrize(("args", "message"), [
    ([], "--node-name is required"),
    (["--node-name", "n", "--fake-devices", "/nonexistent.yaml"],
     "/nonexistent.yaml: cannot read the fake-device file"),
    (["--node-name", "n", "--fake-devices", "{devices}"],
     "no cluster configuration: pass --kubeconfig, set KUBECONFIG, or run inside a cluster; "
     "or pass --no-cluster"),
    (["--node-name", "n", "--fake-devices", "{devices}", "--no-cluster",
      "--device-plugin-dir", "/nonexistent-dir"],
     "device-plugin folder /nonexistent-dir does not exist"),
    (["--node-name", "n", "--fake-devices", "{devices}", "--no-cluster",
      "--metrics-port", "70000"], "--metrics-port: 70000 is not a port"),
    (["--node-name", "n", "--fake-devices", "{devices}", "--no-cluster",
      "--proc-root", "/nonexistent-proc"],
     "--proc-root /nonexistent-proc: no such folder (mount the host's /proc there"),
    (["--node-name", "n", "--config", "/nonexistent-config.yaml"],
     "/nonexistent-config.yaml: cannot read"),
])
def test_user_errors_are_one_line(no_cluster_env: Path, capsys: pytest.CaptureFixture[str],
                                  args: list[str], message: str) -> None:
    args = [a.replace("{devices}", str(no_cluster_env)) for a in args]
    assert main(["nodeagent", *args]) == 2
    err = capsys.readouterr().err
    assert f"vgpu nodeagent: error: {message}" in err
    assert "Traceback" not in err


def test_command_runs_against_the_kubelet_stand_in(no_cluster_env: Path) -> None:
    with device_plugin_dir() as folder:
        kubelet = KubeletStandIn(folder)
        kubelet.start()
        env = dict(os.environ, VGPU_LOG_FORMAT="json")
        process = subprocess.Popen(
            [sys.executable, "-m", "vgpu.cli", "nodeagent", "--node-name", "node-1",
             "--fake-devices", str(no_cluster_env), "--device-plugin-dir", folder,
             "--no-cluster", "--metrics-port", "0"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            request = kubelet.wait_registration(timeout=20)
            assert request.resource_name == "nvidia.com/gpu"
            devices = kubelet.devices().wait_for(lambda d: len(d) == 30)
            assert {d.health for d in devices} == {"Healthy"}
        finally:
            process.send_signal(signal.SIGTERM)
            output, _ = process.communicate(timeout=20)
            kubelet.stop()
        assert process.returncode == 0, output
        assert "node agent stopped" in output
        assert not os.path.exists(os.path.join(folder, "vgpu.sock"))
