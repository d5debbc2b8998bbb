"""The dashboards against a real Prometheus scraping the running components.

A real `vgpu webhook` and `vgpu nodeagent` (fake GPUs, a kubelet stand-in for the
device-plugin registration, this e2e API server for pods and nodes) run as processes;
Debian's Prometheus scrapes their /metrics every second. Every PromQL expression of
every dashboard panel and variable is then evaluated and must return data; a query
naming a metric no component exports returns none, and fails the same check.

Expressions that read the scheduler's metrics are skipped while this tree has no
`vgpu scheduler` to run (issue 5); they are checked by name in
tests/ops/test_dashboards.py all the same.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
import yaml

from tests.controlplane.cluster import ControlPlane
from tests.e2e.ops_support import MANIFESTS, ROOT, vgpu
from tests.ops import metrics_fixture
from tests.ops.promql import metric_names
from tests.support.kubelet import KubeletStandIn, short_tempdir
from vgpu.codecs import encode_heartbeat

DASHBOARDS = MANIFESTS / "dashboards"
# What Grafana puts in for its variables; a 1 s scrape interval makes 10 s rate windows.
GRAFANA = {"$__rate_interval": "10s", "$node": ".*", "$gpu": ".*"}
RUNNING = ("webhook", "nodeagent")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def queries() -> list[tuple[str, str]]:
    """(id, PromQL) for every panel target and query variable of every dashboard."""
    out = []
    for path in sorted(DASHBOARDS.glob("*.json")):
        board = json.loads(path.read_text())
        for panel in board["panels"]:
            for t in panel["targets"]:
                out.append((f"{path.stem}: {panel['title']} [{t['refId']}]", t["expr"]))
        for var in board["templating"]["list"]:
            if var["type"] == "query":
                match = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", var["definition"])
                assert match, var["definition"]
                selector, label = match.groups()
                # label_values(selector, label) needs series of the selector with the label.
                out.append((f"{path.stem}: variable {var['name']}",
                            f"count by ({label}) ({selector})"))
    return out


def for_prometheus(expr: str) -> str:
    for var, value in GRAFANA.items():
        expr = expr.replace(var, value)
    return expr


def needs_scheduler(expr: str) -> bool:
    return any(name.startswith("vgpu_scheduler_") for name in metric_names(expr))


@contextlib.contextmanager
def process(argv: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                                start_new_session=True)
        try:
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


class Prometheus:
    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}"

    def query(self, expr: str) -> list[dict[str, Any]]:
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=10) as resp:
            answer = json.load(resp)
        assert answer["status"] == "success", answer
        result: list[dict[str, Any]] = answer["data"]["result"]
        return result

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False


def wait(what: str, check: Any, seconds: float, log: Path | None = None) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            tail = log.read_text()[-3000:] if log and log.exists() else ""
            raise AssertionError(f"{what} not within {seconds:.0f} s\n{tail}")
        time.sleep(0.25)


@pytest.fixture(scope="module")
def prometheus(control_plane: ControlPlane) -> Iterator[Prometheus]:
    bin_dir = Path(subprocess.run(["bash", str(ROOT / "tests" / "e2e" / "prometheus.sh")],
                                  capture_output=True, text=True, check=True,
                                  timeout=300).stdout.strip().splitlines()[-1])
    work = Path(tempfile.mkdtemp(prefix="vgpu-prom-"))
    plugin_dir = short_tempdir("vp")
    kubelet = KubeletStandIn(plugin_dir)
    kubelet.start()
    tag = uuid.uuid4().hex[:6]
    node_name, namespace = f"prom-{tag}", f"prom-{tag}"

    # The cluster side: the agent's Node, and a pod placed on its first GPU the way the
    # scheduler's Binding leaves it (bind-phase allocating).
    control_plane.ensure_namespace(namespace)
    with control_plane.api_client() as client:
        core = kubernetes.client.CoreV1Api(client)
        core.create_node({"metadata": {"name": node_name, "labels": {"gpu": "on"}}})
        assignment = {"version": 1, "node": node_name, "containers": {
            "main": [{"uuid": f"GPU-{tag}-0", "memory_mib": 4096, "cores": 30}]}}
        core.create_namespaced_pod(namespace, {
            "metadata": {"name": "job", "annotations": {
                "vgpu.io/assignment": json.dumps(assignment),
                "vgpu.io/bind-phase": "allocating",
                "vgpu.io/bind-time": encode_heartbeat(dt.datetime.now(dt.UTC))}},
            "spec": {"nodeName": node_name, "automountServiceAccountToken": False,
                     "containers": [{"name": "main", "image": "busybox"}]}})

    devices = work / "devices.yaml"
    text = (MANIFESTS / "overlays" / "fake-gpus" / "devices.yaml").read_text()
    devices.write_text(text.replace("GPU-fake-${NODE_NAME}", f"GPU-{tag}"))
    certs = vgpu("certs", "--out-dir", str(work / "tls"))
    assert certs.returncode == 0, certs.stderr
    agent_port, hook_port, hook_metrics, prom_port = (free_port() for _ in range(4))
    scrape: dict[str, Any] = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [
            {"job_name": "webhook",
             "static_configs": [{"targets": [f"127.0.0.1:{hook_metrics}"]}]},
            # As the prometheus-operator overlay's PodMonitor: the workload's namespace,
            # pod and container labels win, and the series carry their node.
            {"job_name": "nodeagent", "honor_labels": True,
             "static_configs": [{"targets": [f"127.0.0.1:{agent_port}"],
                                 "labels": {"node": node_name}}]},
        ]}
    (work / "prometheus.yml").write_text(yaml.safe_dump(scrape))
    kubeconfig = str(control_plane.kubeconfig)
    with contextlib.ExitStack() as stack:
        stack.callback(kubelet.stop)
        stack.enter_context(process(
            [sys.executable, "-m", "vgpu.cli", "webhook", "--cert-file",
             str(work / "tls" / "tls.crt"), "--key-file", str(work / "tls" / "tls.key"),
             "--address", "127.0.0.1", "--port", str(hook_port), "--metrics-port",
             str(hook_metrics), "--kubeconfig", kubeconfig], work / "webhook.log"))
        stack.enter_context(process(
            [sys.executable, "-m", "vgpu.cli", "nodeagent", "--node-name", node_name,
             "--fake-devices", str(devices), "--device-plugin-dir", plugin_dir,
             "--kubeconfig", kubeconfig, "--metrics-port", str(agent_port)],
            work / "nodeagent.log"))
        stack.enter_context(process(
            [str(bin_dir / "prometheus"), f"--config.file={work / 'prometheus.yml'}",
             f"--storage.tsdb.path={work / 'data'}",
             f"--web.listen-address=127.0.0.1:{prom_port}"], work / "prometheus.log"))
        # The kubelet admits the pod's container: the agent's Allocate answers and marks
        # the pod allocated, so its grant and the Allocate metrics have series.
        try:
            kubelet.wait_registration(timeout=60)
            kubelet.devices().wait_for(lambda d: len(d) > 0, timeout=30)
            kubelet.admit_container(1)
        except Exception as exc:
            raise AssertionError(f"{exc}\n{(work / 'nodeagent.log').read_text()[-3000:]}") \
                from exc
        prom = Prometheus(prom_port)
        wait("prometheus ready", prom.ready, 60, work / "prometheus.log")

        def scraped() -> bool:
            result = prom.query("count_over_time(up[1m]) >= 4 and up == 1")
            return {r["metric"]["job"] for r in result} == set(RUNNING)

        wait("both components scraped 4 times", scraped, 90, work / "nodeagent.log")
        # The agent's grant shows once its pod watch has the pod.
        wait("the agent reports the pod's grant",
             lambda: prom.query("vgpu_container_memory_granted_bytes"), 30,
             work / "nodeagent.log")
        yield prom
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(plugin_dir, ignore_errors=True)


QUERIES = queries()


@pytest.mark.parametrize(("where", "expr"), QUERIES, ids=[q[0] for q in QUERIES])
def test_every_dashboard_query_returns_data(prometheus: Prometheus, where: str,
                                            expr: str) -> None:
    if needs_scheduler(expr) and metrics_fixture.live_exported("scheduler") is None:
        pytest.skip("reads the scheduler's metrics; no `vgpu scheduler` in this tree to run")
    assert prometheus.query(for_prometheus(expr)), f"{where}: no data for {expr}"


def test_a_query_of_a_metric_nobody_exports_returns_nothing(prometheus: Prometheus) -> None:
    assert prometheus.query("sum(vgpu_gpu_memory_total_bytes)")
    assert prometheus.query("sum(vgpu_gpu_memory_free_bytes)") == []


def test_every_dashboard_expression_is_valid_promql(tmp_path: Path) -> None:
    """promtool parses them all, the scheduler's included."""
    bin_dir = subprocess.run(["bash", str(ROOT / "tests" / "e2e" / "prometheus.sh")],
                             capture_output=True, text=True, check=True,
                             timeout=300).stdout.strip().splitlines()[-1]
    rules = {"groups": [{"name": "dashboards", "rules": [
        {"record": f"vgpu:dashboard_query_{i}", "expr": for_prometheus(expr)}
        for i, (_, expr) in enumerate(QUERIES)]}]}
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules))
    proc = subprocess.run([f"{bin_dir}/promtool", "check", "rules", str(tmp_path / "rules.yml")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
