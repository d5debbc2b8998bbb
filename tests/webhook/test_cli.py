"""``vgpu webhook`` as an operator runs it: flags, errors, serving, SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.webhook import certs
from tests.webhook.pods import ctr, pod, review
from vgpu.cli import main


def vgpu(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "vgpu.cli", *args], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "VGPU_LOG_FORMAT": "json", **(env or {})})


@pytest.fixture(autouse=True)
def keep_logging(monkeypatch: pytest.MonkeyPatch) -> None:
    # run() sets up logging on the stderr of the moment; under capsys that stream is closed
    # after the test, and every later log line of the session would fail.
    monkeypatch.setattr("vgpu_webhook.cli.logs.setup", lambda: None)


def test_help_lists_the_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["webhook", "--help"])
    out = capsys.readouterr().out
    for flag in ("--cert-file", "--key-file", "--port", "--metrics-port", "--kubeconfig",
                 "--config"):
        assert flag in out


def test_missing_certificate_is_a_clear_error(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["webhook", "--cert-file", str(tmp_path / "none.crt"),
                 "--key-file", str(tmp_path / "none.key")])
    err = capsys.readouterr().err
    assert code == 2
    assert "cannot load the TLS certificate" in err and "Traceback" not in err


def test_bad_port_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    certs.serving(certs.authority(), tmp_path / "tls.crt", tmp_path / "tls.key")
    code = main(["webhook", "--cert-file", str(tmp_path / "tls.crt"),
                 "--key-file", str(tmp_path / "tls.key"), "--port", "70000"])
    assert code == 2
    assert "--port 70000" in capsys.readouterr().err


def serving_line(process: subprocess.Popen[str], timeout: float = 20.0) -> dict[str, Any]:
    assert process.stderr is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line:
            break
        if line.startswith("{"):
            record: dict[str, Any] = json.loads(line)
            if record.get("event") == "webhook serving":
                return record
    raise AssertionError("the webhook did not report serving")


def test_serves_by_flags_and_stops_on_sigterm(tmp_path: Path) -> None:
    ca = certs.authority()
    ca_file = ca.write(tmp_path / "ca.crt")
    certs.serving(ca, tmp_path / "tls.crt", tmp_path / "tls.key")
    (tmp_path / "config.yaml").write_text("version: v1\nschedulerName: gpu-sharing\n")
    process = vgpu("webhook", "--cert-file", str(tmp_path / "tls.crt"),
                   "--key-file", str(tmp_path / "tls.key"), "--port", "0",
                   "--metrics-port", "0", "--address", "127.0.0.1",
                   "--config", str(tmp_path / "config.yaml"),
                   # No cluster: neither in-cluster nor a kubeconfig to find.
                   env={"KUBERNETES_SERVICE_HOST": "", "KUBECONFIG": "", "HOME": str(tmp_path)})
    try:
        record = serving_line(process)
        assert record["scheduler"] == "gpu-sharing"
        context = ssl.create_default_context(cafile=str(ca_file))
        # MiB, not a share of a GPU: with no cluster there is no GPU to charge a share on.
        body = json.dumps(review(pod(ctr("c", {"nvidia.com/gpu": "1",
                                               "nvidia.com/gpumem": "1000"})))).encode()
        request = urllib.request.Request(f"https://127.0.0.1:{record['port']}/mutate",
                                         data=body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            answer = json.loads(response.read())
        assert answer["response"]["allowed"] is True
        # The operations port is HTTPS (a self-signed certificate: no files were given);
        # the probes are open, /metrics is not, and with no API server to ask, for nobody.
        unverified = ssl.create_default_context()
        unverified.check_hostname, unverified.verify_mode = False, ssl.CERT_NONE
        ops = f"https://127.0.0.1:{record['metrics_port']}"
        with urllib.request.urlopen(f"{ops}/readyz", timeout=10, context=unverified) as response:
            assert response.status == 200
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{ops}/metrics", timeout=10, context=unverified)
        assert refused.value.code == 403
        assert "no API server" in refused.value.read().decode()
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(timeout=15)
        finally:
            process.kill()
    assert code == 0
